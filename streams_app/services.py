"""The action layer: every change the console makes to a monitored Redis goes through here.

One place decides, for the HTML pages and the JSON API alike (SPEC section 3):

* who may do what (:data:`ACTION_ROLES`): checked here, where the action runs, so a hidden button is
  never the only thing between a viewer and a purge;
* that nothing changes while the console is read-only (``BUSCONSOLE_READ_ONLY=1``), for any role;
* that each attempt leaves exactly one :class:`~streams_app.models.AuditEvent`, whether it worked,
  failed or was refused, with how long it took and how many entries it changed.

Views validate input and call the ``<entity>_<verb>`` functions below; those call the access layer
(:mod:`streams_app.redis_ops.actions`) inside :func:`action_audit`. Long work (requeue of a whole DLQ,
replay of a range) becomes a :class:`~streams_app.models.Job` run by Celery (:mod:`streams_app.jobs`).
"""

from __future__ import annotations

import logging
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, TypeVar, cast

from django import forms
from django.conf import settings
from django.core.exceptions import PermissionDenied
from django.http import Http404

from streams_app import auth, jobs
from streams_app.forms import validated
from streams_app.live import broadcast
from streams_app.models import ApiToken, AuditEvent, Job
from streams_app.redis_ops import actions, conventions, reads
from streams_app.redis_ops.decoding import display_text
from streams_app.redis_ops.errors import InvalidArgument, OpsError

if TYPE_CHECKING:
    from django.contrib.auth.base_user import AbstractBaseUser

    from streams_app.auth import UserLike

log = logging.getLogger(__name__)

T = TypeVar("T")

#: The least role each action needs (SPEC section 3). An action missing here is refused to everyone,
#: so a new button cannot ship without deciding who may press it.
ACTION_ROLES: dict[str, auth.Role] = {
    "claim": auth.Role.OPERATOR,
    "autoclaim": auth.Role.OPERATOR,
    "ack": auth.Role.OPERATOR,
    "rewind": auth.Role.OPERATOR,
    "rewind.preview": auth.Role.OPERATOR,
    "dlq.requeue": auth.Role.OPERATOR,
    "dlq.requeue_all": auth.Role.OPERATOR,
    "replay": auth.Role.OPERATOR,
    "replay.count": auth.Role.OPERATOR,
    "job.cancel": auth.Role.OPERATOR,
    "job.resume": auth.Role.OPERATOR,
    "pipeline.run": auth.Role.OPERATOR,  # data pipeline (issue 7): start export + Spark rollups
    "dlq.delete": auth.Role.ADMIN,
    "dlq.purge": auth.Role.ADMIN,
    # admin actions: previews too, so a viewer never sees what a deletion would take
    "consumer.delete.preview": auth.Role.ADMIN,
    "consumer.delete": auth.Role.ADMIN,
    "group.delete": auth.Role.ADMIN,
    "stream.trim.preview": auth.Role.ADMIN,
    "stream.trim": auth.Role.ADMIN,
    "stream.delete.preview": auth.Role.ADMIN,
    "stream.delete": auth.Role.ADMIN,
    # personal API tokens page: every user manages their own
    "token.create": auth.Role.VIEWER,
    "token.revoke": auth.Role.VIEWER,
}

#: Actions on the console's own records that read-only mode allows: it protects the monitored Redis,
#: and a read-only console is still read through the API, with personal tokens.
READ_ONLY_ALLOWED: frozenset[str] = frozenset({"token.create", "token.revoke"})

#: IDs kept in one audit row; a bigger selection is recorded by its count (``ids_count``).
AUDIT_MAX_IDS = 1000
_ERROR_CHARS = 2000


# --------------------------------------------------------------------------------------- the audit


@dataclass
class ActionRecord:
    """What one audit row will say; the code inside :func:`action_audit` fills in what it learns."""

    action: str
    conn: str
    stream: bytes | None = None
    group: bytes | None = None
    ids: list[str] = field(default_factory=list)
    params: dict[str, Any] = field(default_factory=dict)
    affected: int = 0


