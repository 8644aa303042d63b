"""The shapes the JSON API answers with, as pydantic models for the OpenAPI document.

Views build their replies from :mod:`streams_app.views.presenters` and the services' dataclasses;
these models describe them field by field (``tests/security/test_openapi.py`` checks real replies
against the document, and the fuzz tests check every reply they get). Models are open: a reply may
gain a field without breaking a client, so none forbids extra properties.
"""

from __future__ import annotations

from typing import Any, Literal

from pydantic import BaseModel, ConfigDict, RootModel

from streams_app.redis_ops.reads.groups import CONSUMER_SORTS, GROUP_SORTS
from streams_app.views.api.schemas import EXAMPLE_ID

EntryIdText = str  # an entry ID as Redis gave it: <ms>-<seq>


class Reply(BaseModel):
    model_config = ConfigDict(frozen=True)


def example(value: dict[str, Any]) -> ConfigDict:
    return ConfigDict(frozen=True, json_schema_extra={"examples": [value]})


# ----------------------------------------------------------------------------------------- errors


class ErrorDetail(Reply):
    code: str
    message: str


class ErrorReply(Reply):
    """Every refusal: ``code`` is machine-readable (``bad_request``, ``redis_error``, ``unauthorized``,
    ``token_expired``, ``forbidden``, ``csrf_failed``, ``not_found``, ``conflict``, ``too_large``,
    ``unreachable``), ``message`` says what to change."""

    error: ErrorDetail

    model_config = example({"error": {"code": "bad_request", "message": "force: must be a boolean, true or false"}})


# -------------------------------------------------------------------------------------- reads


class ConnectionRow(Reply):
    name: str
    host: str
    port: int | None  # None for a unix socket
    db: int
    ok: bool
    redis_version: str | None  # INFO's redis_version: the Redis release whose commands it speaks (Valkey 8: 7.2.4)
    server: str | None  # what it is: "Redis 7.4.2", "Valkey 8.1.8"
    error: str | None


class ConnectionsReply(Reply):
    connections: list[ConnectionRow]

    model_config = example(
        {"connections": [{"name": "default", "host": "127.0.0.1", "port": 6379, "db": 0, "ok": True,
                          "redis_version": "7.4.2", "server": "Redis 7.4.2", "error": None}]}
    )


class StreamRow(Reply):
    """``key`` is text (bytes that are not UTF-8 as ``\\xNN``); ``url`` is its page."""

    key: str
    url: str
    api_url: str
    length: int
    first_id: EntryIdText | None
    last_id: EntryIdText | None
    groups: int
    pending: int
    is_dlq: bool
    #: the largest lag its groups report; when lag_exact is false because lag_unknown_groups > 0, a lower bound
    #: of the stream's lag; null without a group or when no group's lag is known (never 0 for unknown)
    lag: int | None = None
    lag_exact: bool = False  # true: every group's lag is known, so lag is the stream's lag
    lag_unknown_groups: int = 0  # groups whose lag Redis cannot tell (docs/architecture.md#lag-redis-cannot-tell)
    lag_unknown: bool = False  # true: lag_unknown_groups > 0
    internal: bool = False  # the event bus's own bookkeeping stream (its metric events)


class StreamsScanReply(Reply):
    """Scan order: ``next_cursor`` continues the SCAN over every primary (null when it is complete).
    ``complete`` is false when primaries of a cluster did not answer: ``missed`` names them
    (``host:port``) and their streams are not in this page."""

    streams: list[StreamRow]
    next_cursor: int | None
    complete: bool = True
    missed: list[str] = []


class FamilyMember(Reply):
    key: str
    url: str | None  # null when the stored text cannot give back the key's exact bytes
    length: int


class FamilyRowReply(Reply):
    """One family: ``pattern`` is its glob as text, ``kind`` where it comes from (``configured``, ``detected``
    from the keys' shape, or ``key``: a key alone); ``url`` its members' page (null for a glob too long to
    carry in a path); ``dlq_depth`` the entries of the DLQs feeding back into its streams."""

    name: str
    pattern: str
    kind: Literal["configured", "detected", "key"]
    url: str | None
    api_url: str | None
    stream_url: str | None
    keys: int
    entries: int
    groups: int
    pending: int
    dlq_depth: int
    dlq_keys: int
    oldest_id: EntryIdText | None
    newest_id: EntryIdText | None
    rate_per_s: float | None = None
    busiest: list[FamilyMember]


