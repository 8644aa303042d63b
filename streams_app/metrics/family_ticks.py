"""The snapshot tick by family (docs/operations.md#stream-families): one :class:`FamilySample` per family,
and per-stream rows only for the members that matter, so that a tick's cost grows with the number of
families and interesting members, not with the number of keys.

A connection whose DBSIZE is at most ``BUSCONSOLE_FAMILY_MODE_KEYS`` is snapshotted stream by stream as
before (:mod:`.snapshots`), and its family rows are summed in memory from the streams that tick read
(:func:`family_samples_from_streams`: no extra Redis command, ``complete`` unless a primary was missed).

Above it the connection is in *family mode*, and each tick (:func:`family_tick_read`, then
:func:`family_tick_write` in the snapshot's transaction):

1. reads the per-stream facts of the *members* (:func:`members_wanted`, at most
   ``BUSCONSOLE_FAMILY_MEMBERS_MAX``; pipelined XINFO as a snapshot reads any stream) and writes their
   samples and mirror figures through the same set-based :func:`~.snapshot_write.tick_write`. Members are,
   in this order of precedence: streams an alert names by a plain key (:data:`~.signals.family_members_named`),
   families of a single key (``orders``), dead-letter queues and the streams they feed back into, streams an
   enabled rule over a glob could fire on (:data:`~.signals.family_members_watched`: a group lag rule's
   members with a group's lag above its N, a pending rule's members with pending entries; the largest
   figure first), streams whose work is stuck (pending entries or lag, the most entries first), then the
   busiest members of each family (the longest first);
2. goes on with the rolling family pass for at most ``BUSCONSOLE_FAMILY_TICK_KEYS`` keys
   (:func:`~streams_app.redis_ops.family_pass.family_pass_step`), adding what it read to the partial
   figures saved on :class:`~.models.FamilyPassState` with the SCAN cursor, so a pass goes on across
   ticks and processes. When the SCAN completes, the pass's figures are written as the family rows of the
   current tick, and its members become the set the next ticks read.

*Stuck* is pending and lag alike: a pending entry was delivered and not acknowledged, a lagging one not
delivered at all (the group's consumers are down), and either is work waiting, so a stream ranks by the
sum of its groups' pending entries and lag. A group whose lag Redis cannot tell (Redis 7.0 after a
deletion, docs/architecture.md#lag-redis-cannot-tell) counts when its entries-read is behind the stream's
entries-added or its last delivered ID behind the last generated one, weighing the first difference (at
least 1). Rules that read what XINFO STREAM and XINFO GROUPS do not tell (a consumer's idle time, a
stream's silence) keep no member by their glob; DLQs (a DLQ growth rule's targets) are kept anyway. When
the cap cuts members other than the busiest, how many is counted (``members_left_out`` of the last
completed pass, in ``SnapshotRun.families``), a key counted when the pass cuts it.

A family's ``rate_per_s`` is the growth of the sum of its members' entries-added counters since the
family's previous row, over the seconds between the two rows; when the sum fell (members that expired
took more with them than was added) the rate is unknown (None) rather than negative. A pass spread over
ticks sees each key at one moment of it, so its figures are as of the pass, not of its last tick.

The partial figures are kept as JSON rather than as rows: a family's sums are a handful of numbers and
five busiest members, written once a tick, and the pass's state stays one row per connection.
"""

from __future__ import annotations

import functools
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings

from eventbus.families import Family, FamilyRow, FamilyTally, Grouping, KeyFacts
from eventbus.glob import glob_match
from eventbus.text import display_text, id_order
from streams_app.metrics.models import FamilyPassState, FamilySample, name_hash
from streams_app.metrics.signals import MemberWatch, family_members_named, family_members_watched
from streams_app.metrics.snapshot_write import KEY_MEMO_KEY_MAX, TickWritten, tick_write
from streams_app.redis_ops import snapshot_reads
from streams_app.redis_ops.conventions import detect_dlq, dlq_patterns
from streams_app.redis_ops.family_pass import family_pass_step
from streams_app.redis_ops.reads.families import grouping
from streams_app.redis_ops.types import GroupInfo, StreamInfo