def action_authorize(*, user: UserLike | None, action: str) -> None:
    """Raise PermissionDenied unless ``user`` may run ``action`` now.

    Read-only mode is checked first: it refuses everyone, admins included, and its message says so
    rather than talking about roles (except for the console-only actions of :data:`READ_ONLY_ALLOWED`).
    """
    if action not in READ_ONLY_ALLOWED:
        auth.require_writable()
    role = ACTION_ROLES.get(action)
    if role is None:
        raise PermissionDenied(f"{action!r} is not an action the console knows.")
    auth.require_role(user, role)


def _is_preview(action: str) -> bool:
    """Previews and dry-run counts change nothing: no one needs telling."""
    return action.endswith((".preview", ".count"))


@contextmanager
def action_audit(
    *,
    user: UserLike | None,
    conn: str,
    action: str,
    stream: bytes | None = None,
    group: bytes | None = None,
    ids: Sequence[str] = (),
    params: Mapping[str, Any] | None = None,
) -> Iterator[ActionRecord]:
    """Check that ``user`` may run ``action``, run the block, and write one audit row either way.

    A refusal is written as ``denied`` and raised before the block runs; an exception inside the
    block (an invalid argument, Redis refusing or unreachable) is written as ``error`` and raised
    again, so the caller answers exactly as it would have without the audit. The block may fill in
    the record (IDs it resolved, parameters, ``affected``) as it goes.
    """
    record = ActionRecord(
        action=action, conn=conn, stream=stream, group=group, ids=list(ids), params=dict(params or {})
    )
    started = time.monotonic()
    try:
        action_authorize(user=user, action=action)
    except PermissionDenied as exc:
        _audit_write(user=user, record=record, outcome=AuditEvent.Outcome.DENIED, error=str(exc), started=started)
        raise
    try:
        yield record
    except Exception as exc:
        _audit_write(user=user, record=record, outcome=AuditEvent.Outcome.ERROR, error=_describe(exc), started=started)
        raise
    _audit_write(user=user, record=record, outcome=AuditEvent.Outcome.OK, error="", started=started)
    if record.stream is not None and not _is_preview(action):
        # Open pages of the stream (tail, stream, group, DLQ) refresh themselves; never raises.
        broadcast.stream_changed(
            conn, record.stream, action=action, affected=record.affected,
            user=getattr(user, "get_username", lambda: "")(),
        )


def action_input(
    *,
    user: UserLike | None,
    conn: str,
    action: str,
    form: type[forms.Form],
    data: Mapping[str, Any],
    stream: bytes | None = None,
    group: bytes | None = None,
) -> dict[str, Any]:
    """Check the caller may run ``action``, then validate its input with ``form``.

    Views call this before the ``<entity>_<verb>`` function, so a viewer gets a 403 whatever they
    sent, and a refused or malformed request still leaves its one audit row (the action function,
    which writes the row of the attempt itself, is then never reached).
    """
    started = time.monotonic()
    record = ActionRecord(action=action, conn=conn, stream=stream, group=group)
    try:
        action_authorize(user=user, action=action)
    except PermissionDenied as exc:
        _audit_write(user=user, record=record, outcome=AuditEvent.Outcome.DENIED, error=str(exc), started=started)
        raise
    try:
        return validated(form, data)
    except InvalidArgument as exc:
        _audit_write(user=user, record=record, outcome=AuditEvent.Outcome.ERROR, error=exc.message, started=started)
        raise


def action_run(
    *,
    user: UserLike | None,
    conn: str,
    action: str,
    fn: Callable[[], T],
    stream: bytes | None = None,
    group: bytes | None = None,
    ids: Sequence[str] = (),
    params: Mapping[str, Any] | None = None,
    affected: Callable[[T], int] | None = None,
) -> T:
    """Run ``fn`` as ``action`` under the role, read-only and audit rules of :func:`action_audit`.

    ``affected(result)`` says how many entries the call changed, for the audit row.
    """
    with action_audit(
        user=user, conn=conn, action=action, stream=stream, group=group, ids=ids, params=params
    ) as record:
        result = fn()
        if affected is not None:
            record.affected = affected(result)
    return result


