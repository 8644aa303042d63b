"""Read-side Redis access: streams, entries, groups, consumers and pending entries.

Every function takes a connection name, talks to that server with a bounded number of round trips
(pipelines for per-stream facts, COUNT on every range) and returns frozen dataclasses. Nothing here
runs ``KEYS``, ``XRANGE - +`` or ``XINFO STREAM FULL``: on a big server those block Redis.

On a Redis Cluster the reads of one key go to its node (the cluster client routes them; pipelines of
several keys are split by node, never sent as one MULTI), and listings walk every primary. A listing
that could not reach every primary still answers with what it found and names the primaries it
missed (``missed``): the page or reply says it is partial rather than looking complete.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Generic, TypeVar

import redis
from django.conf import settings

from .client import get_client, is_cluster, primaries, primary_failed
from .commands import SCAN_COUNT, keyed_pipeline, lookup, pipelined, scan_streams, stream_read
from .conventions import dlq_candidates
from .errors import InvalidArgument, NotFound, Unreachable, translated
from .ids import parse_id, parse_position
from .parsers import (
    parse_consumer,
    parse_entry,
    parse_group,
    parse_pending_entry,
    parse_pending_summary,
    parse_stream,
)
from .pending_idle import first_probe, longest_idle
from .types import (
    ConsumerInfo,
    Entry,
    EntryMask,
    GroupInfo,
    PendingEntry,
    PendingIdle,
    PendingSummary,
    StreamInfo,
    StreamSummary,
    masked,
)

MAX_PAGE = 1000
DEFAULT_PAGE = 50


@dataclass(frozen=True, slots=True)
class StreamPage:
    streams: tuple[StreamSummary, ...]
    next_cursor: int  # 0 when the scan is complete (a listing cursor: see commands.listing_cursor)
    scanned: int  # keys SCAN looked at for this page (not only streams)
    missed: tuple[str, ...] = ()  # primaries (host:port) this page could not list or read: it is partial

    @property
    def complete(self) -> bool:
        """Whether every primary answered for this page (the page may still be one of several)."""
        return not self.missed


@dataclass(frozen=True, slots=True)
class LongestPage:
    """One page of the longest streams among those one scan budget found (``?sort=length`` without a mirror)."""

    streams: tuple[StreamSummary, ...]
    sorted_among: int  # streams found and ranked
    scan_complete: bool  # the scan saw the whole keyspace within its budget
    missed: tuple[str, ...] = ()  # primaries not listed or not read: the ranking leaves their streams out


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
    missed: tuple[str, ...] = ()
    for step in scan_streams(conn, match=match, cursor=cursor, count=count, grow_to=SCAN_COUNT, budget=budget):
        keys += step.keys
        cursor, scanned, missed = step.cursor, step.scanned, step.missed
        if len(keys) >= count:
            break
    summaries, unread = stream_summaries_covered(conn, keys)
    return StreamPage(streams=tuple(summaries), next_cursor=cursor, scanned=scanned, missed=_union(missed, unread))


def _union(*lists: Iterable[str]) -> tuple[str, ...]:
    return tuple(dict.fromkeys(name for names in lists for name in names))


def stream_summaries(conn: str, keys: Iterable[bytes]) -> list[StreamSummary]:
    """Length, ends, groups and pending of each stream in ``keys``, in one pipeline.

    Keys that vanished (or changed type) since they were listed are left out, and so are keys whose
    node did not answer (:func:`stream_summaries_covered` names those nodes).
    """
    return stream_summaries_covered(conn, keys)[0]


def stream_summaries_covered(conn: str, keys: Iterable[bytes]) -> tuple[list[StreamSummary], tuple[str, ...]]:
    """:func:`stream_summaries`, and the primaries whose keys could not be read (empty when all answered)."""
    infos, missed = stream_infos_covered(conn, list(keys))
    return [StreamSummary.of(info) for info in infos], missed


def stream_infos(conn: str, keys: Sequence[bytes]) -> list[StreamInfo]:
    """XINFO STREAM and XINFO GROUPS of each stream in ``keys``, in one pipeline (one round trip).

    Keys that vanished (or changed type) since they were listed are left out, and so are keys whose
    node did not answer (:func:`stream_infos_covered` names those nodes).
    """
    return stream_infos_covered(conn, keys)[0]


def stream_infos_covered(conn: str, keys: Sequence[bytes]) -> tuple[list[StreamInfo], tuple[str, ...]]:
    """:func:`stream_infos`, and the primaries whose keys could not be read (empty when all answered)."""
    if not keys:
        return [], ()
    read = keyed_pipeline(conn, keys, lambda key: (("XINFO", "STREAM", key), ("XINFO", "GROUPS", key)))
    out: list[StreamInfo] = []
    for key, replies in zip(keys, read.replies, strict=True):
        if replies is None:
            continue
        info, groups = replies
        if isinstance(info, Exception) or isinstance(groups, Exception):
            continue  # vanished or retyped since it was listed
        out.append(parse_stream(key, info, groups))
    return out, read.missed


def stream_lengths(conn: str, keys: Sequence[bytes], *, chunk: int = 5000) -> dict[bytes, int]:
    """XLEN of many keys, pipelined in chunks (for sorting a scanned set by length)."""
    return stream_lengths_covered(conn, keys, chunk=chunk)[0]


def stream_lengths_covered(
    conn: str, keys: Sequence[bytes], *, chunk: int = 5000
) -> tuple[dict[bytes, int], tuple[str, ...]]:
    """:func:`stream_lengths`, and the primaries whose keys could not be read."""
    lengths: dict[bytes, int] = {}
    missed: tuple[str, ...] = ()
    for start in range(0, len(keys), chunk):
        part = keys[start : start + chunk]
        read = keyed_pipeline(conn, part, lambda key: (("XLEN", key),))
        missed = _union(missed, read.missed)
        for key, replies in zip(part, read.replies, strict=True):
            if replies is not None and not isinstance(replies[0], Exception):
                lengths[key] = int(replies[0])
    return lengths, missed


def streams_by_length(
    conn: str, *, match: bytes = b"*", count: int = DEFAULT_PAGE, offset: int = 0, budget: int | None = None
) -> LongestPage:
    """The longest streams among at most ``budget`` scanned keys, over every primary.

    For a fresh install only: once the mirror holds the connection, pages and the API rank every
    stream from it instead (a scan budget may leave the longest stream out).
    """
    count = _check_count(count)
    budget = budget or settings.BUSCONSOLE_SCAN_BUDGET
    keys: list[bytes] = []
    cursor = 0
    missed: tuple[str, ...] = ()
    for step in scan_streams(conn, match=match, count=SCAN_COUNT, budget=budget):
        keys += step.keys
        cursor, missed = step.cursor, step.missed
    lengths, unread = stream_lengths_covered(conn, sorted(keys))
    ranked = sorted(lengths, key=lambda k: (-lengths[k], k))
    page, unread_page = stream_summaries_covered(conn, ranked[offset : offset + count])
    return LongestPage(
        streams=tuple(page), sorted_among=len(lengths), scan_complete=cursor == 0,
        missed=_union(missed, unread, unread_page),
    )


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
    mask: EntryMask | None,
) -> EntryPage:
    """One page of entries, by exclusive cursors, costing O(log N + count) at any depth, each entry as
    ``mask`` shows it (:data:`.types.EntryMask`).

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

    entries = masked(mask, [parse_entry(e) for e in raw[:count]])
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