#: Busiest members each family keeps.
TOP = 5
#: Keys whose family and DLQ origin the process remembers (:func:`_key_facts`): some 60 MB at most.
FAMILY_MEMO_MAX = 250_000
#: The kinds of member, as stored in :class:`FamilyPassState` (``STUCK`` was "pending" before lag counted).
NAMED, SINGLE, DLQ, STUCK, BUSIEST, WATCHED = range(6)
#: Their precedence (lower first): a rule's members come before other stuck ones.
_RANK = {NAMED: 0, SINGLE: 1, DLQ: 2, WATCHED: 3, STUCK: 4, BUSIEST: 5}


def family_mode(keys_total: int | None) -> bool:
    """Whether a connection holding ``keys_total`` keys (DBSIZE; None: refused) is snapshotted by family."""
    return keys_total is not None and keys_total > settings.BUSCONSOLE_FAMILY_MODE_KEYS


class _Remembered(Grouping):
    """The console's grouping, remembering each key's family and DLQ origin (:func:`_key_facts`)."""

    def family_of(self, key: bytes) -> Family:
        return _key_facts(self, key)[0]

    def dlq_origin(self, key: bytes) -> bytes | None:
        return _key_facts(self, key)[1]


@dataclass(slots=True)
class _Memo:
    rule: Grouping | None = None
    patterns: object = None
    facts: dict[bytes, tuple[Family, bytes | None]] = field(default_factory=dict)


_MEMO = _Memo()


def _key_facts(rule: Grouping, key: bytes) -> tuple[Family, bytes | None]:
    """A key's family and the stream it is the DLQ of, remembered by the process.

    Both are pure functions of the key and the settings (the memo starts over when they change), and
    working them out (the shape's regexes, the DLQ conventions) costs more than all the sums of a key
    together, every tick for every stream of a stream-by-stream tick. A memo that reached
    :data:`FAMILY_MEMO_MAX` keys starts over, so a family-mode pass over a million keys, which sees each
    key once a pass, does not hold them all; long keys are not remembered (as the tick's key memo,
    :mod:`.snapshot_write`).
    """
    known = _MEMO.facts.get(key)
    if known is None:
        kind = detect_dlq(key)
        known = (Grouping.family_of(rule, key), kind.source_hint if kind is not None else None)
        if len(key) <= KEY_MEMO_KEY_MAX:
            if len(_MEMO.facts) >= FAMILY_MEMO_MAX:
                _MEMO.facts.clear()
            _MEMO.facts[key] = known
    return known


def _remembered() -> _Remembered:
    """The console's grouping, remembering; the memo starts over when the settings changed."""
    base = grouping()
    rule = _remembering(base.configured, base.delimiter)
    patterns = dlq_patterns()
    if _MEMO.rule is not rule or _MEMO.patterns != patterns:
        _MEMO.rule, _MEMO.patterns, _MEMO.facts = rule, patterns, {}
    return rule


@functools.lru_cache(maxsize=8)
def _remembering(configured: tuple[Family, ...], delimiter: bytes) -> _Remembered:
    return _Remembered(configured=configured, delimiter=delimiter)


def _tally(streams: Iterable[StreamInfo]) -> FamilyTally:
    rule = _remembered()
    tally = FamilyTally(rule, dlq_origin=rule.dlq_origin, top=TOP)
    tally.add(
        KeyFacts(key=s.key, length=s.length, groups=len(s.groups), pending=s.pending, first_id=s.first_id,
                 last_id=s.last_id, entries_added=s.entries_added)
        for s in streams
    )
    return tally


def _sums_of(row: FamilyRow) -> dict[str, Any]:
    """A family row as the JSON the pass keeps between ticks."""
    return {
        "name": row.family.name, "kind": row.family.kind, "keys": row.keys, "entries": row.entries,
        "added": row.entries_added, "groups": row.groups, "pending": row.pending, "dlq_keys": row.dlq_keys,
        "dlq_depth": row.dlq_depth, "oldest": row.oldest_id, "newest": row.newest_id,
        "busiest": [[key.hex(), length] for key, length in row.busiest],
    }


