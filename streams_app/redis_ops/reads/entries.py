"""Entries: a page by exclusive cursors, one entry by ID, a batch by IDs, and the newest IDs.

Every read that hands out entry bytes takes the reader's ``mask`` (:data:`..types.EntryMask`) and
applies it before the entries leave.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from ..client import get_client
from ..commands import lookup, pipelined, require_stream, stream_read
from ..errors import InvalidArgument, NotFound, translated
from ..ids import parse_id, parse_position
from ..parsers import parse_entry
from ..types import Entry, EntryMask, StreamInfo, masked
from .limits import DEFAULT_PAGE, MAX_PAGE, check_count, validate_key
from .streams import stream_facts_and


@dataclass(frozen=True, slots=True)
class EntryPage:
    entries: tuple[Entry, ...]
    order: str  # "desc" (newest first) or "asc"
    next: str | None  # cursor to continue in ``order``: pass as before= (desc) or after= (asc)
    prev: str | None  # cursor to go the other way: pass as after= (desc) or before= (asc)


def entries_page(
    conn: str,
    key: bytes,
    *,
    order: str = "desc",
    after: str | None = None,
    before: str | None = None,
    at: str | None = None,
    count: int = DEFAULT_PAGE,
    mask: EntryMask | None,
) -> EntryPage:
    """One page of entries, by exclusive cursors, costing O(log N + count) at any depth, each entry as
    ``mask`` shows it (:data:`..types.EntryMask`).

    - ``before``/``after`` are exclusive entry IDs (the last ID of the previous page);
    - ``at`` is an ID, a millisecond or an ISO-8601 time: the page starts there, inclusive;
    - ``order`` is "desc" (newest first, the default) or "asc".
    With no cursor the page starts at the newest (desc) or oldest (asc) entry.
    """
    plan = _plan(key, order=order, after=after, before=before, at=at, count=count)
    raw = stream_read(conn, get_client(conn), key, *plan.command)
    return _page_of(plan, raw, mask)


def entries_page_with_facts(
    conn: str,
    key: bytes,
    *,
    order: str = "desc",
    after: str | None = None,
    before: str | None = None,
    at: str | None = None,
    count: int = DEFAULT_PAGE,
    mask: EntryMask | None,
) -> tuple[EntryPage, tuple[StreamInfo, list[bytes], tuple[str, ...]]]:
    """:func:`entries_page` and :func:`.streams.stream_info_with_dlqs` (the stream page's facts, groups
    and dead-letter queues) in one round trip where the two take two; the same replies, the same
    errors, the facts' first (a missing stream fails on its XINFO as the facts alone do)."""
    plan = _plan(key, order=order, after=after, before=before, at=at, count=count)
    info, dlqs, missed, replies = stream_facts_and(conn, key, [("TYPE", key), plan.command])
    if replies is None:  # the stream's node did not answer with the others (see stream_facts_and)
        raw = stream_read(conn, get_client(conn), key, *plan.command)
    else:
        key_type, raw = replies
        require_stream(conn, key_type)
        if isinstance(raw, Exception):
            with translated(conn):
                raise raw
    return _page_of(plan, raw, mask), (info, dlqs, missed)


@dataclass(frozen=True, slots=True)
class _Plan:
    """Which way Redis reads one page, and the command that reads it (``count`` + 1: is there more)."""

    command: tuple[object, ...]
    forward: bool  # XRANGE (True) or XREVRANGE
    order: str
    count: int
    came_from_cursor: bool


def _plan(
    key: bytes, *, order: str, after: str | None, before: str | None, at: str | None, count: int
) -> _Plan:
    validate_key(key)
    if order not in ("asc", "desc"):
        raise InvalidArgument("order must be 'asc' or 'desc'.")
    if sum(x is not None and x != "" for x in (after, before, at)) > 1:
        raise InvalidArgument("Give at most one of after, before and at.")
    count = check_count(count)

    # Decide which way Redis reads (forward = XRANGE) and where it starts.
    if after:
        forward, start = True, "(" + str(parse_id(after, what="after"))
    elif before:
        forward, start = False, "(" + str(parse_id(before, what="before"))
    elif at:
        pos = parse_position(at, what="at")
        forward = order == "asc"
        start = str(pos.lowest if forward else pos.highest)
    else:
        forward, start = order == "asc", "-" if order == "asc" else "+"
    if forward:
        command: tuple[object, ...] = ("XRANGE", key, start, "+", "COUNT", count + 1)
    else:
        command = ("XREVRANGE", key, start, "-", "COUNT", count + 1)
    return _Plan(command, forward, order, count, bool(after or before or at))