def entry_get(conn: str, key: bytes, entry_id: str, *, mask: EntryMask | None) -> Entry:
    """One entry by its exact ID, as ``mask`` shows it."""
    _validate_key(key)
    sid = parse_id(entry_id, allow_bare=False, what="entry ID")
    client = get_client(conn)
    with translated(conn):
        raw = client.execute_command(*lookup(key, str(sid)))
    if not raw:
        raise NotFound(f"No entry {sid} in this stream.", conn=conn)
    return masked(mask, [parse_entry(raw[0])])[0]


def entry_exists(conn: str, key: bytes, entry_id: str) -> bool:
    """Whether ``key`` holds an entry of exactly ``entry_id`` (its bytes stay in Redis)."""
    _validate_key(key)
    sid = parse_id(entry_id, allow_bare=False, what="entry ID")
    with translated(conn):
        return bool(get_client(conn).execute_command(*lookup(key, str(sid))))


def newest_ids(conn: str, key: bytes, *, count: int, at: str | None = None) -> list[str]:
    """The IDs of the newest ``count`` entries (up to ``at``, an ID or a time, when given), newest first;
    the entries' bytes stay in Redis (a position, not a payload: the tail's replay point)."""
    _validate_key(key)
    count = _check_count(count)
    start = str(parse_position(at, what="at").highest) if at else "+"
    raw = stream_read(conn, get_client(conn), key, "XREVRANGE", key, start, "-", "COUNT", count)
    return [parse_entry(e).id for e in raw]