def _merge(into: dict[str, dict[str, Any]], rows: Iterable[FamilyRow]) -> None:
    """Add ``rows`` to the partial figures ``into`` (pattern hex -> sums)."""
    for row in rows:
        new = _sums_of(row)
        had = into.setdefault(row.family.pattern.hex(), new)
        if had is new:
            continue
        for name in ("keys", "entries", "added", "groups", "pending", "dlq_keys", "dlq_depth"):
            had[name] += new[name]
        if new["oldest"] and (not had["oldest"] or id_order(new["oldest"]) < id_order(had["oldest"])):
            had["oldest"] = new["oldest"]
        if new["newest"] and (not had["newest"] or id_order(new["newest"]) > id_order(had["newest"])):
            had["newest"] = new["newest"]
        both = dict([*had["busiest"], *new["busiest"]])
        had["busiest"] = sorted(([k, n] for k, n in both.items()), key=lambda kn: (-kn[1], bytes.fromhex(kn[0])))[:TOP]


# ------------------------------------------------------------------------------------ the members


def _ranked(found: dict[str, tuple[int, int]], cap: int) -> list[list[Any]]:
    """``[hex, kind, weight]`` of the ``cap`` members that come first: by kind, then the heaviest, then key."""
    order = sorted(found.items(), key=lambda item: (_RANK[item[1][0]], -item[1][1], bytes.fromhex(item[0])))
    return [[h, kind, weight] for h, (kind, weight) in order[:cap]]


def _note(found: dict[str, tuple[int, int]], key: bytes, kind: int, weight: int = 0) -> None:
    h = key.hex()
    had = found.get(h)
    if had is None or (_RANK[kind], -weight) < (_RANK[had[0]], -had[1]):
        found[h] = (kind, weight)


def _behind(s: StreamInfo, g: GroupInfo) -> int:
    """Entries of ``s`` not yet delivered to ``g``: its lag, or when Redis cannot tell it, the entries-read
    gap (at least 1) if the group is behind at all, else 0."""
    if g.lag is not None:
        return g.lag
    if g.entries_read is not None and s.entries_added is not None and g.entries_read < s.entries_added:
        return s.entries_added - g.entries_read
    if s.last_generated_id and id_order(g.last_delivered_id) < id_order(s.last_generated_id):
        return 1
    return 0


def _watched(s: StreamInfo, watches: Sequence[MemberWatch]) -> int:
    """The largest figure a watch over ``s`` could fire on (0: none could)."""
    best = 0
    for w in watches:
        if not glob_match(w.stream_glob or "*", s.key):
            continue
        for g in s.groups:
            if not glob_match(w.group_glob or "*", g.name):
                continue
            if w.lag_above is not None and g.lag is not None and g.lag > w.lag_above:
                best = max(best, g.lag)
            if w.pending and g.pending:
                best = max(best, g.pending)
    return best


def _candidates(
    streams: Iterable[StreamInfo], found: dict[str, tuple[int, int]], watches: Sequence[MemberWatch] = ()
) -> None:
    """Note the members of ``streams`` that matter whatever the rest of the pass finds."""
    rule = _remembered()
    for s in streams:
        if rule.family_of(s.key).kind == "key":
            _note(found, s.key, SINGLE)
        origin = detect_dlq(s.key)
        if origin is not None:
            _note(found, s.key, DLQ, s.length)
            if origin.source_hint:
                _note(found, origin.source_hint, DLQ, s.length)
        stuck = sum(g.pending + _behind(s, g) for g in s.groups)
        if stuck:
            _note(found, s.key, STUCK, stuck)
            if watches and (figure := _watched(s, watches)):
                _note(found, s.key, WATCHED, figure)