class FamiliesReply(Reply):
    """The families of the newest snapshot (``source`` "snapshot", ``as_of`` its tick), or of one bounded
    pass made now (``source`` "pass", asked with ``now``), or none before the first snapshot (``source``
    "none"; ``looked_at`` then counts the first pass under way, if any): ``looked_at`` of ``keys_total``
    keys (DBSIZE); ``complete`` is false when the pass stopped at
    its budget (``BUSCONSOLE_FAMILY_SCAN_BUDGET``) or primaries did not answer (``missed``). ``total``
    families, ``next_offset`` pages through them."""

    source: Literal["snapshot", "pass", "none"]
    as_of: str | None
    families: list[FamilyRowReply]
    total: int
    next_offset: int | None
    streams: int
    looked_at: int
    keys_total: int | None  # null: the server refused DBSIZE
    complete: bool
    missed: list[str]
    #: In family mode, the members that matter (DLQs, stuck streams, ...) the newest pass found beyond
    #: ``BUSCONSOLE_FAMILY_MEMBERS_MAX``, left without per-stream samples; 0 otherwise.
    members_left_out: int = 0


class FamilyMembersReply(Reply):
    """One page of a family's streams (``next_cursor`` continues the SCAN of its glob; null when done)."""

    name: str
    pattern: str
    kind: Literal["configured", "detected", "key"]
    streams: list[StreamRow]
    next_cursor: int | None
    scanned: int
    keys_total: int | None  # null: the server refused DBSIZE
    complete: bool
    missed: list[str]


class MirrorFilling(Reply):
    """The mirror before its first full pass has completed (a pass of many keys is done in parts, one
    per sync): ``synced`` streams so far of ``about`` keys in Redis (DBSIZE when the pass started; None
    when the server refused DBSIZE). No stream is shown as deleted meanwhile."""

    synced: int
    about: int | None


class StreamsFromMirrorReply(Reply):
    """A ``sort`` once the mirror holds the connection: every stream ranked in the database, like the
    page. ``as_of`` is the mirror's last sync; ``stale`` says it is older than three sync intervals.
    Figures are live where Redis answered (``missed`` names the primaries that did not)."""

    streams: list[StreamRow]
    source: Literal["mirror"]
    total: int
    next_offset: int | None
    as_of: str | None
    stale: bool
    complete: bool
    missed: list[str]
    filling: MirrorFilling | None = None


class StreamsByLengthReply(Reply):
    """``sort=length`` before the mirror's first sync (``source`` is ``scan``, ``mirror`` says
    ``empty``): the longest among ``sorted_among`` streams one scan budget found."""

    streams: list[StreamRow]
    next_offset: int | None
    sorted_among: int
    scan_complete: bool
    source: Literal["scan"] = "scan"
    mirror: Literal["empty"] = "empty"
    complete: bool = True
    missed: list[str] = []


class StreamsReply(RootModel[StreamsScanReply | StreamsFromMirrorReply | StreamsByLengthReply]):
    pass


class GroupRow(Reply):
    name: str
    consumers: int
    pending: int
    last_delivered_id: EntryIdText
    entries_read: int | None
    lag: int | None  # None: Redis cannot tell


class StreamReply(Reply):
    key: str
    url: str
    length: int
    first_id: EntryIdText | None
    last_id: EntryIdText | None
    last_generated_id: EntryIdText | None
    entries_added: int | None
    max_deleted_entry_id: EntryIdText | None
    is_dlq: bool
    #: the largest lag its groups report: a lower bound when lag_exact is false (see StreamRow)
    lag: int | None = None
    lag_exact: bool = False
    lag_unknown_groups: int = 0
    #: the first page of groups, most pending first; ``groups_url`` pages through all ``groups_total``
    groups: list[GroupRow]
    groups_total: int
    groups_url: str


class GroupsReply(Reply):
    """One page of the stream's groups in the order asked for; ``total`` groups in all, ``offset`` the
    place of the first one shown, ``next_offset`` where the next page starts (null on the last)."""

    groups: list[GroupRow]
    total: int
    offset: int
    next_offset: int | None
    sort: Literal[tuple(GROUP_SORTS)]  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    order: Literal["asc", "desc"]

    model_config = example(
        {"groups": [{"name": "billing", "consumers": 2, "pending": 4, "last_delivered_id": EXAMPLE_ID,
                     "entries_read": 10, "lag": 0}],
         "total": 1, "offset": 0, "next_offset": None, "sort": "pending", "order": "desc"}
    )