# ---------------------------------------------------------------- groups, consumers, pending


#: What a stream's groups and a group's consumers can be ordered by, each with the direction it takes
#: unless told (the most pending, lagging or idle first; names A to Z); ``_SORT_FIELDS`` is the field read.
GROUP_SORTS = {"pending": "desc", "lag": "desc", "consumers": "desc", "name": "asc"}
CONSUMER_SORTS = {"pending": "desc", "idle": "desc", "inactive": "desc", "name": "asc"}
_SORT_FIELDS = {"pending": "pending", "lag": "lag", "consumers": "consumers", "idle": "idle_ms",
                "inactive": "inactive_ms"}

RankedRow = TypeVar("RankedRow", GroupInfo, ConsumerInfo)


@dataclass(frozen=True, slots=True)
class RowsPage(Generic[RankedRow]):
    """One page of a list Redis only answers whole (XINFO GROUPS, XINFO CONSUMERS), ordered by ``sort``.

    ``total`` is the length of the whole list, ``offset`` the place of ``rows[0]`` in it.
    """

    rows: tuple[RankedRow, ...]
    total: int
    offset: int
    sort: str
    order: str  # "asc" or "desc", the default of ``sort`` filled in

    @property
    def next_offset(self) -> int | None:
        """Where the next page starts, None when this page reaches the end."""
        end = self.offset + len(self.rows)
        return end if self.rows and end < self.total else None


def ranked(
    rows: Iterable[RankedRow],
    *,
    sorts: dict[str, str],
    sort: str = "pending",
    order: str | None = None,
    offset: int = 0,
    count: int = DEFAULT_PAGE,
) -> RowsPage[RankedRow]:
    """``count`` rows from ``offset`` of ``rows`` ordered by ``sort`` (a key of ``sorts``), ``order``
    being its default when None.

    Redis has no paging for XINFO GROUPS or XINFO CONSUMERS: the reply is the whole list, O(n) on the
    server but cheap next to rendering it, so it is read once per request and ordered here. Ties go by
    name (A to Z whatever the order: Python's sort is stable, also reversed), so a page is the same on
    every reload while the figures stand still. A figure Redis cannot tell (a lag after SETID, an
    ``inactive`` before Redis 7.2) is neither high nor low: those rows come last in both directions.
    """
    if sort not in sorts:
        raise InvalidArgument(f"sort must be one of {', '.join(sorts)}.")
    order = order or sorts[sort]
    if order not in ("asc", "desc"):
        raise InvalidArgument("order must be 'asc' or 'desc'.")
    if offset < 0:
        raise InvalidArgument("offset must not be negative.")
    count = _check_count(count)
    by_name = sorted(rows, key=attrgetter("name"))
    if sort == "name":
        ordered = by_name[::-1] if order == "desc" else by_name
    else:
        figure = attrgetter(_SORT_FIELDS[sort])
        ordered = sorted((r for r in by_name if figure(r) is not None), key=figure, reverse=order == "desc")
        ordered += [r for r in by_name if figure(r) is None]
    return RowsPage(rows=tuple(ordered[offset : offset + count]), total=len(by_name), offset=offset,
                    sort=sort, order=order)


