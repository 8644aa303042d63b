"""Stream families (docs/operations.md#stream-families): a bounded pass that sums a server's streams by
family, and one family's members, paged.

Which family a key is in is the bus's rule (:mod:`eventbus.families`), handed the console's settings:
``BUSCONSOLE_STREAM_FAMILIES`` (configured globs, first) and ``BUSCONSOLE_FAMILY_DELIMITER`` (detection).
Dead-letter queues are told by the console's DLQ conventions (:mod:`..conventions`), so a DLQ's depth is
also counted for the family of the stream it feeds back into.

The pass is the listings' own machinery: ``SCAN ... TYPE stream`` over every primary
(:func:`~..commands.scan_streams`, never ``KEYS``) up to ``BUSCONSOLE_FAMILY_SCAN_BUDGET`` keys, and per
chunk of :data:`CHUNK` keys one pipelined round trip of ``XINFO STREAM`` (never ``FULL``) and ``XINFO
GROUPS`` (:func:`.streams.stream_infos_covered`: a key that vanished or changed type since SCAN found it
answers an error and is left out). Memory grows with the number of families, not of keys. A pass that
stopped at its budget says how far it got: ``looked_at`` of ``keys_total`` (DBSIZE over the primaries).
"""

from __future__ import annotations

import functools
import time
from dataclasses import dataclass

import redis
from django.conf import settings

from eventbus.families import Family, FamilyRow, FamilyTally, Grouping, KeyFacts
from eventbus.text import display_text

from ..client import is_cluster, primaries
from ..commands import SCAN_COUNT, scan_streams
from ..conventions import detect_dlq
from ..errors import InvalidArgument, Unreachable, translated
from ..types import StreamSummary
from .limits import DEFAULT_PAGE, check_count
from .streams import stream_infos_covered, stream_summaries_covered

#: Keys per pipelined round trip of the pass.
CHUNK = 1000
#: Busiest members a family row names.
TOP = 5


@dataclass(frozen=True, slots=True)
class FamiliesPass:
    families: tuple[FamilyRow, ...]
    streams: int  # stream keys read and summed
    looked_at: int  # keys SCAN looked at (all types): equal to keys_total when complete
    keys_total: int | None  # DBSIZE, summed over the primaries, when the pass began (None: refused)
    complete: bool  # the scan reached the end of every primary within its budget
    round_trips: int
    seconds: float
    missed: tuple[str, ...] = ()  # primaries (host:port) not listed or not read: their streams are absent


@dataclass(frozen=True, slots=True)
class MembersPage:
    family: Family
    streams: tuple[StreamSummary, ...]
    next_cursor: int  # 0 when the scan of the family's glob is complete
    scanned: int  # keys SCAN looked at for this page
    keys_total: int | None  # DBSIZE over the primaries (None: refused), the M of "looked at N of M"
    missed: tuple[str, ...] = ()


def grouping() -> Grouping:
    """The console's grouping: its configured families and delimiter (cached per value)."""
    return _grouping(tuple(settings.BUSCONSOLE_STREAM_FAMILIES), settings.BUSCONSOLE_FAMILY_DELIMITER)


@functools.lru_cache(maxsize=8)
def _grouping(configured: tuple[Family, ...], delimiter: bytes) -> Grouping:
    return Grouping(configured=configured, delimiter=delimiter)


def _dlq_origin(key: bytes) -> bytes | None:
    kind = detect_dlq(key)
    return kind.source_hint if kind is not None else None


def keys_total(conn: str) -> int | None:
    """DBSIZE summed over the primaries (one round trip each): the M of "looked at N of M"; None when a
    server refuses DBSIZE (a managed service's rules). A primary of a cluster that does not answer is
    left out here and named by the scan, which cannot reach it either."""
    with translated(conn):
        nodes = primaries(conn)
    total = 0
    for node in nodes:
        try:
            with translated(conn):
                try:
                    total += int(node.client.dbsize())
                except redis.ResponseError:
                    return None
        except Unreachable:
            if not is_cluster(conn):
                raise
    return total


