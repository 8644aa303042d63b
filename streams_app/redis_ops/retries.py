"""The event bus's delayed retries, read: which retry sets a server holds, and one set's members a page at a time.

How the bus keeps them (``eventbus/retry.py``, ``eventbus/lua/schedule_retry.lua``): a failed entry is
acked and added to the sorted set ``{S}:retry`` of its stream ``S`` (:func:`eventbus.keys.retry_key`),
scored by its due time in ms on the Redis server's clock. The member is the whole entry to re-add, its
field list packed with msgpack (``[name, value, name, value, ...]``), with ``_retries`` set to the count
the re-added entry will carry and ``_group`` naming the one group that should run it. A worker's pump
(``eventbus/lua/pump_retries.lua``) re-adds due members to ``S`` and removes them, in one script.
Workers before the cluster naming used ``S:retry``, which nothing pumps any more (:mod:`eventbus.migrate`).

The member holds no error: the bus writes each failure to the stream's metric events instead
(``{S}:metrics``, event ``failed`` with ``group``, ``event_id``, ``entry_id`` and ``error``). A member
names the attempt that failed and when (``_failed_id``, ``_failed_at``; ``_first_id`` is the event's
first publish), so the error of a waiting retry is its own group's failure, found by the retry's time
(:mod:`.retry_failures`), and unknown once the capped metrics stream no longer holds it.

A member is named on pages and in the API by a **ref**, ``<due ms>-<sha1 of the member>``: short, and
enough for the actions' script to find the exact member again (:mod:`.actions.retries`).
"""

from __future__ import annotations

import hashlib
import re
from collections.abc import Sequence
from dataclasses import dataclass, replace
from typing import Any

import msgpack

from eventbus import keys as bus_keys
from eventbus.text import display_text

from .client import get_client
from .commands import keyed_pipeline, pipelined, scan_streams, server_ms
from .errors import InvalidArgument, NotFound, translated
from .retry_failures import Wanted, failures_find
from .types import Entry, EntryMask

RETRY_SUFFIX = bus_keys.RETRY_SUFFIX.encode()
MAX_PAGE = 500
DEFAULT_PAGE = 50

REF = re.compile(r"([0-9]{1,20})-([0-9a-f]{40})")
_CURSOR = re.compile(r"([0-9]{1,20}):([0-9]{1,9})")
_B_RETRIES = bus_keys.F_RETRIES.encode()
_B_GROUP = bus_keys.F_GROUP.encode()
_B_TYPE = bus_keys.F_TYPE.encode()
_B_ID = bus_keys.F_ID.encode()
_B_FIRST_ID = bus_keys.F_FIRST_ID.encode()
_B_FAILED_ID = bus_keys.F_FAILED_ID.encode()
_B_FAILED_AT = bus_keys.F_FAILED_AT.encode()


@dataclass(frozen=True, slots=True)
class RetrySet:
    """One stream's delayed-retry set: its key, the stream its members go back to, and its naming."""

    key: bytes
    stream: bytes
    #: the pre-cluster name ``S:retry``: no worker pumps it; on a cluster it is in another slot than ``S``
    legacy: bool

    @property
    def dlq(self) -> bytes:
        """Where the bus dead-letters ``stream``'s entries (``{S}:dlq``, in the stream's slot)."""
        return bus_keys.in_slot_of(self.stream, bus_keys.DLQ_SUFFIX.encode())


