"""The admin's destructive actions: delete a consumer or a group, trim a stream, delete entries.

Each has a preview that changes nothing (what will go, what is still pending there) and the action
itself; the callers put a confirm step between the two. What makes them safe:

* **consumer delete** is one Lua script (``lua/consumer_delete.lua``) reading the consumer's pending
  count and running ``XGROUP DELCONSUMER`` only if it owns none, unless forced: DELCONSUMER drops
  those entries from the PEL, so a consumer that read more since the preview is not deleted with
  them behind the operator's back. Redis's reply (how many pending entries were dropped) is returned.
* **group delete** reads the group's facts and runs ``XGROUP DESTROY`` in one MULTI, so the reported
  consumer and pending counts are those the group had when it went.
* **trim** loops ``XTRIM ... ~``: with ``~`` Redis removes at most ``100 * stream-node-max-entries``
  entries per call (an implicit LIMIT, 10,000 by default), so one call would silently stop short on a
  big stream, but each call blocks Redis only briefly. ``MAXLEN ~ N`` keeps at least N entries
  (whole nodes only, so the preview's count is "about"). ``MINID`` ends with one exact ``XTRIM MINID =``
  after the approximate calls, which then has at most one node left to cut into: every entry older
  than the ID goes, exactly as many as the preview counted.
* **entries delete** is XDEL inside a MULTI that first looks each ID up, so the reply says which IDs
  existed. XDEL leaves deleted entries in every PEL that holds them: they are reported per group,
  to be acked away (the group page marks them "deleted").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eventbus.connection import SyncClient

from ..client import get_client, key_client
from ..commands import entries_by_id, pipelined, require_stream, stream_pipeline
from ..errors import Conflict, InvalidArgument, NotFound, translated
from ..ids import U64_MAX, StreamId, parse_position
from ..parsers import parse_consumer, parse_group, parse_pending_summary, reply_text
from ..types import Entry, GroupInfo
from ._common import COUNT_BATCH, _count, _ids, _key, _name, _script, _sid, _stream_snapshot

PENDING_AT_RISK_MAX = 1000
"""Pending entries counted per group by a trim preview (XPENDING COUNT); beyond that "1000+"."""
MAX_TRIM_CALLS = 100_000
"""XTRIM ~ calls one trim makes at most (each removes up to 10,000 entries by default)."""


# ---------------------------------------------------------------- results


@dataclass(frozen=True, slots=True)
class ConsumerPlan:
    """A consumer as the delete confirmation shows it."""

    consumer: bytes
    pending: int  # its pending entries: XGROUP DELCONSUMER drops them from the PEL
    idle_ms: int


@dataclass(frozen=True, slots=True)
class ConsumerDeleted:
    consumer: bytes
    pending_dropped: int  # Redis's reply: pending entries the consumer had, now in no PEL


@dataclass(frozen=True, slots=True)
class GroupDestroyed:
    group: bytes
    consumers: int
    pending_dropped: int
    last_delivered_id: str


@dataclass(frozen=True, slots=True)
class PendingAtRisk:
    """A group with pending entries among those a trim removes (their messages will be gone)."""

    group: bytes
    count: int  # pending entries of the group in the trimmed range, at most PENDING_AT_RISK_MAX
    more: bool  # True: there are more than ``count``
    oldest_id: str


@dataclass(frozen=True, slots=True)
class TrimPlan:
    """What a trim removes, computed before doing it.

    ``maxlen``: keep the newest ``maxlen`` entries (``XTRIM MAXLEN ~``): ``will_remove`` is
    max(0, length - maxlen), an upper bound since Redis removes whole nodes only (``approximate``).
    ``minid``: remove every entry older than this exact ID (a time given by the user is resolved to
    ``<ms>-0``): ``will_remove`` is exact, counted in Redis in bounded batches.
    """

    strategy: str  # "maxlen" or "minid"
    maxlen: int | None
    minid: str | None
    length: int
    first_id: str | None
    last_id: str | None
    will_remove: int
    approximate: bool
    pending: tuple[PendingAtRisk, ...]


@dataclass(frozen=True, slots=True)
class TrimResult:
    strategy: str
    maxlen: int | None
    minid: str | None
    removed: int  # the sum of XTRIM's replies
    length: int  # XLEN afterwards
    calls: int


@dataclass(frozen=True, slots=True)
class GroupPending:
    """Named IDs that are pending in one group (XDEL does not remove them from its PEL)."""

    group: bytes
    ids: tuple[str, ...]


@dataclass(frozen=True, slots=True)
class EntriesPlan:
    existing: tuple[str, ...]
    missing: tuple[str, ...]
    pending: tuple[GroupPending, ...]


@dataclass(frozen=True, slots=True)
class EntriesDeleted:
    deleted: tuple[str, ...]  # existed and were deleted
    missing: tuple[str, ...]  # not in the stream (never, or deleted before)
    pending: tuple[GroupPending, ...]  # deleted entries still pending: ack them away


# ---------------------------------------------------------------- consumers and groups


def consumer_delete_preview(conn: str, key: bytes, group: bytes, *, consumer: bytes) -> ConsumerPlan:
    """The consumer's pending count and idle time (XINFO CONSUMERS); NotFound if it is not in the group."""
    _key(key)
    _name(group, "group")
    _name(consumer, "consumer")
    with translated(conn):
        rows = get_client(conn).execute_command("XINFO", "CONSUMERS", key, group)  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
    for row in map(parse_consumer, rows):
        if row.name == consumer:
            return ConsumerPlan(consumer=consumer, pending=row.pending, idle_ms=row.idle_ms)
    raise NotFound("No such consumer in this group.", conn=conn)