def audit_write_system(
    *,
    user: UserLike | None,
    conn: str,
    action: str,
    stream: bytes | None = None,
    params: Mapping[str, Any] | None = None,
    outcome: str,
    error: str = "",
    affected: int = 0,
    duration_ms: int = 0,
) -> AuditEvent:
    """An audit row for something the console did on a user's behalf after the request ended.

    Used by background jobs when they finish: the request that started a job is audited with
    ``affected=0`` (nothing had changed yet), this row says what the job changed in the end.
    """
    record = ActionRecord(action=action, conn=conn, stream=stream, params=dict(params or {}), affected=affected)
    return _audit_write(user=user, record=record, outcome=outcome, error=error, duration_ms=duration_ms)


def _audit_write(
    *,
    user: UserLike | None,
    record: ActionRecord,
    outcome: str,
    error: str,
    started: float | None = None,
    duration_ms: int | None = None,
) -> AuditEvent:
    if duration_ms is None:
        duration_ms = round((time.monotonic() - (started or time.monotonic())) * 1000)
    ids = [str(i) for i in record.ids]
    params = _jsonable(record.params)
    if len(ids) > AUDIT_MAX_IDS:
        params["ids_count"] = len(ids)
        ids = ids[:AUDIT_MAX_IDS]
    authenticated = user is not None and user.is_authenticated
    return AuditEvent.objects.create(
        who=user if authenticated else None,
        username=user.get_username() if authenticated else "",
        connection=record.conn,
        action=record.action,
        target_stream=record.stream,
        target_display=display_text(record.stream) if record.stream is not None else "",
        target_group=display_text(record.group) if record.group is not None else "",
        target_ids=ids,
        parameters=params,
        outcome=outcome,
        error=error[:_ERROR_CHARS],
        affected=record.affected,
        duration_ms=duration_ms,
    )


def _describe(exc: Exception) -> str:
    if isinstance(exc, OpsError):
        return exc.message
    return f"{type(exc).__name__}: {exc}"