def _page_of(plan: _Plan, raw: Sequence[Any], mask: EntryMask | None) -> EntryPage:
    order, count, forward = plan.order, plan.count, plan.forward
    entries = masked(mask, [parse_entry(e) for e in raw[:count]])
    more_in_read_direction = len(raw) > count
    if not entries:
        return EntryPage(entries=(), order=order, next=None, prev=None)

    # ``read_first``/``read_last`` follow Redis's read direction; the page shows ``order``.
    read_last, read_first = entries[-1].id, entries[0].id
    came_from_cursor = plan.came_from_cursor
    if forward == (order == "asc"):
        nxt = read_last if more_in_read_direction else None
        prev = read_first if came_from_cursor else None
    else:
        entries.reverse()
        nxt = read_first if came_from_cursor else None
        prev = read_last if more_in_read_direction else None
    return EntryPage(entries=tuple(entries), order=order, next=nxt, prev=prev)


def entry_get(conn: str, key: bytes, entry_id: str, *, mask: EntryMask | None) -> Entry:
    """One entry by its exact ID, as ``mask`` shows it."""
    validate_key(key)
    sid = parse_id(entry_id, allow_bare=False, what="entry ID")
    client = get_client(conn)
    with translated(conn):
        raw = client.execute_command(*lookup(key, str(sid)))  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
    if not raw:
        raise NotFound(f"No entry {sid} in this stream.", conn=conn)
    return masked(mask, [parse_entry(raw[0])])[0]


def entry_exists(conn: str, key: bytes, entry_id: str) -> bool:
    """Whether ``key`` holds an entry of exactly ``entry_id`` (its bytes stay in Redis)."""
    validate_key(key)
    sid = parse_id(entry_id, allow_bare=False, what="entry ID")
    with translated(conn):
        return bool(get_client(conn).execute_command(*lookup(key, str(sid))))  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated


def newest_ids(conn: str, key: bytes, *, count: int, at: str | None = None) -> list[str]:
    """The IDs of the newest ``count`` entries (up to ``at``, an ID or a time, when given), newest first;
    the entries' bytes stay in Redis (a position, not a payload: the tail's replay point)."""
    validate_key(key)
    count = check_count(count)
    start = str(parse_position(at, what="at").highest) if at else "+"
    raw = stream_read(conn, get_client(conn), key, "XREVRANGE", key, start, "-", "COUNT", count)
    return [parse_entry(e).id for e in raw]


def entries_at(
    conn: str, key: bytes, ids: Sequence[str], *, mask: EntryMask | None
) -> dict[str, Entry | None]:
    """Each of ``ids`` read by its exact ID (``XRANGE key id id``), all in ONE pipelined round trip, as
    ``mask`` shows it; None for an ID no longer in the stream.

    For a page that shows something of each row's message (the pending table's event type): one
    extra round trip per page, whatever its size, never one per row. At most :data:`MAX_PAGE` IDs.
    """
    validate_key(key)
    wanted = [str(parse_id(entry_id, allow_bare=False, what="entry ID")) for entry_id in ids]
    if len(wanted) > MAX_PAGE:
        raise InvalidArgument(f"At most {MAX_PAGE} entries at once ({len(wanted)} given).")
    if not wanted:
        return {}
    with translated(conn):
        replies = pipelined(get_client(conn), [lookup(key, entry_id) for entry_id in wanted])
    return {
        entry_id: masked(mask, [parse_entry(raw[0])])[0] if raw else None
        for entry_id, raw in zip(wanted, replies, strict=True)
    }