def families_read(conn: str, *, budget: int | None = None, top: int = TOP, chunk: int = CHUNK) -> FamiliesPass:
    """Every family of ``conn``'s streams that a pass of at most ``budget`` scanned keys finds, summed."""
    started = time.perf_counter()
    budget = budget or settings.BUSCONSOLE_FAMILY_SCAN_BUDGET
    total = keys_total(conn)
    tally = FamilyTally(grouping(), dlq_origin=_dlq_origin, top=top)
    waiting: list[bytes] = []
    read = trips = 0
    missed: dict[str, None] = {}
    cursor = scanned = 0

    def flush(keys: list[bytes]) -> None:
        nonlocal read, trips
        infos, unread = stream_infos_covered(conn, keys)
        missed.update(dict.fromkeys(unread))
        trips += 1
        read += len(infos)
        tally.add(
            KeyFacts(key=i.key, length=i.length, groups=len(i.groups), pending=i.pending,
                     first_id=i.first_id, last_id=i.last_id)
            for i in infos
        )

    for step in scan_streams(conn, count=SCAN_COUNT, budget=budget):
        trips += 1
        waiting += step.keys
        cursor, scanned = step.cursor, step.scanned
        missed.update(dict.fromkeys(step.missed))
        while len(waiting) >= chunk:
            flush(waiting[:chunk])
            del waiting[:chunk]
    if waiting:
        flush(waiting)
    complete = cursor == 0
    return FamiliesPass(
        families=tuple(tally.rows()), streams=read, looked_at=_looked_at(max(scanned, read), total, complete=complete),
        keys_total=total, complete=complete, round_trips=trips, seconds=time.perf_counter() - started,
        missed=tuple(missed),
    )


def _looked_at(scanned: int, total: int | None, *, complete: bool) -> int:
    """Keys the scan looked at: SCAN's COUNTs summed (or the streams it found, when SCAN gave more than
    asked), never more than DBSIZE, and all of it once the scan is complete."""
    if total is None:
        return scanned
    return total if complete else min(scanned, total)


def family_members(
    conn: str, pattern: bytes, *, cursor: int = 0, count: int = DEFAULT_PAGE, budget: int | None = None
) -> MembersPage:
    """One page of the streams in the family whose glob is ``pattern``: ``SCAN MATCH pattern TYPE stream``
    keeping the keys the grouping puts in that family (a detected ``progress:*`` also matches
    ``progress:a:b``, which is a family of its own), at most ``budget`` keys looked at per page."""
    if not pattern:
        raise InvalidArgument("A family's glob is required.", conn=conn)
    count = check_count(count)
    budget = budget or settings.BUSCONSOLE_SCAN_BUDGET
    rule = grouping()
    family = _family_named(rule, pattern)
    total = keys_total(conn)
    keys: list[bytes] = []
    scanned = 0
    missed: tuple[str, ...] = ()
    for step in scan_streams(conn, match=pattern, cursor=cursor, count=count, grow_to=SCAN_COUNT, budget=budget):
        keys += [key for key in step.keys if rule.family_of(key).pattern == pattern]
        cursor, scanned, missed = step.cursor, step.scanned, step.missed
        if len(keys) >= count:
            break
    summaries, unread = stream_summaries_covered(conn, keys)
    return MembersPage(
        family=family, streams=tuple(summaries), next_cursor=cursor,
        scanned=scanned if total is None else min(scanned, total), keys_total=total, missed=tuple(dict.fromkeys((*missed, *unread))),
    )


def _family_named(rule: Grouping, pattern: bytes) -> Family:
    """The family whose glob is ``pattern``: a configured one, else as detected (its members decide)."""
    for family in rule.configured:
        if family.pattern == pattern:
            return family
    detected = rule.family_of(pattern)  # a detected glob's own shape is itself (its "*" is no identifier)
    if detected.pattern == pattern and detected.kind != "configured":
        return detected
    return Family(pattern=pattern, name=display_text(pattern), kind="detected")
