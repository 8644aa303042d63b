"""Read-side Redis access: streams, entries, groups, consumers and pending entries.

Every function takes a connection name, talks to that server with a bounded number of round trips
(pipelines for per-stream facts, COUNT on every range) and returns frozen dataclasses. Nothing here
runs ``KEYS``, ``XRANGE - +`` or ``XINFO STREAM FULL``: on a big server those block Redis.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from django.conf import settings

from .client import get_client
from .commands import SCAN_COUNT, lookup, pipelined, scan_streams, stream_read
from .errors import InvalidArgument, NotFound, translated
from .ids import parse_id, parse_position
from .parsers import (
    parse_consumer,
    parse_entry,
    parse_group,
    parse_pending_entry,
    parse_pending_summary,
    parse_stream,
)
from .types import ConsumerInfo, Entry, GroupInfo, PendingEntry, PendingSummary, StreamInfo, StreamSummary

MAX_PAGE = 1000
DEFAULT_PAGE = 50


@dataclass(frozen=True, slots=True)
class StreamPage:
    streams: tuple[StreamSummary, ...]
    next_cursor: int  # 0 when the scan is complete
    scanned: int  # keys SCAN looked at for this page (not only streams)


@dataclass(frozen=True, slots=True)
class EntryPage:
    entries: tuple[Entry, ...]
    order: str  # "desc" (newest first) or "asc"
    next: str | None  # cursor to continue in ``order``: pass as before= (desc) or after= (asc)
    prev: str | None  # cursor to go the other way: pass as after= (desc) or before= (asc)


@dataclass(frozen=True, slots=True)
class PendingPage:
    summary: PendingSummary
    entries: tuple[PendingEntry, ...]
    next: str | None


# ---------------------------------------------------------------- validation


def _check_count(count: int) -> int:
    if count < 1:
        raise InvalidArgument("count must be at least 1.")
    return min(count, MAX_PAGE)


def _validate_key(key: bytes) -> bytes:
    if not isinstance(key, bytes) or not key:
        raise InvalidArgument("A stream key is required.")
    return key


# ---------------------------------------------------------------- streams


def streams_scan(
    conn: str,
    *,
    match: bytes = b"*",
    cursor: int = 0,
    count: int = DEFAULT_PAGE,
    budget: int | None = None,
) -> StreamPage:
    """One page of the server's streams, found by ``SCAN ... TYPE stream``.

    SCAN looks at no more than ``budget`` keys for one page, so a server with millions of other keys
    answers in bounded time; the page may then hold fewer than ``count`` streams and a non-zero
    cursor to continue from. The per-call COUNT grows while calls come back empty-handed.
    """
    count = _check_count(count)
    budget = budget or settings.BUSCONSOLE_SCAN_BUDGET
    if cursor < 0:
        raise InvalidArgument("cursor must not be negative.")
    keys: list[bytes] = []
    scanned = 0
    for step in scan_streams(conn, match=match, cursor=cursor, count=count, grow_to=SCAN_COUNT, budget=budget):
        keys += step.keys
        cursor, scanned = step.cursor, step.scanned
        if len(keys) >= count:
            break
    summaries = stream_summaries(conn, keys)
    return StreamPage(streams=tuple(summaries), next_cursor=cursor, scanned=scanned)


def stream_summaries(conn: str, keys: Iterable[bytes]) -> list[StreamSummary]:
    """Length, ends, groups and pending of each stream in ``keys``, in one pipeline.

    Keys that vanished (or changed type) since they were listed are left out.
    """
    return [StreamSummary.of(info) for info in stream_infos(conn, list(keys))]


def stream_infos(conn: str, keys: Sequence[bytes]) -> list[StreamInfo]:
    """XINFO STREAM and XINFO GROUPS of each stream in ``keys``, in one pipeline (one round trip).

    Keys that vanished (or changed type) since they were listed are left out.
    """
    if not keys:
        return []
    client = get_client(conn)
    commands = [command for key in keys for command in (("XINFO", "STREAM", key), ("XINFO", "GROUPS", key))]
    with translated(conn):
        replies = pipelined(client, commands, raise_on_error=False)
    out: list[StreamInfo] = []
    for i, key in enumerate(keys):
        info, groups = replies[2 * i], replies[2 * i + 1]
        if isinstance(info, Exception) or isinstance(groups, Exception):
            continue
        out.append(parse_stream(key, info, groups))
    return out


def stream_lengths(conn: str, keys: Sequence[bytes], *, chunk: int = 5000) -> dict[bytes, int]:
    """XLEN of many keys, pipelined in chunks (for sorting a scanned set by length)."""
    client = get_client(conn)
    lengths: dict[bytes, int] = {}
    with translated(conn):
        for start in range(0, len(keys), chunk):
            part = keys[start : start + chunk]
            pipe = client.pipeline(transaction=False)
            for key in part:
                pipe.xlen(key)
            for key, value in zip(part, pipe.execute(raise_on_error=False), strict=True):
                if not isinstance(value, Exception):
                    lengths[key] = int(value)
    return lengths


def streams_by_length(
    conn: str, *, match: bytes = b"*", count: int = DEFAULT_PAGE, offset: int = 0, budget: int | None = None
) -> tuple[list[StreamSummary], int, bool]:
    """The longest streams among at most ``budget`` scanned keys: (page, streams seen, scan complete)."""
    count = _check_count(count)
    budget = budget or settings.BUSCONSOLE_SCAN_BUDGET
    keys: list[bytes] = []
    cursor = 0
    for step in scan_streams(conn, match=match, count=SCAN_COUNT, budget=budget):
        keys += step.keys
        cursor = step.cursor
    lengths = stream_lengths(conn, sorted(keys))
    ranked = sorted(lengths, key=lambda k: (-lengths[k], k))
    page = stream_summaries(conn, ranked[offset : offset + count])
    return page, len(lengths), cursor == 0


def stream_info(conn: str, key: bytes) -> StreamInfo:
    """XINFO STREAM (never FULL) and XINFO GROUPS of one stream, in one round trip."""
    _validate_key(key)
    client = get_client(conn)
    with translated(conn):
        pipe = client.pipeline(transaction=False)
        pipe.execute_command("XINFO", "STREAM", key)
        pipe.execute_command("XINFO", "GROUPS", key)
        info, groups = pipe.execute()
    return parse_stream(key, info, groups)


# ---------------------------------------------------------------- entries


def entries_page(
    conn: str,
    key: bytes,
    *,
    order: str = "desc",
    after: str | None = None,
    before: str | None = None,
    at: str | None = None,
    count: int = DEFAULT_PAGE,
) -> EntryPage:
    """One page of entries, by exclusive cursors, costing O(log N + count) at any depth.

    - ``before``/``after`` are exclusive entry IDs (the last ID of the previous page);
    - ``at`` is an ID, a millisecond or an ISO-8601 time: the page starts there, inclusive;
    - ``order`` is "desc" (newest first, the default) or "asc".
    With no cursor the page starts at the newest (desc) or oldest (asc) entry.
    """
    _validate_key(key)
    if order not in ("asc", "desc"):
        raise InvalidArgument("order must be 'asc' or 'desc'.")
    if sum(x is not None and x != "" for x in (after, before, at)) > 1:
        raise InvalidArgument("Give at most one of after, before and at.")
    count = _check_count(count)
    client = get_client(conn)

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
        raw = stream_read(conn, client, key, "XRANGE", key, start, "+", "COUNT", count + 1)
    else:
        raw = stream_read(conn, client, key, "XREVRANGE", key, start, "-", "COUNT", count + 1)

    entries = [parse_entry(e) for e in raw[:count]]
    more_in_read_direction = len(raw) > count
    if not entries:
        return EntryPage(entries=(), order=order, next=None, prev=None)

    # ``read_first``/``read_last`` follow Redis's read direction; the page shows ``order``.
    read_last, read_first = entries[-1].id, entries[0].id
    came_from_cursor = bool(after or before or at)
    if forward == (order == "asc"):
        nxt = read_last if more_in_read_direction else None
        prev = read_first if came_from_cursor else None
    else:
        entries.reverse()
        nxt = read_first if came_from_cursor else None
        prev = read_last if more_in_read_direction else None
    return EntryPage(entries=tuple(entries), order=order, next=nxt, prev=prev)


def entry_get(conn: str, key: bytes, entry_id: str) -> Entry:
    """One entry by its exact ID."""
    _validate_key(key)
    sid = parse_id(entry_id, allow_bare=False, what="entry ID")
    client = get_client(conn)
    with translated(conn):
        raw = client.execute_command(*lookup(key, str(sid)))
    if not raw:
        raise NotFound(f"No entry {sid} in this stream.", conn=conn)
    return parse_entry(raw[0])


# ---------------------------------------------------------------- groups, consumers, pending


def groups(conn: str, key: bytes) -> tuple[GroupInfo, ...]:
    _validate_key(key)
    with translated(conn):
        raw = get_client(conn).execute_command("XINFO", "GROUPS", key)
    return tuple(parse_group(g) for g in raw)


def group_info(conn: str, key: bytes, group: bytes) -> GroupInfo:
    for g in groups(conn, key):
        if g.name == group:
            return g
    raise NotFound("No such consumer group on this stream.", conn=conn)


def consumers(conn: str, key: bytes, group: bytes) -> tuple[ConsumerInfo, ...]:
    _validate_key(key)
    with translated(conn):
        raw = get_client(conn).execute_command("XINFO", "CONSUMERS", key, group)
    return tuple(parse_consumer(item) for item in raw)


def pending_page(
    conn: str,
    key: bytes,
    group: bytes,
    *,
    consumer: bytes | None = None,
    min_idle_ms: int | None = None,
    after: str | None = None,
    count: int = DEFAULT_PAGE,
) -> PendingPage:
    """XPENDING's summary and one page of its extended form, each entry marked if it still exists.

    Pending entries whose message was XDELed (or trimmed away) stay in the PEL until acked or
    claimed; they are marked ``exists=False`` so an operator can ack them away.
    """
    _validate_key(key)
    count = _check_count(count)
    if min_idle_ms is not None and min_idle_ms < 0:
        raise InvalidArgument("min_idle_ms must not be negative.")
    start = "(" + str(parse_id(after, what="after")) if after else "-"
    args: list[object] = ["XPENDING", key, group]
    if min_idle_ms:
        args += ["IDLE", min_idle_ms]
    args += [start, "+", count + 1]
    if consumer:
        args.append(consumer)
    client = get_client(conn)
    with translated(conn):
        pipe = client.pipeline(transaction=False)
        pipe.execute_command("XPENDING", key, group)
        pipe.execute_command(*args)
        summary_raw, rows = pipe.execute()
        more = len(rows) > count
        rows = rows[:count]
        found = pipelined(client, [lookup(key, row[0]) for row in rows]) if rows else []
    entries = tuple(parse_pending_entry(row, exists=bool(hit)) for row, hit in zip(rows, found, strict=True))
    return PendingPage(
        summary=parse_pending_summary(summary_raw), entries=entries, next=entries[-1].id if more else None
    )


def server_overview(conn: str) -> dict[str, object]:
    """A few INFO facts for the overview page (one INFO call)."""
    with translated(conn):
        client = get_client(conn)
        pipe = client.pipeline(transaction=False)
        pipe.info()
        pipe.dbsize()
        info, dbsize = pipe.execute()
    return {
        "redis_version": info.get("redis_version"),
        "used_memory_human": info.get("used_memory_human"),
        "connected_clients": info.get("connected_clients"),
        "uptime_in_seconds": info.get("uptime_in_seconds"),
        "dbsize": int(dbsize),
    }


def is_stream(conn: str, key: bytes) -> bool:
    """Whether ``key`` exists and holds a stream (one TYPE call)."""
    with translated(conn):
        return get_client(conn).type(key) in (b"stream", "stream")


def existing_streams(conn: str, keys: Sequence[bytes]) -> list[bytes]:
    """Those of ``keys`` that exist and hold streams, in order (one pipelined TYPE per key)."""
    if not keys:
        return []
    client = get_client(conn)
    with translated(conn):
        types = pipelined(client, [("TYPE", key) for key in keys])
    return [key for key, kind in zip(keys, types, strict=True) if kind in (b"stream", "stream")]