class DecodedValue(Reply):
    """One field decoded: ``value`` is JSON for ``json``/``msgpack``/``faststream``, text for ``text``,
    unspaced hex for ``hex``. ``raw_url`` (only when ``truncated``) downloads the whole value."""

    name: str
    format: Literal["json", "msgpack", "faststream", "text", "hex"]
    value: Any
    size: int
    truncated: bool
    raw_url: str | None = None


class EntryRow(Reply):
    id: EntryIdText
    fields: dict[str, str]
    decoded: list[DecodedValue]


class EntriesReply(Reply):
    """``next`` continues in the page's order (as ``before`` newest first, ``after`` oldest first);
    ``prev`` goes the other way."""

    entries: list[EntryRow]
    next: EntryIdText | None
    prev: EntryIdText | None

    model_config = example(
        {"entries": [{"id": EXAMPLE_ID, "fields": {"type": "order.created"},
                      "decoded": [{"name": "type", "format": "text", "value": "order.created", "size": 13,
                                   "truncated": False}]}],
         "next": None, "prev": None}
    )


class LongestIdle(Reply):
    """The entry pending the longest since its last delivery, and for how long: the maximum over the whole
    pending list (not the lowest ID's), read with a few bounded XPENDING probes. ``exact`` is false when
    the search stopped before the end of a long list: ``idle_ms`` is then a lower bound."""

    id: EntryIdText
    idle_ms: int
    exact: bool


class PendingSummary(Reply):
    count: int
    min_id: EntryIdText | None
    max_id: EntryIdText | None
    consumers: dict[str, int]
    longest_idle: LongestIdle | None = None  # null when nothing is pending


class RowPreview(Reply):
    """What a row's message holds, masked: its ``type`` field (null without one) and the start of its
    other fields decoded (``name=value``), each at most ``BUSCONSOLE_PREVIEW_CHARS`` characters, cut
    with an ellipsis."""

    type: str | None
    text: str


class PendingRow(Reply):
    """``exists`` is false for an entry deleted from the stream but still pending; its ``preview`` is then
    null."""

    id: EntryIdText
    consumer: str
    idle_ms: int
    deliveries: int
    exists: bool
    preview: RowPreview | None


class PendingReply(Reply):
    summary: PendingSummary
    entries: list[PendingRow]
    next: EntryIdText | None


class ConsumerRow(Reply):
    name: str
    pending: int
    idle_ms: int
    inactive_ms: int | None


class ConsumersReply(Reply):
    """One page of the group's consumers in the order asked for; ``total``, ``offset`` and
    ``next_offset`` as for the groups."""

    consumers: list[ConsumerRow]
    total: int
    offset: int
    next_offset: int | None
    sort: Literal[tuple(CONSUMER_SORTS)]  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    order: Literal["asc", "desc"]

    model_config = example(
        {"consumers": [{"name": "worker-1", "pending": 4, "idle_ms": 1200, "inactive_ms": None}],
         "total": 1, "offset": 0, "next_offset": None, "sort": "pending", "order": "desc"}
    )


# ------------------------------------------------------------------------------ pending entries


class ClaimReply(Reply):
    claimed: list[EntryIdText]
    skipped: list[EntryIdText]
    deleted: list[EntryIdText]

    model_config = example({"claimed": [EXAMPLE_ID], "skipped": [], "deleted": []})


class AutoclaimReply(ClaimReply):
    """``next`` is the cursor to sweep on from (null when the sweep is complete)."""

    next: EntryIdText | None


class AckReply(Reply):
    acked: int


class RewindReply(Reply):
    last_delivered_id: EntryIdText
    will_redeliver: int
    entries_read: int | None
    previous_last_delivered_id: EntryIdText
    lag_known: bool
    dry_run: bool


# ----------------------------------------------------------------------------------------- DLQs


class DlqRow(Reply):
    key: str
    url: str
    api_url: str
    convention: str
    depth: int
    last_id: EntryIdText | None
    source_streams: list[str]