@dataclass(frozen=True, slots=True)
class RetryEntry:
    """One waiting retry: the entry the pump will re-add, and when."""

    ref: str
    due_ms: int
    member: bytes
    #: the fields to re-add, in order (empty when the member is not the bus's msgpack list)
    fields: tuple[tuple[bytes, bytes], ...]
    #: ``_retries``: the attempt this retry will be (1 = the first retry)
    retries: int | None
    group: bytes | None
    event_type: bytes | None
    event_id: bytes | None
    #: the last failure's ``ExceptionType: message`` from the metric events, when still there
    error: str | None = None
    #: the entry ID that failed last: the member's ``_failed_id``, else from the same metric events
    failed_entry_id: str | None = None
    #: ``_first_id``: the entry ID the event was first published as (None: scheduled by an older bus)
    first_id: str | None = None
    #: ``_failed_at``: when the failure scheduled this retry, ms on the server's clock
    failed_at_ms: int | None = None

    def wanted(self) -> Wanted:
        """What finds this retry's failure in the metric events (:mod:`.retry_failures`)."""
        found = dict(self.fields)
        return Wanted(
            ref=self.ref,
            group=self.group,
            event_id=self.event_id,
            failed_id=found.get(_B_FAILED_ID),
            failed_at_ms=self.failed_at_ms,
            due_ms=self.due_ms,
        )


@dataclass(frozen=True, slots=True)
class RetryPage:
    rset: RetrySet
    entries: tuple[RetryEntry, ...]
    total: int
    overdue: int  # due at or before ``now_ms``: the pump has not run (no worker for this stream?)
    now_ms: int  # the server's clock, which due times are measured on
    last_due_ms: int | None  # the latest due time in the whole set (the bound of "all")
    next: str | None  # cursor of the next page


@dataclass(frozen=True, slots=True)
class RetrySetSummary:
    rset: RetrySet
    waiting: int
    overdue: int
    next_due_ms: int | None


@dataclass(frozen=True, slots=True)
class RetryListing:
    sets: tuple[RetrySetSummary, ...]
    now_ms: int
    complete: bool
    missed: tuple[str, ...] = ()


# ------------------------------------------------------------------------------------ naming


def retry_set(stream: bytes, *, legacy: bool = False) -> RetrySet:
    """The retry set the bus uses for ``stream`` (``{S}:retry``), or its pre-cluster name ``S:retry``."""
    if not isinstance(stream, bytes) or not stream:
        raise InvalidArgument("A stream key is required.")
    key = stream + RETRY_SUFFIX if legacy else bus_keys.in_slot_of(stream, RETRY_SUFFIX)
    return RetrySet(key=key, stream=stream, legacy=key != bus_keys.in_slot_of(stream, RETRY_SUFFIX))


def retry_set_of_key(key: bytes) -> RetrySet | None:
    """The retry set a sorted-set key names (either naming), or None when it is not named like one."""
    stream = bus_keys.stream_of(key, RETRY_SUFFIX)
    if stream is None:
        return None
    return RetrySet(key=key, stream=stream, legacy=bus_keys.in_slot_of(stream, RETRY_SUFFIX) != key)


def member_ref(due_ms: int, member: bytes) -> str:
    return f"{due_ms}-{hashlib.sha1(member).hexdigest()}"  # noqa: S324 - a name, not a secret


def parse_ref(ref: str) -> tuple[int, str]:
    """``(due ms, sha1 hex)`` of a ref; InvalidArgument when it is not one."""
    match = REF.fullmatch(ref) if isinstance(ref, str) else None
    if match is None:
        raise InvalidArgument(
            "A retry is named <due ms>-<40 hex digits>, as the retries page and API show it."
        )
    return int(match[1]), match[2]


def parse_cursor(cursor: str | None) -> tuple[str, int]:
    """ZRANGE's lower bound and LIMIT offset for a page cursor ``<due ms>:<skip>`` (None: the start)."""
    if not cursor:
        return "-inf", 0
    match = _CURSOR.fullmatch(cursor)
    if match is None:
        raise InvalidArgument("after must be a cursor <due ms>:<skip> from a previous page.")
    return match[1], int(match[2])


# ------------------------------------------------------------------------------------ decoding


def unpack_member(member: bytes) -> tuple[tuple[bytes, bytes], ...]:
    """The field list a member packs, or () when it is not the bus's msgpack list of byte strings."""
    try:
        items = msgpack.unpackb(member, raw=True)
    except Exception:  # noqa: BLE001 - any bytes may sit in a sorted set; they are shown as such
        return ()
    if not isinstance(items, list) or len(items) % 2 or not all(isinstance(x, bytes) for x in items):
        return ()
    return tuple(zip(items[0::2], items[1::2], strict=True))