def _watches(conn: str) -> list[MemberWatch]:
    out: list[MemberWatch] = []
    for _receiver, watches in family_members_watched.send_robust(sender=FamilyPassState, conn=conn):
        if not isinstance(watches, Exception):
            out += watches or ()
    return out


def _kept(found: dict[str, tuple[int, int]], cap: int) -> tuple[list[list[Any]], int]:
    """:func:`_ranked`, and how many members other than the busiest it left out."""
    ranked = _ranked(found, cap)
    left_out = sum(1 for kind, _ in found.values() if kind != BUSIEST) - sum(1 for _, k, _ in ranked if k != BUSIEST)
    return ranked, left_out


def members_wanted(conn: str, state: FamilyPassState | None) -> list[bytes]:
    """The members whose per-stream rows a family-mode tick (and the mirror) keeps, the first
    ``BUSCONSOLE_FAMILY_MEMBERS_MAX`` by precedence: those an alert names, the last completed pass's
    members, and those the pass under way has found so far."""
    found: dict[str, tuple[int, int]] = {}
    for _receiver, keys in family_members_named.send_robust(sender=FamilyPassState, conn=conn):
        if isinstance(keys, Exception):
            continue
        for key in keys or ():
            _note(found, bytes(key), NAMED)
    if state is not None:
        for h, kind, weight in [*state.members, *state.candidates]:
            _note(found, bytes.fromhex(h), kind, weight)
    return [bytes.fromhex(h) for h, _, _ in _ranked(found, settings.BUSCONSOLE_FAMILY_MEMBERS_MAX)]


# --------------------------------------------------------------------------------- the family tick


@dataclass(slots=True)
class FamilyTick:
    """What a family-mode tick read of one connection, to be written in the snapshot's transaction."""

    conn: str
    state: FamilyPassState
    members: tuple[StreamInfo, ...]
    read: int  # keys the pass read this tick
    completed: dict[str, dict[str, Any]] | None = None  # the pass's figures, when it completed this tick
    missed: tuple[str, ...] = ()
    notes: dict[str, Any] = field(default_factory=dict)


def family_tick_read(conn: str, *, tick: datetime, keys_total: int | None) -> FamilyTick:
    """Read the members and the pass's next step of ``conn`` (raises OpsError if Redis fails us)."""
    state = FamilyPassState.objects.filter(connection=conn).first() or FamilyPassState(connection=conn)
    members, _, unread = snapshot_reads.streams_read_covered(conn, members_wanted(conn, state))
    if state.cursor is None:  # a new pass
        state.cursor, state.started_at, state.keys_total = 0, tick, keys_total
        state.looked_at = state.streams = state.left_out = 0
        state.tally, state.carry, state.candidates, state.missed = {}, [], [], ""
    step = family_pass_step(
        conn, cursor=state.cursor, carry=[bytes.fromhex(h) for h in state.carry],
        max_keys=settings.BUSCONSOLE_FAMILY_TICK_KEYS,
    )
    tally = _tally(step.streams)
    _merge(state.tally, tally.rows())
    found = {h: (kind, weight) for h, kind, weight in state.candidates}
    _candidates(step.streams, found, _watches(conn))
    state.candidates, left_out = _kept(found, settings.BUSCONSOLE_FAMILY_MEMBERS_MAX)
    state.left_out += left_out
    missed = dict.fromkeys(filter(None, state.missed.split(", ")))
    missed.update(dict.fromkeys(step.missed))
    state.cursor, state.carry = step.cursor, [k.hex() for k in step.carry]
    state.looked_at += step.scanned
    state.streams += len(step.streams)
    state.missed = ", ".join(missed)
    out = FamilyTick(conn=conn, state=state, members=tuple(members), read=step.read,
                     missed=tuple(dict.fromkeys((*unread, *step.missed))))
    if step.done:
        out.completed = state.tally
        found = {h: (kind, weight) for h, kind, weight in state.candidates}  # what the cap let through
        for sums in state.tally.values():
            for h, length in sums["busiest"]:
                _note(found, bytes.fromhex(h), BUSIEST, length)
        state.members, left_out = _kept(found, settings.BUSCONSOLE_FAMILY_MEMBERS_MAX)
        state.members_left_out, state.left_out = state.left_out + left_out, 0
        state.cursor, state.completed_at, state.passes = None, tick, state.passes + 1
    out.notes = {
        "mode": "family", "pass_keys": state.streams, "tick_keys": step.read, "keys_total": state.keys_total,
        "members": len(members), "pass_complete": step.done, "passes": state.passes,
        "members_left_out": state.members_left_out,
    }
    return out