def consumer_delete(conn: str, key: bytes, group: bytes, *, consumer: bytes, force: bool = False) -> ConsumerDeleted:
    """``XGROUP DELCONSUMER``, refused (:class:`Conflict`) while the consumer owns pending entries.

    With ``force`` it is deleted anyway and its pending entries leave the PEL for good (they are not
    redelivered to anyone): ``pending_dropped`` is Redis's own count of them. Without ``force``, claim
    them to another consumer first. The check and the delete are one script, so nothing slips between.
    """
    _key(key)
    _name(group, "group")
    _name(consumer, "consumer")
    client = get_client(conn)
    with translated(conn):
        found, pending, dropped = _script(client, "consumer_delete")(
            keys=[key], args=[group, consumer, b"1" if force else b"0"]
        )
    if not int(found):
        raise NotFound("No such consumer in this group.", conn=conn)
    if int(dropped) < 0:
        raise Conflict(
            f"The consumer still has {int(pending)} pending "
            f"{'entry' if int(pending) == 1 else 'entries'}: deleting it would drop them from the group "
            "for good. Claim them to another consumer first, or delete with force.",
            conn=conn,
        )
    return ConsumerDeleted(consumer=consumer, pending_dropped=int(dropped))


def group_destroy(conn: str, key: bytes, group: bytes) -> GroupDestroyed:
    """``XGROUP DESTROY``: the group, its consumers and its whole PEL are gone; the stream stays."""
    _key(key)
    _name(group, "group")
    groups_raw, destroyed = stream_pipeline(
        conn, key_client(conn, key), key, [("XINFO", "GROUPS", key), ("XGROUP", "DESTROY", key, group)], transaction=True
    )
    row = next((row for row in map(parse_group, groups_raw) if row.name == group), None)
    if not int(destroyed) or row is None:
        raise NotFound("No such consumer group on this stream.", conn=conn)
    return GroupDestroyed(
        group=group,
        consumers=row.consumers,
        pending_dropped=row.pending,
        last_delivered_id=row.last_delivered_id or "0-0",
    )


# ---------------------------------------------------------------- trim