def _text(value: bytes | None) -> str | None:
    return value.decode("ascii", "replace") if value else None


def retry_entry(due_ms: int, member: bytes) -> RetryEntry:
    """One member as a :class:`RetryEntry`, without its error (:func:`with_failures` looks it up)."""
    fields = unpack_member(member)
    found = dict(fields)
    raw_retries = found.get(_B_RETRIES)
    raw_failed_at = found.get(_B_FAILED_AT)
    return RetryEntry(
        ref=member_ref(due_ms, member),
        due_ms=due_ms,
        member=member,
        fields=fields,
        retries=int(raw_retries) if raw_retries and raw_retries.isdigit() else None,
        group=found.get(_B_GROUP),
        event_type=found.get(_B_TYPE),
        event_id=found.get(_B_ID),
        failed_entry_id=_text(found.get(_B_FAILED_ID)),
        first_id=_text(found.get(_B_FIRST_ID)),
        failed_at_ms=int(raw_failed_at) if raw_failed_at and raw_failed_at.isdigit() else None,
    )


def with_failures(conn: str, rset: RetrySet, entries: Sequence[RetryEntry]) -> tuple[RetryEntry, ...]:
    """``entries`` with the error (and failed entry ID) of their own group's last failure filled in from
    the stream's metric events, where those still hold it (see :mod:`.retry_failures`)."""
    found = failures_find(conn, rset.stream, [e.wanted() for e in entries if e.fields])
    out = []
    for e in entries:
        error, failed_id = found.get(e.ref, (None, None))
        out.append(replace(e, error=error, failed_entry_id=e.failed_entry_id or failed_id))
    return tuple(out)


# ------------------------------------------------------------------------------------ reads


def _pairs(reply: Sequence[Any]) -> list[tuple[bytes, int]]:
    """ZRANGE WITHSCORES as (member, score) pairs, whether redis-py paired them or not."""
    if reply and isinstance(reply[0], list | tuple):
        return [(bytes(m), int(float(s))) for m, s in reply]
    return [(bytes(reply[i]), int(float(reply[i + 1]))) for i in range(0, len(reply), 2)]


def retry_page(
    conn: str, rset: RetrySet, *, after: str | None = None, count: int = DEFAULT_PAGE, mask: EntryMask | None
) -> RetryPage:
    """One page of ``rset`` by due time (``ZRANGE ... BYSCORE LIMIT``: never the whole set), with its
    size, how many are overdue, and each retry's last error found in the stream's metric events. Each
    retry's fields are shown as ``mask`` shows an entry of the stream (the type, group and event id
    shown beside them are read from the masked fields too); the error is the caller's to mask.

    ``after`` is the previous page's ``next``: the due time of its last member and how many members
    due that millisecond it showed, so members sharing a due time are not skipped between pages.
    """
    if isinstance(count, bool) or not isinstance(count, int) or not 1 <= count <= MAX_PAGE:
        raise InvalidArgument(f"count must be between 1 and {MAX_PAGE}.")
    low, skip = parse_cursor(after)
    now = server_ms(conn)
    client = get_client(conn)
    with translated(conn):
        key_type, total, overdue, last, page = pipelined(
            client,
            [
                ("TYPE", rset.key),
                ("ZCARD", rset.key),
                ("ZCOUNT", rset.key, "-inf", now),
                ("ZRANGE", rset.key, -1, -1, "WITHSCORES"),
                ("ZRANGE", rset.key, low, "+inf", "BYSCORE", "LIMIT", skip, count + 1, "WITHSCORES"),
            ],
            raise_on_error=False,
        )
        if key_type not in (b"zset", b"none", "zset", "none"):
            raise NotFound(
                f"{display_text(rset.key)} holds another type, not the bus's retry set.", conn=conn
            )
        for reply in (total, overdue, last, page):
            if isinstance(reply, Exception):
                raise reply
    members = _pairs(page)
    shown = members[:count]
    entries = with_failures(conn, rset, [retry_entry(score, member) for member, score in shown])
    if mask is not None:
        entries = tuple(_shown(entry, mask) for entry in entries)
    following = None
    if len(members) > count:
        last_due = shown[-1][1]
        same = sum(1 for _, score in shown if score == last_due)
        following = f"{last_due}:{same + (skip if low != '-inf' and int(low) == last_due else 0)}"
    last_pairs = _pairs(last)
    return RetryPage(
        rset=rset,
        entries=entries,
        total=int(total),
        overdue=int(overdue),
        now_ms=now,
        last_due_ms=last_pairs[0][1] if last_pairs else None,
        next=following,
    )