def family_tick_write(read: FamilyTick, *, tick: datetime, previous_tick: datetime | None, now: datetime) -> TickWritten:
    """Write what :func:`family_tick_read` read (inside the snapshot's transaction): the members' samples
    and mirror figures, the family rows when the pass completed, and the pass's state."""
    written = tick_write(conn=read.conn, streams=read.members, tick=tick, previous_tick=previous_tick, now=now)
    state = read.state
    if read.completed is not None:
        looked_at = state.looked_at if state.keys_total is None else min(state.looked_at, state.keys_total)
        read.notes["families"] = _samples_write(
            read.conn, read.completed, at=tick, complete=not state.missed, looked_at=looked_at,
            keys_total=state.keys_total,
        )
        state.tally, state.candidates, state.carry = {}, [], []
    state.save()
    return written


def family_samples_from_streams(
    conn: str, streams: Sequence[StreamInfo], *, tick: datetime, keys_total: int | None, complete: bool
) -> int:
    """A stream-by-stream tick's family rows, summed from the streams it read; returns how many.

    A family pass left under way when the connection fell below the threshold is dropped: its sums are
    older than these rows, and a pass resumed when the connection grows again starts afresh."""
    FamilyPassState.objects.filter(connection=conn, cursor__isnull=False).update(
        cursor=None, tally={}, carry=[], candidates=[], looked_at=0, streams=0, left_out=0
    )
    sums: dict[str, dict[str, Any]] = {}
    _merge(sums, _tally(streams).rows())
    looked_at = keys_total if keys_total is not None else len(streams)
    return _samples_write(conn, sums, at=tick, complete=complete, looked_at=looked_at, keys_total=keys_total)


def _samples_write(
    conn: str, sums: dict[str, dict[str, Any]], *, at: datetime, complete: bool, looked_at: int,
    keys_total: int | None,
) -> int:
    """One :class:`FamilySample` per family at ``at``, with its rate against the family's previous row."""
    before = FamilySample.objects.filter(connection=conn, at__lt=at).order_by("-at").values_list("at", flat=True).first()
    previous: dict[str, int | None] = {}
    if before is not None:
        previous = dict(FamilySample.objects.filter(connection=conn, at=before).values_list("family_hash", "entries_added"))
    seconds = (at - before).total_seconds() if before is not None else 0.0
    rows = []
    for pattern_hex, s in sums.items():
        pattern = bytes.fromhex(pattern_hex)
        family_hash = name_hash(pattern)
        was = previous.get(family_hash)
        grown = s["added"] - was if was is not None else None
        rows.append(FamilySample(
            connection=conn, family=display_text(pattern), family_hash=family_hash, kind=s["kind"], at=at,
            keys=s["keys"], entries=s["entries"], entries_added=s["added"],
            rate_per_s=grown / seconds if grown is not None and grown >= 0 and seconds > 0 else None,
            groups=s["groups"], pending=s["pending"], dlq_keys=s["dlq_keys"], dlq_depth=s["dlq_depth"],
            oldest_id=s["oldest"] or "", newest_id=s["newest"] or "",
            busiest=[{"key": display_text(bytes.fromhex(h)), "length": n} for h, n in s["busiest"]],
            complete=complete, looked_at=looked_at, keys_total=keys_total,
        ))
    FamilySample.objects.bulk_create(rows, batch_size=500, ignore_conflicts=True)
    return len(rows)