def trim_preview(conn: str, key: bytes, *, maxlen: int | None = None, minid: str | None = None) -> TrimPlan:
    """What :func:`trim` would remove, changing nothing, and which groups hold pending entries there.

    Give exactly one of ``maxlen`` (entries to keep) and ``minid`` (an entry ID, a millisecond or an
    ISO-8601 time: older entries go). Cost: for ``minid``, the entries before it are counted inside
    Redis in batches of 2,000; for ``maxlen``, the cut is located (from the nearer end, in batches)
    only when some group has pending entries, to tell whether they are in the trimmed range. Either
    way O(entries walked / 2,000) script calls, each blocking Redis a few milliseconds at most.
    """
    strategy, maxlen, minid = _trim_args(maxlen, minid)
    client = get_client(conn)
    with translated(conn):
        info = _stream_snapshot(conn, client, key)
        length, first, last = info.length, info.first_id, info.last_id
        groups = [g for g in info.groups if g.pending]
        bound: tuple[StreamId, bool] | None  # (ID, inclusive) of the newest entry removed; None: nothing
        if strategy == "minid":
            assert minid is not None
            target = _sid(minid)
            if first is None or _sid(first) >= target:
                will = 0
            elif last is not None and _sid(last) < target:
                will = length
            else:
                will = _count(client, key, "-", "(" + minid)
            bound = (target, False) if will else None
        else:
            assert maxlen is not None
            will = max(0, length - maxlen)
            bound = _maxlen_bound(client, key, length=length, keep=maxlen) if will and groups else None
        at_risk = _pending_at_risk(client, key, groups, bound) if bound else ()
    return TrimPlan(
        strategy=strategy, maxlen=maxlen, minid=minid, length=length, first_id=first, last_id=last,
        will_remove=will, approximate=strategy == "maxlen", pending=at_risk,
    )


def trim(conn: str, key: bytes, *, maxlen: int | None = None, minid: str | None = None) -> TrimResult:
    """Trim the stream: ``XTRIM MAXLEN ~ maxlen`` or ``XTRIM MINID`` (see the module docstring).

    ``removed`` is the sum of Redis's replies, ``length`` the XLEN after. Pending entries of the
    removed range stay in their groups' PELs (claiming them reports them as deleted).
    """
    strategy, maxlen, minid = _trim_args(maxlen, minid)
    client = get_client(conn)
    removed = calls = 0
    with translated(conn):
        require_stream(conn, client.type(key))
        threshold: Any = maxlen if strategy == "maxlen" else minid
        word = "MAXLEN" if strategy == "maxlen" else "MINID"
        while calls < MAX_TRIM_CALLS:
            calls += 1
            step = int(client.execute_command("XTRIM", key, word, "~", threshold))  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
            removed += step
            if not step:
                break
        if strategy == "minid":
            # The approximate calls removed whole nodes; what is left older than minid is in the first node.
            calls += 1
            removed += int(client.execute_command("XTRIM", key, "MINID", "=", threshold))  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
        length = int(client.xlen(key))
    return TrimResult(strategy=strategy, maxlen=maxlen, minid=minid, removed=removed, length=length, calls=calls)


def _trim_args(maxlen: int | None, minid: str | None) -> tuple[str, int | None, str | None]:
    if (maxlen is None) == (minid is None or minid == ""):
        raise InvalidArgument("Give exactly one of maxlen (entries to keep) and minid (an ID or a time).")
    if maxlen is not None:
        if isinstance(maxlen, bool) or not isinstance(maxlen, int) or maxlen < 0:
            raise InvalidArgument("maxlen must be a whole number, 0 or more.")
        return "maxlen", maxlen, None
    assert minid is not None
    if not isinstance(minid, str):
        raise InvalidArgument("minid must be an entry ID or an ISO-8601 time.")
    # An exact ID stays as given; a bare millisecond or a time means "from that millisecond on".
    return "minid", None, str(parse_position(minid, what="minid").lowest)


def _maxlen_bound(client: SyncClient, key: bytes, *, length: int, keep: int) -> tuple[StreamId, bool] | None:
    """(ID, inclusive) of the newest entry ``MAXLEN keep`` removes, walking from the nearer end."""
    remove = length - keep
    if keep == 0:
        return StreamId(U64_MAX, U64_MAX), True
    forward = remove <= keep
    steps, start, last = (remove if forward else keep), ("-" if forward else "+"), None
    script = _script(client, "walk")
    while steps > 0:
        read, last = script(keys=[key], args=["fwd" if forward else "rev", start, min(steps, COUNT_BATCH)])
        if not int(read) or not last:
            break
        steps -= int(read)
        start = "(" + reply_text(last)
    if last is None or not last:
        return None
    # Forward: ``last`` is the newest entry removed. Backward: it is the oldest entry kept.
    return _sid(reply_text(last)), forward