def retry_members(
    conn: str, rset: RetrySet, *, up_to_ms: int, offset: int, count: int
) -> list[tuple[bytes, int]]:
    """Members due at or before ``up_to_ms``, oldest first, from ``offset``: one batch of a bulk action."""
    with translated(conn):
        reply = get_client(conn).execute_command(  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
            "ZRANGE", rset.key, "-inf", up_to_ms, "BYSCORE", "LIMIT", offset, count, "WITHSCORES"
        )
    return _pairs(reply)


def retry_count(conn: str, rset: RetrySet, *, up_to_ms: int) -> int:
    """Members due at or before ``up_to_ms`` (ZCOUNT): what "all" would take."""
    with translated(conn):
        return int(get_client(conn).zcount(rset.key, "-inf", up_to_ms))


def _shown(entry: RetryEntry, mask: EntryMask) -> RetryEntry:
    fields = mask(Entry(id=entry.ref, fields=entry.fields)).fields
    found = dict(fields)
    return replace(
        entry, fields=fields, group=found.get(_B_GROUP), event_type=found.get(_B_TYPE), event_id=found.get(_B_ID)
    )


def retry_entries_by_ref(conn: str, rset: RetrySet, refs: Sequence[str]) -> list[RetryEntry | None]:
    """The members the refs name (None: no longer in the set), each looked up among its due millisecond."""
    wanted = [parse_ref(ref) for ref in refs]
    with translated(conn):
        replies = (
            pipelined(
                get_client(conn),
                [("ZRANGEBYSCORE", rset.key, due, due, "LIMIT", 0, 1000) for due, _ in wanted],
            )
            if wanted
            else []
        )
    out: list[RetryEntry | None] = []
    for (due, sha), members in zip(wanted, replies, strict=True):
        member = next((m for m in members if hashlib.sha1(m).hexdigest() == sha), None)  # noqa: S324
        out.append(retry_entry(due, member) if member is not None else None)
    return out


def retry_sets(conn: str, *, budget: int) -> RetryListing:
    """Every retry set of ``conn``: sorted sets named ``*:retry`` found by ``SCAN ... TYPE zset`` on each
    primary, at most ``budget`` keys looked at, with their size, overdue count and next due time."""
    found: list[RetrySet] = []
    complete = True
    missed: tuple[str, ...] = ()
    for step in scan_streams(conn, match=b"*" + RETRY_SUFFIX, count=1000, budget=budget, key_type="zset"):
        found += [rset for rset in map(retry_set_of_key, step.keys) if rset is not None]
        missed = step.missed
        if step.cursor and step.scanned >= budget:
            complete = False
    now = server_ms(conn)
    found.sort(key=lambda s: s.key)
    replies = keyed_pipeline(
        conn,
        [s.key for s in found],
        lambda key: [("ZCARD", key), ("ZCOUNT", key, "-inf", now), ("ZRANGE", key, 0, 0, "WITHSCORES")],
    )
    sets = []
    for rset, reply in zip(found, replies.replies, strict=True):
        if reply is None or any(isinstance(r, Exception) for r in reply):
            continue
        first = _pairs(reply[2])
        sets.append(
            RetrySetSummary(
                rset=rset,
                waiting=int(reply[0]),
                overdue=int(reply[1]),
                next_due_ms=first[0][1] if first else None,
            )
        )
    missed = tuple(dict.fromkeys(missed + replies.missed))
    return RetryListing(sets=tuple(sets), now_ms=now, complete=complete and not missed, missed=missed)
