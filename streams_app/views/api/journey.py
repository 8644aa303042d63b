"""``GET /api/v1/c/<conn>/journey/?q=...&stream=...``: every place one event has been, on one timeline.

What ties an event's entries together and how each read is bounded: :mod:`eventbus.journey.trace`; the
operator actions from the audit log: :mod:`streams_app.journey`. The page (:mod:`streams_app.views.journey`)
reads the same query string with :func:`journey_params` and shows the same steps.
"""

from __future__ import annotations

from typing import Any, Literal

from django.http import HttpRequest, JsonResponse
from pydantic import ConfigDict, Field

from eventbus.search.query import MAX_QUERY
from eventbus.text import as_bytes
from streams_app import journey as journeys
from streams_app.redis_ops import client
from streams_app.views import links
from streams_app.views.api.endpoint import api_endpoint
from streams_app.views.api.replies import EntryIdText, Reply
from streams_app.views.api.schemas import Query, parse, text

EXAMPLE_EVENT = "0989baa0fa114795956aef8dfb2db9f8"


class JourneyQuery(Query):
    """Start from ``q``: an entry ID (``<ms>-<seq>``, with exactly one ``stream``), the bus's event id (32
    hex digits), a correlation id (``by=correlation``) or a search query (plain text or a CEL expression,
    as the stream search takes it; refused with a 400 when too costly). ``by`` says which when the shape
    does not (``auto``: an entry ID's or an event id's shape, else a query). ``stream`` names a stream to
    look in (repeat it, at most 10). ``cursor`` continues an answer whose ``coverage.complete`` is false
    (its ``coverage.next``). One answer reads at most 50,000 entries in 3 seconds."""

    q: text(min_length=1, max_length=MAX_QUERY)  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    stream: list[text(min_length=1, max_length=4096)] = Field(min_length=1, max_length=journeys.MAX_STREAMS)  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    by: Literal["auto", "entry", "event", "correlation", "search"] = "auto"
    cursor: text(min_length=3, max_length=48) | None = None  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type


class JourneyAudit(Reply):
    id: int
    user: str | None = None
    action: str
    at: str
    at_ms: int
    outcome: str
    affected: int
    target: str
    group: str | None = None
    ids: list[str]
    job: int | None = None


class JourneyStep(Reply):
    """One step: ``kind`` is publish, retry, requeue, replay, copy (entries of the event), delivery (a
    group and an entry: ``state`` pending, acked, skipped or not_delivered), failed, retry_scheduled,
    waiting (a retry in the retry set), dead_letter (``state`` present, gone or unknown), or operator (an
    audit row); ``at`` is null when Redis keeps no time for it (an acknowledgement: ``at_ms`` is then its
    entry's time, where it sorts)."""

    kind: str
    at_ms: int
    at: str | None
    text: str
    key: str = ""
    entry_id: EntryIdText | None = None
    group: str | None = None
    time_known: bool = True
    consumer: str | None = None
    attempt: int | None = None
    error: str | None = None
    state: str | None = None
    fields: dict[str, str] | None = None
    audit: JourneyAudit | None = None
    extra: dict[str, Any] | None = None
    url: str | None = None


class JourneyCoverage(Reply):
    """``entries_read`` distinct entries (and retry-set members) of the ``entries_total`` held by the
    ``keys`` looked at, with ``commands`` sent in ``elapsed_ms``; ``complete`` is false when a budget
    stopped a read, and ``next`` is then the ``cursor`` that continues the start's scan (null when only a
    follow-up read was cut short: the notes say which)."""

    entries_read: int
    reads: int
    entries_total: int
    keys: int
    key_lengths: dict[str, int]
    commands: int
    elapsed_ms: int
    complete: bool
    next: str | None


class JourneyStart(Reply):
    by: str
    value: str
    streams: list[str]


class JourneyOther(Reply):
    stream: str
    entry_id: EntryIdText


class JourneyReply(Reply):
    """The event's ``steps`` in time order; ``others``: entries of other events the start matched (a
    query, a correlation id shared by several events), each the start of its own journey."""

    start: JourneyStart
    found: bool
    stream: str | None
    event_id: str | None
    first_id: EntryIdText | None
    groups: list[str]
    steps: list[JourneyStep]
    others: list[JourneyOther]
    coverage: JourneyCoverage
    summary: str
    too_costly: int
    notes: list[str]

    model_config = ConfigDict(
        frozen=True,
        json_schema_extra={"examples": [{
            "start": {"by": "event", "value": EXAMPLE_EVENT, "streams": ["orders"]}, "found": True,
            "stream": "orders", "event_id": EXAMPLE_EVENT, "first_id": "1700000000000-0", "groups": ["billing"],
            "steps": [{"kind": "publish", "at_ms": 1700000000000, "at": "2023-11-14T22:13:20.000Z",
                       "text": "published to orders as 1700000000000-0", "key": "orders",
                       "entry_id": "1700000000000-0", "time_known": True}],
            "others": [], "coverage": {"entries_read": 3, "reads": 3, "entries_total": 10, "keys": 2,
                                       "key_lengths": {"orders": 8, "{orders}:metrics": 2}, "commands": 9,
                                       "elapsed_ms": 2, "complete": True, "next": None},
            "summary": "looked at 3 of 10 entries in 2 keys, in 2 ms (9 commands)", "too_costly": 0, "notes": [],
        }]},
    )  # fmt: skip


def journey_params(request: HttpRequest) -> JourneyQuery:
    """The query string read by :class:`JourneyQuery` (``stream`` repeated)."""
    given: dict[str, Any] = {name: request.GET[name] for name in ("q", "by", "cursor") if name in request.GET}
    given["stream"] = request.GET.getlist("stream")
    return parse(JourneyQuery, given)


def journey_run(request: HttpRequest, conn: str, params: JourneyQuery) -> journeys.Journey:
    start = journeys.start_parse(params.q, [as_bytes(s) for s in params.stream], params.by)
    return journeys.journey_for(user=request.user, conn=conn, start=start, cursor=params.cursor)


def step_url(conn: str, journey: journeys.Journey, step: Any) -> str | None:
    """The page of the place a step happened: its entry, its dead letter, its group."""
    stream = journey.trace.stream
    if stream is None or not step.entry_id:
        return links.group_url(conn, stream, step.group.encode()) if stream and step.group else None
    if step.kind == "dead_letter":
        present = next((d for d in journey.trace.dead if d.id == step.entry_id and d.present), None)
        return links.dlq_entry_url(conn, present.key, step.entry_id) if present else None
    if step.entry_id in journey.trace.entries:
        return links.entry_url(conn, stream, step.entry_id)
    return None


@api_endpoint(
    method="GET",
    summary="The journey of one event: its publish, groups, failures, retries, dead letters and requeues",
    tag="streams",
    query=JourneyQuery,
    replies={200: JourneyReply},
)
def journey(request: HttpRequest, conn: str) -> JsonResponse:
    """A bad start (an entry ID with no or several streams, a key that is not a stream, an expression
    that does not parse or costs too much) is a 400 that says why."""
    client.connection(conn)
    found = journey_run(request, conn, journey_params(request))
    doc = found.json()
    for step, shown in zip(found.steps, doc["steps"], strict=True):
        shown["url"] = step_url(conn, found, step)
    return JsonResponse(doc)