def groups(conn: str, key: bytes) -> tuple[GroupInfo, ...]:
    """Every group of the stream, in Redis's order (XINFO GROUPS answers all of them at once)."""
    _validate_key(key)
    with translated(conn):
        raw = get_client(conn).execute_command("XINFO", "GROUPS", key)
    return tuple(parse_group(g) for g in raw)


def groups_page(
    conn: str, key: bytes, *, sort: str = "pending", order: str | None = None, offset: int = 0,
    count: int = DEFAULT_PAGE,
) -> RowsPage[GroupInfo]:
    """One page of the stream's groups ordered by ``sort`` (see :func:`ranked`, :data:`GROUP_SORTS`)."""
    return ranked(groups(conn, key), sorts=GROUP_SORTS, sort=sort, order=order, offset=offset, count=count)


def group_info(conn: str, key: bytes, group: bytes) -> GroupInfo:
    """The group's XINFO GROUPS row, its longest pending idle time filled in (:func:`pending_longest_idle`)."""
    for g in groups(conn, key):
        if g.name == group:
            if not g.pending:
                return g
            return replace(g, longest_idle=pending_longest_idle(conn, key, group, pending=g.pending))
    raise NotFound("No such consumer group on this stream.", conn=conn)


def pending_longest_idle(conn: str, key: bytes, group: bytes, *, pending: int) -> PendingIdle | None:
    """The longest idle time among the group's ``pending`` entries and its entry (None: nothing pending).

    Bounded as :mod:`.pending_idle` says: one ``XPENDING - + K`` and, only for a PEL longer than K (and
    not longer than the walk limit), up to a few ``XPENDING ... IDLE`` rounds; ``exact=False`` when the
    figure is a lower bound.
    """
    sent_at = time.monotonic()
    with translated(conn):
        reply = get_client(conn).execute_command(*first_probe(key, group))
    figures, _, _ = longest_idle(conn, [(key, group, pending, reply)], sent_at=sent_at)
    return figures[0]


def consumers(conn: str, key: bytes, group: bytes) -> tuple[ConsumerInfo, ...]:
    """Every consumer of the group, in Redis's order (XINFO CONSUMERS answers all of them at once)."""
    _validate_key(key)
    with translated(conn):
        raw = get_client(conn).execute_command("XINFO", "CONSUMERS", key, group)
    return tuple(parse_consumer(item) for item in raw)


def consumers_page(
    conn: str, key: bytes, group: bytes, *, sort: str = "pending", order: str | None = None, offset: int = 0,
    count: int = DEFAULT_PAGE,
) -> RowsPage[ConsumerInfo]:
    """One page of the group's consumers ordered by ``sort`` (see :func:`ranked`, :data:`CONSUMER_SORTS`)."""
    return ranked(consumers(conn, key, group), sorts=CONSUMER_SORTS, sort=sort, order=order, offset=offset,
                  count=count)


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
    page, _ = _pending_read(conn, key, group, consumer=consumer, min_idle_ms=min_idle_ms, after=after, count=count)
    return page


def pending_page_messages(
    conn: str,
    key: bytes,
    group: bytes,
    *,
    consumer: bytes | None = None,
    min_idle_ms: int | None = None,
    after: str | None = None,
    count: int = DEFAULT_PAGE,
    mask: EntryMask | None,
) -> tuple[PendingPage, tuple[Entry | None, ...]]:
    """:func:`pending_page` and each row's message as ``mask`` shows it (None: no longer in the stream),
    for the rows' payload previews.

    The messages are the replies of the existence check's ``XRANGE id id`` (one per row, in the same
    pipeline): a preview costs no command beyond what telling a deleted message apart already costs.
    """
    page, replies = _pending_read(
        conn, key, group, consumer=consumer, min_idle_ms=min_idle_ms, after=after, count=count
    )
    messages = tuple(masked(mask, [parse_entry(raw[0])])[0] if raw else None for raw in replies)
    return page, messages