def _pending_at_risk(
    client: SyncClient, key: bytes, groups: Sequence[GroupInfo], bound: tuple[StreamId, bool]
) -> tuple[PendingAtRisk, ...]:
    """Groups whose pending entries (XPENDING's oldest first) fall at or below ``bound``."""
    if not groups:
        return ()
    summaries = pipelined(client, [("XPENDING", key, g.name) for g in groups])
    limit, inclusive = bound
    upper = "+" if limit == StreamId(U64_MAX, U64_MAX) else (str(limit) if inclusive else "(" + str(limit))
    hit: list[tuple[bytes, str]] = []
    for g, summary in zip(groups, summaries, strict=True):
        oldest = parse_pending_summary(summary).min_id
        if oldest and (_sid(oldest) <= limit if inclusive else _sid(oldest) < limit):
            hit.append((g.name, oldest))
    if not hit:
        return ()
    rows = pipelined(client, [("XPENDING", key, name, "-", upper, PENDING_AT_RISK_MAX + 1) for name, _ in hit])
    return tuple(
        PendingAtRisk(group=name, count=min(len(r), PENDING_AT_RISK_MAX), more=len(r) > PENDING_AT_RISK_MAX,
                      oldest_id=oldest)
        for (name, oldest), r in zip(hit, rows, strict=True)
    )


# ---------------------------------------------------------------- entries


def entries_delete_preview(conn: str, key: bytes, *, ids: Sequence[str]) -> EntriesPlan:
    """Which of ``ids`` exist, and which are pending in some group, changing nothing."""
    _key(key)
    wanted = _ids(ids)
    client = get_client(conn)
    with translated(conn):
        found, _ = entries_by_id(conn, key_client(conn, key), key, wanted, transaction=True)
        existing, missing = _split(wanted, found)
        pending = _pending_named(client, key, wanted)
    return EntriesPlan(existing=existing, missing=missing, pending=pending)


def entries_delete(conn: str, key: bytes, *, ids: Sequence[str]) -> EntriesDeleted:
    """XDEL ``ids`` (at most 1000); reports which existed and which are still pending somewhere."""
    _key(key)
    wanted = _ids(ids)
    client = get_client(conn)
    with translated(conn):
        found, _ = entries_by_id(
            conn, key_client(conn, key), key, wanted, transaction=True, then=[("XDEL", key, *wanted)]
        )
        deleted, missing = _split(wanted, found)
        pending = _pending_named(client, key, list(deleted))
    return EntriesDeleted(deleted=deleted, missing=missing, pending=pending)


def _split(wanted: Sequence[str], found: Sequence[Entry | None]) -> tuple[tuple[str, ...], tuple[str, ...]]:
    existing: list[str] = []
    missing: list[str] = []
    for entry_id, entry in zip(wanted, found, strict=True):
        (existing if entry is not None else missing).append(entry_id)
    return tuple(existing), tuple(missing)


def _pending_named(client: SyncClient, key: bytes, ids: Sequence[str]) -> tuple[GroupPending, ...]:
    """Per group, which of ``ids`` are in its PEL; only IDs within the group's pending range are asked."""
    if not ids:
        return ()
    groups = [g for g in map(parse_group, client.execute_command("XINFO", "GROUPS", key)) if g.pending]  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
    if not groups:
        return ()
    summaries = pipelined(client, [("XPENDING", key, g.name) for g in groups])
    asks: list[tuple[bytes, str]] = []
    for g, summary in zip(groups, summaries, strict=True):
        pel = parse_pending_summary(summary)
        low, high = pel.min_id, pel.max_id
        if low and high:
            asks += [(g.name, i) for i in ids if _sid(low) <= _sid(i) <= _sid(high)]
    if not asks:
        return ()
    replies = pipelined(client, [("XPENDING", key, name, entry_id, entry_id, 1) for name, entry_id in asks])
    by_group: dict[bytes, list[str]] = {}
    for (name, entry_id), reply in zip(asks, replies, strict=True):
        if reply:
            by_group.setdefault(name, []).append(entry_id)
    return tuple(GroupPending(group=name, ids=tuple(found)) for name, found in by_group.items())

