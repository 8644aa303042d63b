"""The journey of one event on the console: the bus's bounded reads (:mod:`eventbus.journey`, through
:mod:`streams_app.redis_ops.journey`) seen through the reader's masks, with the operator actions of the
audit log put on the same timeline (:mod:`.audit`).

A search start is compiled by the console's search (:func:`streams_app.search.compile_query`: its cost
bound refuses a too costly expression with a 400 before anything runs); the copies a requeue through the
console made are probed by the IDs its audit rows name, so they are found without scanning the stream.
Reads only: a viewer may open any journey. It may import ``audit``, ``masking``, ``search`` and
``redis_ops``.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from eventbus import journey as core
from streams_app.masking.apply import search_mask
from streams_app.redis_ops import journey as journey_reads
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.search import compile_query

from . import audit

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike

Journey = core.Journey
MAX_STREAMS = 10


def start_parse(value: str, streams: Sequence[bytes], by: str = "auto") -> core.Start:
    """What the operator typed as a start (:func:`eventbus.journey.start_of`); InvalidArgument (400) if none."""
    if len(streams) > MAX_STREAMS:
        raise InvalidArgument(f"Look in at most {MAX_STREAMS} streams at once.")
    try:
        return core.start_of(value, streams, by)
    except core.JourneyError as exc:
        raise InvalidArgument(str(exc)) from exc


def journey_for(
    *, user: UserLike | None, conn: str, start: core.Start, cursor: str | None = None, budget: int = core.BUDGET
) -> Journey:
    """The journey ``start`` names, as ``user`` may see it, with the audit log's operator actions."""
    query = compile_query(start.value) if start.by == "search" else None

    def probe(stream: bytes, dlq_keys: Sequence[bytes], since_ms: int) -> list[tuple[bytes, str]]:
        return audit.copies_named(conn, dlq_keys, since_ms, stream)

    def replays(stream: bytes, ids: Sequence[str], since_ms: int) -> list[tuple[bytes, str, str]]:
        return audit.replay_windows(conn, stream, ids, since_ms)

    def sources(stream: bytes, copy_id: str) -> list[bytes]:
        return audit.replay_sources(conn, stream, copy_id)

    found = journey_reads.journey_read(
        conn, start, mask=lambda key: search_mask(user, conn, key), query=query, cursor=cursor, budget=budget,
        probe=probe, replays=replays, sources=sources,
    )  # fmt: skip
    return operator_steps(conn, found)


def operator_steps(conn: str, journey: Journey) -> Journey:
    """``journey`` with every audit row that touches its IDs: on the requeued copy it made, or a step of its own."""
    trace = journey.trace
    if not trace.found_any or trace.stream is None or trace.reader is None:
        return journey
    # A row's IDs and ranges are of its own key (a DLQ's range says nothing of the stream's IDs, which can
    # fall inside it), so each row is matched against the IDs of the event in that key only: a dead letter
    # gone from its DLQ (known from its copy) may be in any DLQ, and a requeue names its copies' stream.
    in_stream = set(trace.entries) | {m.entry_id for m in trace.metrics}
    gone = {d.id for d in trace.dead if not d.present}
    stream_text = trace.stream.decode("utf-8", "replace")

    def ids_of(row: audit.AuditEvent) -> set[str]:
        key = bytes(row.target_stream or b"")
        found = {d.id for d in trace.dead if d.key == key}
        if key == trace.stream:
            return found | in_stream
        return found | gone | (set(trace.entries) & audit.copies_in(row, stream_text))

    keys = {trace.stream, *trace.reader.keys, *(d.key for d in trace.dead if d.key)}
    first_ms = min(s.at_ms for s in journey.steps) if journey.steps else 0
    copies = {s.entry_id: s for s in journey.steps if s.kind == "requeue"}
    sources = {(s.fields or {}).get("_requeued_from"): s for s in copies.values()}
    replays = [s for s in journey.steps if s.kind == "replay"]
    for row in reversed(audit.rows_about(conn, keys, first_ms)):  # oldest first
        hit = audit.touches(row, ids_of(row))
        if not hit:
            continue
        shown = audit.row_json(row, hit)
        made = [s for s in replays if s.audit is None and (s.fields or {}).get("_replayed_from") in hit
                and audit.made_copy(row, s.key, s.entry_id or "")]  # fmt: skip
        for step in made:  # the replay job that made this copy: who replayed it, and its row
            step.audit = shown
            step.text += f" by {shown['user'] or 'the console'} ({shown['action']}, audit row {row.pk})"
        if made:
            continue
        found = next((copies.get(i) or sources.get(i) for i in hit if copies.get(i) or sources.get(i)), None)
        if found is not None and found.audit is None:
            found.audit = shown
            found.text += f" by {shown['user'] or 'the console'} ({shown['action']}, audit row {row.pk})"
            continue
        touched = ", ".join(hit[:5]) + (f" and {len(hit) - 5} more" if len(hit) > 5 else "")
        who = shown["user"] or "the console"
        consumer = (row.parameters or {}).get("consumer") if isinstance(row.parameters, dict) else None
        if row.action in ("claim", "autoclaim") and consumer:
            text = f"{row.target_group}: {touched} claimed by {who} to {consumer} ({row.action}, {row.outcome})"
        else:
            text = f"{who}: {row.action} ({row.outcome}) touching {touched}"
        text += f" (audit row {row.pk})"
        journey.steps.append(core.Step("operator", shown["at_ms"], text, key=row.target_display,
                                       group=row.target_group or None, audit=shown))  # fmt: skip
    journey.steps.sort(key=core.Step.sort_key)
    return journey