def _pending_read(
    conn: str,
    key: bytes,
    group: bytes,
    *,
    consumer: bytes | None,
    min_idle_ms: int | None,
    after: str | None,
    count: int,
) -> tuple[PendingPage, list]:
    """The page and the raw ``XRANGE id id`` reply of each of its rows (empty: the message is gone)."""
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
    page = PendingPage(
        summary=parse_pending_summary(summary_raw), entries=entries, next=entries[-1].id if more else None
    )
    return page, list(found)


@dataclass(frozen=True, slots=True)
class EntryPending:
    """One group holding an entry in its pending list: who has it, how long idle, how often delivered."""

    group: bytes
    consumer: bytes
    idle_ms: int
    deliveries: int


def entry_pending(conn: str, key: bytes, entry_id: str, groups: Sequence[bytes]) -> tuple[EntryPending, ...]:
    """The groups among ``groups`` whose pending list holds ``entry_id``, in the order given.

    ``XPENDING key group id id 1`` per group, all in one pipelined round trip to the key's node
    (:func:`keyed_pipeline`: every command touches ``key`` only). A group deleted since the caller
    listed it answers NOGROUP and is left out; a node that does not answer is :class:`Unreachable`.
    """
    _validate_key(key)
    sid = str(parse_id(entry_id, allow_bare=False, what="entry ID"))
    if not groups:
        return ()
    read = keyed_pipeline(conn, [key], lambda k: [("XPENDING", k, group, sid, sid, 1) for group in groups])
    replies = read.replies[0]
    if replies is None:
        raise Unreachable(f"The node holding this stream did not answer: {', '.join(read.missed)}.", conn=conn)
    out: list[EntryPending] = []
    for group, reply in zip(groups, replies, strict=True):
        if isinstance(reply, Exception):
            if "NOGROUP" in str(reply):
                continue
            with translated(conn):
                raise reply
        if reply:
            row = parse_pending_entry(reply[0])
            out.append(EntryPending(group=group, consumer=row.consumer, idle_ms=row.idle_ms,
                                    deliveries=row.deliveries))
    return tuple(out)


def server_overview(conn: str) -> dict[str, object]:
    """A few INFO facts for the overview page: INFO server, memory and clients, and DBSIZE, per primary.

    INFO and DBSIZE answer for one node, so on a cluster keys, memory and clients are summed over
    the primaries that answered; ``missed`` names the others (and the figures are then partial).
    Managed services rename INFO away or refuse some of its sections to the console's user: each
    section is its own command, and one refused leaves its figures None and is named in
    ``unavailable`` (``("INFO memory", ...)``, with Redis's reason in ``unavailable_reason``).
    """
    with translated(conn):
        nodes = primaries(conn)
    cluster = is_cluster(conn)
    answers: list[tuple[dict, int | None]] = []
    missed: list[str] = []
    refused: dict[str, str] = {}
    for node in nodes:
        try:
            with translated(conn):
                pipe = node.client.pipeline(transaction=False)
                for section in _OVERVIEW_SECTIONS:
                    pipe.info(section)
                pipe.dbsize()
                *sections, dbsize = pipe.execute(raise_on_error=False)
        except Unreachable:
            if not cluster:
                raise
            primary_failed(conn)  # a replica promoted in its place is asked from the next overview on
            missed.append(node.name)
            continue
        info: dict = {}
        for name, reply in zip((*_OVERVIEW_SECTIONS, "DBSIZE"), (*sections, dbsize), strict=True):
            if isinstance(reply, redis.ResponseError):
                refused.setdefault(name if name == "DBSIZE" else f"INFO {name}", str(reply))
            elif isinstance(reply, Exception):
                with translated(conn):
                    raise reply
            elif name != "DBSIZE":
                info.update(reply)
        answers.append((info, None if isinstance(dbsize, Exception) else int(dbsize)))
    if not answers:
        raise Unreachable(f"No primary of {conn!r} answers: {', '.join(missed)}.", conn=conn)
    first = answers[0][0]

    def total(field: str) -> int | None:
        values = [info[field] for info, _ in answers if field in info]
        return sum(int(value or 0) for value in values) if values else None

    memory = total("used_memory")
    sizes = [size for _, size in answers if size is not None]
    return {
        "redis_version": first.get("redis_version"),
        "used_memory_human": first.get("used_memory_human") if len(nodes) == 1 or memory is None
        else _human_bytes(memory),
        "connected_clients": total("connected_clients"),
        "uptime_in_seconds": first.get("uptime_in_seconds"),
        "dbsize": sum(sizes) if sizes else None,
        "nodes": len(nodes),
        "missed": tuple(missed),
        "unavailable": tuple(refused),
        "unavailable_reason": next(iter(refused.values()), None),
    }