def _jsonable(value: Any) -> Any:
    """Parameters as JSON: bytes (keys, field filters) become their display text."""
    if isinstance(value, bytes):
        return display_text(value)
    if isinstance(value, Mapping):
        return {str(_jsonable(k)): _jsonable(v) for k, v in value.items()}
    if isinstance(value, list | tuple | set | frozenset):
        return [_jsonable(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    return str(value)


# ------------------------------------------------------------------------------ pending entries


def pending_claim(
    *,
    user: UserLike | None,
    conn: str,
    key: bytes,
    group: bytes,
    ids: Sequence[str],
    consumer: bytes,
    min_idle_ms: int,
) -> actions.ClaimResult:
    """Give the selected pending entries to ``consumer``, but only those still idle ``min_idle_ms``.

    The idle guard is what makes a claim safe: an entry its consumer touched again meanwhile is
    skipped, not stolen. Entries deleted from the stream are reported as ``deleted``.
    """
    return action_run(
        user=user, conn=conn, action="claim", stream=key, group=group, ids=ids,
        params={"consumer": consumer, "min_idle_ms": min_idle_ms},
        fn=lambda: actions.claim(conn, key, group, ids=list(ids), consumer=consumer, min_idle_ms=min_idle_ms),
        affected=lambda result: len(result.claimed),
    )


def pending_autoclaim(
    *,
    user: UserLike | None,
    conn: str,
    key: bytes,
    group: bytes,
    consumer: bytes,
    min_idle_ms: int,
    count: int,
) -> actions.ClaimResult:
    """Sweep: claim up to ``count`` entries idle at least ``min_idle_ms`` to ``consumer`` (XAUTOCLAIM)."""
    return action_run(
        user=user, conn=conn, action="autoclaim", stream=key, group=group,
        params={"consumer": consumer, "min_idle_ms": min_idle_ms, "count": count},
        fn=lambda: actions.autoclaim(conn, key, group, consumer=consumer, min_idle_ms=min_idle_ms, count=count),
        affected=lambda result: len(result.claimed) + len(result.deleted),
    )


def pending_ack(*, user: UserLike | None, conn: str, key: bytes, group: bytes, ids: Sequence[str]) -> int:
    """Acknowledge entries without processing them (skip a poison message, clear deleted ones)."""
    return action_run(
        user=user, conn=conn, action="ack", stream=key, group=group, ids=ids,
        fn=lambda: actions.ack(conn, key, group, ids=list(ids)),
        affected=lambda acked: acked,
    )


# ------------------------------------------------------------------------------------- rewind


def group_rewind_preview(
    *, user: UserLike | None, conn: str, key: bytes, group: bytes, to: str
) -> actions.RewindPlan:
    """What rewinding to ``to`` would do, changing nothing: shown before the operator confirms."""
    return action_run(
        user=user, conn=conn, action="rewind.preview", stream=key, group=group, params={"to": to},
        fn=lambda: actions.rewind_preview(conn, key, group, to=to),
    )


def group_rewind(*, user: UserLike | None, conn: str, key: bytes, group: bytes, to: str) -> actions.RewindPlan:
    """Move the group's last-delivered ID to ``to`` (an ID or a time), keeping its lag known."""
    with action_audit(user=user, conn=conn, action="rewind", stream=key, group=group, params={"to": to}) as record:
        plan = actions.rewind(conn, key, group, to=to)
        record.params.update(
            previous_last_delivered_id=plan.current_last_delivered_id,
            last_delivered_id=plan.last_delivered_id,
            entries_read=plan.entries_read,
            will_redeliver=plan.will_redeliver,
        )
    return plan


# ---------------------------------------------------------------------------------------- DLQs


@dataclass(frozen=True, slots=True)
class DlqSummary:
    """One dead-letter queue as the DLQ list shows it."""

    key: bytes
    convention: str
    depth: int
    last_id: str | None
    source_streams: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class DlqListing:
    dlqs: tuple[DlqSummary, ...]
    complete: bool  # False: the scan budget ran out before the whole keyspace was seen


#: Streams a DLQ's sample is read from to name its source streams and refine its convention.
DLQ_SAMPLE = 10
#: DLQs whose entries are sampled for the list; beyond these the key's own hint is all we show.
DLQ_SAMPLED_MAX = 100


def dlq_list(*, conn: str, budget: int | None = None) -> DlqListing:
    """The dead-letter queues of ``conn``: streams whose key follows a DLQ convention (SPEC section 6).

    Scanned with one ``SCAN ... TYPE stream`` per convention's glob (``*:dlq``, ``omni-dlq:*`` and
    each configured pattern), so a server with millions of other keys costs at most ``budget``
    keys looked at per glob, never ``KEYS``. The newest few entries of each DLQ name the streams it
    feeds back into and tell ``eventbus`` from ``streams`` entries under a ``{stream}:dlq`` key.
    """
    budget = budget or settings.BUSCONSOLE_SCAN_BUDGET
    globs = [b"*" + conventions.DLQ_SUFFIX, conventions.OMNI_DLQ_PREFIX + b"*"]
    globs += [pattern.match for pattern in conventions.dlq_patterns() if pattern.match not in globs]
    found: dict[bytes, reads.StreamSummary] = {}
    complete = True
    for glob in globs:
        cursor, scanned = 0, 0
        while True:
            page = reads.streams_scan(conn, match=glob, cursor=cursor, count=reads.MAX_PAGE, budget=budget)
            for summary in page.streams:
                if conventions.detect_dlq(summary.key) is not None:
                    found.setdefault(summary.key, summary)
            cursor, scanned = page.next_cursor, scanned + page.scanned
            if cursor == 0:
                break
            if scanned >= budget:
                complete = False
                break
    out = []
    for index, key in enumerate(sorted(found)):
        summary = found[key]
        kind = conventions.detect_dlq(key)
        assert kind is not None
        sample: list[conventions.DlqEntry] = []
        if index < DLQ_SAMPLED_MAX and summary.length:
            sample, _ = actions.dlq_entries(conn, key, count=DLQ_SAMPLE)
        out.append(
            DlqSummary(
                key=key,
                convention=dlq_convention_of(kind.convention, sample),
                depth=summary.length,
                last_id=summary.last_id,
                source_streams=tuple(conventions.dlq_source_streams(key, sample)),
            )
        )
    return DlqListing(dlqs=tuple(out), complete=complete)


def dlq_convention_of(key_convention: str, sample: Sequence[conventions.DlqEntry]) -> str:
    """``eventbus-or-streams`` becomes ``eventbus`` or ``streams`` when the sampled entries agree."""
    if key_convention != conventions.EVENTBUS_OR_STREAMS:
        return key_convention
    seen = {entry.convention for entry in sample}
    return seen.pop() if len(seen) == 1 else key_convention


def dlq_require(*, conn: str, key: bytes) -> conventions.DlqKind:
    """The key's DLQ convention; InvalidArgument when no convention claims it (so no requeue target)."""
    kind = conventions.detect_dlq(key)
    if kind is None:
        raise InvalidArgument(f"{display_text(key)!r} is not a dead-letter queue the console knows.", conn=conn)
    return kind


def dlq_requeue(*, user: UserLike | None, conn: str, key: bytes, ids: Sequence[str]) -> actions.RequeueResult:
    """Requeue the given DLQ entries now, each by one Lua call (exists? XADD + XDEL).

    Entries another operator requeued or deleted meanwhile come back as ``missing``: two people
    pressing the same button produce one new entry, not two.
    """
    with action_audit(user=user, conn=conn, action="dlq.requeue", stream=key, ids=ids) as record:
        dlq_require(conn=conn, key=key)
        result = actions.requeue(conn, key, ids=list(ids))
        record.affected = len(result.requeued)
        record.params.update(
            missing=list(result.missing),
            targets=sorted({display_text(r.stream) for r in result.requeued}),
        )
    return result


def dlq_requeue_all(*, user: UserLike | None, conn: str, key: bytes, up_to: str, batch: int | None = None) -> Job:
    """Start a background job requeueing every entry of the DLQ up to ``up_to`` (inclusive).

    ``up_to`` is the newest entry the operator saw, so entries dead-lettered after the page loaded
    are never touched. The job runs in batches, survives a killed worker and never requeues an entry
    twice (see :func:`streams_app.jobs.job_run`).
    """
    params: dict[str, Any] = {"up_to": up_to}
    if batch is not None:
        params["batch"] = batch
    with action_audit(user=user, conn=conn, action="dlq.requeue_all", stream=key, params=params) as record:
        dlq_require(conn=conn, key=key)
        reads.stream_info(conn, key)  # a missing DLQ is a 404 now, not a failed job later
        job = jobs.job_create(
            kind=jobs.KIND_REQUEUE_ALL, conn=conn, user=user, key=key,
            parameters={"up_to": str(up_to), **({"batch": batch} if batch else {})},
        )
        record.params["job"] = job.pk
    return job


def dlq_delete(*, user: UserLike | None, conn: str, key: bytes, ids: Sequence[str]) -> int:
    """Delete DLQ entries for good (admin): for messages nobody should ever process."""
    with action_audit(user=user, conn=conn, action="dlq.delete", stream=key, ids=ids) as record:
        dlq_require(conn=conn, key=key)
        deleted = actions.dlq_delete(conn, key, ids=list(ids))
        record.affected = deleted
    return deleted


def dlq_purge(*, user: UserLike | None, conn: str, key: bytes, up_to: str, confirm: str) -> int:
    """Delete every DLQ entry up to ``up_to`` (admin), once the DLQ's name was typed to confirm.

    The typed name is checked here, not in the form, so the API cannot purge by accident either.
    """
    with action_audit(user=user, conn=conn, action="dlq.purge", stream=key, params={"up_to": up_to}) as record:
        dlq_require(conn=conn, key=key)
        if confirm != display_text(key):
            raise InvalidArgument("To purge, type the DLQ's name exactly as shown.", conn=conn)
        purged = actions.dlq_purge(conn, key, up_to=up_to)
        record.affected = purged
    return purged


# -------------------------------------------------------------------------------------- replay


@dataclass(frozen=True, slots=True)
class ReplayPreview:
    """A dry run: the exact range that will be copied, and how many entries it holds."""

    start: str
    end: str
    target: bytes
    match: dict[bytes, bytes]
    count: int


def stream_replay_count(
    *,
    user: UserLike | None,
    conn: str,
    key: bytes,
    start: str,
    end: str,
    target: bytes | None = None,
    match: Mapping[bytes, bytes] | None = None,
) -> ReplayPreview:
    """Count what a replay would copy, changing nothing; times are resolved to exact IDs here.

    The resolved IDs go into the confirm form, so the replay copies the range that was counted even
    if it names the same stream as its target (whose copies land after ``end``).
    """
    match = dict(match or {})
    target = target or key
    params = {"start": start, "end": end, "target": target, "match": match}
    with action_audit(user=user, conn=conn, action="replay.count", stream=key, params=params) as record:
        first, last = actions.resolve_range(conn, key, start, end)
        count = actions.replay_count(conn, key, start=first, end=last, match=match or None)
        record.params.update(start_id=first, end_id=last, count=count)
    return ReplayPreview(start=first, end=last, target=target, match=match, count=count)


def stream_replay(
    *,
    user: UserLike | None,
    conn: str,
    key: bytes,
    start: str,
    end: str,
    target: bytes | None = None,
    match: Mapping[bytes, bytes] | None = None,
    batch: int | None = None,
) -> Job:
    """Start a background job copying the range ``start``..``end`` of ``key`` to ``target``.

    Copies get new IDs and a ``_replayed_from`` field. The range is resolved to exact IDs before the
    job starts, so a replay into the same stream never copies its own copies.
    """
    match = dict(match or {})
    target = target or key
    params = {"start": start, "end": end, "target": target, "match": match}
    with action_audit(user=user, conn=conn, action="replay", stream=key, params=params) as record:
        first, last = actions.resolve_range(conn, key, start, end)
        job = jobs.job_create(
            kind=jobs.KIND_REPLAY, conn=conn, user=user, key=key,
            parameters={
                "start": first,
                "end": last,
                "target": target.hex(),
                "target_text": display_text(target),
                "match": [[name.hex(), value.hex()] for name, value in match.items()],
                **({"batch": batch} if batch else {}),
            },
        )
        record.params.update(start_id=first, end_id=last, job=job.pk)
    return job


# ---------------------------------------------------------------------------------------- jobs


def job_cancel(*, user: UserLike | None, job: Job) -> Job:
    """Ask a queued or running job to stop after its current batch (what it did stays done)."""
    with action_audit(user=user, conn=job.connection, action="job.cancel", params={"job": job.pk}) as record:
        record.params["cancelled"] = jobs.job_cancel(job_id=job.pk)  # False: it had finished already
    job.refresh_from_db()
    return job


def job_resume(*, user: UserLike | None, job: Job) -> Job:
    """Run a failed, cancelled or stuck job again from where it stopped."""
    with action_audit(user=user, conn=job.connection, action="job.resume", params={"job": job.pk}):
        jobs.job_resume(job_id=job.pk)
    job.refresh_from_db()
    return job


# ------------------------------------------------------------------------------- admin actions


def consumer_delete_preview(
    *, user: UserLike | None, conn: str, key: bytes, group: bytes, consumer: bytes
) -> actions.ConsumerPlan:
    """The consumer's pending count, shown before the admin confirms deleting it."""
    return action_run(
        user=user, conn=conn, action="consumer.delete.preview", stream=key, group=group,
        params={"consumer": consumer},
        fn=lambda: actions.consumer_delete_preview(conn, key, group, consumer=consumer),
    )


def consumer_delete(
    *, user: UserLike | None, conn: str, key: bytes, group: bytes, consumer: bytes, force: bool = False
) -> actions.ConsumerDeleted:
    """Delete a consumer of a group (admin); refused while it owns pending entries unless ``force``.

    Its pending entries would leave the PEL for good (nobody is told about them again), so the safe
    order is: claim them to another consumer, then delete. ``force`` drops them, and the audit row
    says how many (``affected``).
    """
    params = {"consumer": consumer, "force": force}
    with action_audit(user=user, conn=conn, action="consumer.delete", stream=key, group=group, params=params) as record:
        result = actions.consumer_delete(conn, key, group, consumer=consumer, force=force)
        record.affected = result.pending_dropped
        record.params["pending_dropped"] = result.pending_dropped
    return result


def group_delete(
    *, user: UserLike | None, conn: str, key: bytes, group: bytes, confirm: str
) -> actions.GroupDestroyed:
    """Delete a consumer group (admin), once its name was typed to confirm; the stream stays.

    The typed name is checked here, not in the form, so the API cannot delete by accident either.
    """
    with action_audit(user=user, conn=conn, action="group.delete", stream=key, group=group) as record:
        if confirm != display_text(group):
            raise InvalidArgument("To delete the group, type its name exactly as shown.", conn=conn)
        result = actions.group_destroy(conn, key, group)
        record.affected = result.pending_dropped
        record.params.update(
            consumers=result.consumers, pending_dropped=result.pending_dropped,
            last_delivered_id=result.last_delivered_id,
        )
    return result


def stream_trim_preview(
    *, user: UserLike | None, conn: str, key: bytes, maxlen: int | None = None, minid: str | None = None
) -> actions.TrimPlan:
    """How many entries a trim removes ("about" for MAXLEN ~) and which groups have pending ones there."""
    params = {"maxlen": maxlen} if maxlen is not None else {"minid": minid}
    with action_audit(user=user, conn=conn, action="stream.trim.preview", stream=key, params=params) as record:
        plan = actions.trim_preview(conn, key, maxlen=maxlen, minid=minid)
        if plan.minid:
            record.params["minid"] = plan.minid  # a time, resolved to the exact ID the trim will use
        record.params.update(will_remove=plan.will_remove, approximate=plan.approximate)
    return plan


def stream_trim(
    *, user: UserLike | None, conn: str, key: bytes, maxlen: int | None = None, minid: str | None = None
) -> actions.TrimResult:
    """Trim the stream (admin): keep about the newest ``maxlen`` entries, or drop those older than ``minid``."""
    params = {"maxlen": maxlen} if maxlen is not None else {"minid": minid}
    with action_audit(user=user, conn=conn, action="stream.trim", stream=key, params=params) as record:
        result = actions.trim(conn, key, maxlen=maxlen, minid=minid)
        record.affected = result.removed
        record.params.update(strategy=result.strategy, length_after=result.length)
        if result.minid:
            record.params["minid"] = result.minid
    return result


def stream_entries_delete_preview(
    *, user: UserLike | None, conn: str, key: bytes, ids: Sequence[str]
) -> actions.EntriesPlan:
    """Which of the IDs exist and which are pending in some group, before the admin confirms."""
    return action_run(
        user=user, conn=conn, action="stream.delete.preview", stream=key, ids=ids,
        fn=lambda: actions.entries_delete_preview(conn, key, ids=list(ids)),
    )


def stream_entries_delete(
    *, user: UserLike | None, conn: str, key: bytes, ids: Sequence[str]
) -> actions.EntriesDeleted:
    """XDEL entries (admin). Deleted entries still pending in a group stay there until acked."""
    with action_audit(user=user, conn=conn, action="stream.delete", stream=key, ids=ids) as record:
        result = actions.entries_delete(conn, key, ids=list(ids))
        record.affected = len(result.deleted)
        record.params.update(
            missing=list(result.missing),
            still_pending={display_text(p.group): list(p.ids) for p in result.pending},
        )
    return result


# -------------------------------------------------------------------------- personal API tokens


def token_issue(*, user: UserLike | None, name: str) -> tuple[ApiToken, str]:
    """A new personal API token for ``user``: the row and the raw token, shown to them once."""
    with action_audit(user=user, conn="", action="token.create", params={"name": name}) as record:
        owner = cast("AbstractBaseUser", user)  # action_audit refused anonymous users
        token, raw = auth.token_create(user=owner, name=name)
        record.params.update(token_id=token.pk, prefix=token.prefix)
        record.affected = 1
    return token, raw


def token_revoke(*, user: UserLike | None, token_id: int) -> ApiToken:
    """Delete one of ``user``'s own tokens; another user's token is a 404 (and an audited error)."""
    with action_audit(user=user, conn="", action="token.revoke", params={"token_id": token_id}) as record:
        token = ApiToken.objects.filter(pk=token_id, user_id=getattr(user, "pk", None)).first()
        if token is None:
            raise Http404("You have no API token with that id.")
        record.params.update(name=token.name, prefix=token.prefix)
        token.delete()
        record.affected = 1
    return token