class DlqListReply(Reply):
    """``complete`` is false when the scan budget ran out before the whole keyspace was seen, or when
    primaries of a cluster did not answer: ``missed`` names them (``host:port``)."""

    dlqs: list[DlqRow]
    complete: bool
    missed: list[str] = []


class DlqPayloadField(Reply):
    name: str
    format: str
    value: Any
    truncated: bool


class DlqEntryRow(Reply):
    id: EntryIdText
    convention: str
    original_stream: str | None
    original_id: str | None  # the attempt that failed last (each retry is a new entry)
    first_id: str | None = None  # the entry ID of the event's first publish; null when not recorded
    group: str | None
    error: str | None
    retries: int | None
    failed_at_ms: int | None
    payload: list[DlqPayloadField]
    preview: RowPreview  # of the payload a requeue writes back


class DlqEntriesReply(Reply):
    key: str
    entries: list[DlqEntryRow]
    next: EntryIdText | None


class RequeuedRow(Reply):
    dlq_id: EntryIdText
    stream: str
    new_id: EntryIdText


class RequeueFailure(Reply):
    dlq_id: EntryIdText
    reason: str


class RequeueReply(Reply):
    """``missing`` were no longer in the DLQ; ``failed`` stay in it, each with its reason."""

    requeued: list[RequeuedRow]
    missing: list[EntryIdText]
    failed: list[RequeueFailure]


class DeletedReply(Reply):
    deleted: int


class PurgedReply(Reply):
    purged: int


# ---------------------------------------------------------------------------------- replay, jobs


class JobCreated(Reply):
    """A background job was queued: follow it at ``api_url``."""

    job: int
    url: str
    api_url: str

    model_config = example({"job": 42, "url": "/jobs/42/", "api_url": "/api/v1/jobs/42"})


class ReplayCountReply(Reply):
    count: int
    start: str
    end: str
    target: str


class Job(Reply):
    """``done`` of ``total`` entries (``total`` null until known); ``error`` says why a job failed."""

    id: int
    kind: str
    state: str
    done: int
    total: int | None
    error: str | None
    url: str
    api_url: str


class JobLinks(Reply):
    key: str | None
    target: str | None


class JobReply(Job):
    links: JobLinks


class JobsReply(Reply):
    jobs: list[Job]
    next: int | None


# ------------------------------------------------------------------------------------------ audit


class AuditRow(Reply):
    id: int
    at: str
    user: str
    oidc_issuer: str | None  # the user's OpenID provider and their subject there (single sign-on), else null
    oidc_subject: str | None
    connection: str
    action: str
    stream: str | None
    group: str | None
    ids: list[Any]
    parameters: dict[str, Any]
    outcome: str
    error: str | None
    affected: int
    duration_ms: int


class AuditReply(Reply):
    events: list[AuditRow]
    next: int | None


# -------------------------------------------------------------------------------- admin actions


class ConsumerDeleted(Reply):
    consumer: str
    deleted: Literal[True]
    pending_dropped: int


class GroupDeleted(Reply):
    group: str
    deleted: Literal[True]
    consumers: int
    pending_dropped: int
    last_delivered_id: EntryIdText


class PendingAtRisk(Reply):
    group: str
    count: int
    more: bool
    oldest_id: EntryIdText


class TrimPreview(Reply):
    strategy: Literal["maxlen", "minid"]
    maxlen: int | None
    minid: EntryIdText | None
    length: int
    will_remove: int
    approximate: bool
    pending: list[PendingAtRisk]
    dry_run: Literal[True]


class TrimDone(Reply):
    strategy: Literal["maxlen", "minid"]
    maxlen: int | None
    minid: EntryIdText | None
    removed: int
    length: int
    dry_run: Literal[False]


class TrimReply(RootModel[TrimPreview | TrimDone]):
    pass


class EntriesDeletePreview(Reply):
    """``pending`` maps each group to the IDs it still has pending among those named."""

    existing: list[EntryIdText]
    missing: list[EntryIdText]
    pending: dict[str, list[EntryIdText]]
    dry_run: Literal[True]


class EntriesDeleted(Reply):
    deleted: int
    deleted_ids: list[EntryIdText]
    missing: list[EntryIdText]
    still_pending: dict[str, list[EntryIdText]]
    dry_run: Literal[False]


class EntriesDeleteReply(RootModel[EntriesDeletePreview | EntriesDeleted]):
    pass


class OpenApiReply(RootModel[dict[str, Any]]):
    """This document."""