#: The INFO sections the overview reads, each its own command so that one refused costs only its figures.
_OVERVIEW_SECTIONS = ("server", "memory", "clients")


def _human_bytes(size: int) -> str:
    """Redis's own ``used_memory_human`` style (1.50M) for a sum over nodes."""
    value = float(size)
    for unit in ("B", "K", "M", "G", "T"):
        if value < 1024 or unit == "T":
            return f"{value:.2f}{unit}" if unit != "B" else f"{size}B"
        value /= 1024
    return f"{size}B"


def is_stream(conn: str, key: bytes) -> bool:
    """Whether ``key`` exists and holds a stream (one TYPE call)."""
    with translated(conn):
        return get_client(conn).type(key) in (b"stream", "stream")


def existing_streams(conn: str, keys: Sequence[bytes]) -> tuple[list[bytes], tuple[str, ...]]:
    """Those of ``keys`` that exist and hold streams, in order (one pipelined TYPE per key), and the
    primaries that did not answer for some of them (a stream's DLQ may live on another node)."""
    if not keys:
        return [], ()
    read = keyed_pipeline(conn, keys, lambda key: (("TYPE", key),))
    found = [
        key for key, replies in zip(keys, read.replies, strict=True)
        if replies is not None and replies[0] in (b"stream", "stream")
    ]
    return found, read.missed


def stream_info_with_dlqs(conn: str, key: bytes) -> tuple[StreamInfo, list[bytes], tuple[str, ...]]:
    """:func:`stream_info` of ``key`` and :func:`existing_streams` of its dead-letter queue's candidate
    keys (:func:`.conventions.dlq_candidates`), as the stream page shows them, in one pipelined round
    trip where the two calls take two.

    Candidates named after the stream's groups (OmniDaemon's ``omni-dlq:{group}``) are known only once
    the groups are, so a stream that has them costs a second trip for those. As in
    :func:`existing_streams`, a DLQ on a node that does not answer is named in the third item rather
    than failing the page; the stream's own node not answering fails it, as :func:`stream_info` does.
    """
    _validate_key(key)
    candidates = dlq_candidates(key)
    read = keyed_pipeline(
        conn,
        [key, *candidates],
        lambda k: (("XINFO", "STREAM", k), ("XINFO", "GROUPS", k)) if k == key else (("TYPE", k),),
    )
    own, *theirs = read.replies
    if own is None:  # the cluster fell back node by node and the stream's node was silent: ask it alone
        info = stream_info(conn, key)
    else:
        with translated(conn):
            for reply in own:
                if isinstance(reply, Exception):
                    raise reply
        info = parse_stream(key, *own)
    found = [
        candidate for candidate, replies in zip(candidates, theirs, strict=True)
        if replies is not None and replies[0] in (b"stream", "stream")
    ]
    missed = read.missed
    by_group = dlq_candidates(key, [group.name for group in info.groups])[len(candidates) :]
    if by_group:
        found_by_group, missed_by_group = existing_streams(conn, by_group)
        found += found_by_group
        missed = _union(missed, missed_by_group)
    return info, found, missed


def entries_at(
    conn: str, key: bytes, ids: Sequence[str], *, mask: EntryMask | None
) -> dict[str, Entry | None]:
    """Each of ``ids`` read by its exact ID (``XRANGE key id id``), all in ONE pipelined round trip, as
    ``mask`` shows it; None for an ID no longer in the stream.

    For a page that shows something of each row's message (the pending table's event type): one
    extra round trip per page, whatever its size, never one per row. At most :data:`MAX_PAGE` IDs.
    """
    _validate_key(key)
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
