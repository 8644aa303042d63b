"""The snapshot tick by family (docs/operations.md#stream-families): one :class:`FamilySample` per family,
and per-stream rows only for the members that matter, so that a tick's cost grows with the number of
families and interesting members, not with the number of keys.

A connection whose DBSIZE is at most ``BUSCONSOLE_FAMILY_MODE_KEYS`` is snapshotted stream by stream as
before (:mod:`.snapshots`), and its family rows are summed in memory from the streams that tick read
(:func:`stream_sums`, :func:`family_samples_from_streams`: no extra Redis command, ``complete`` unless a primary was missed).

Above it the connection is in *family mode*, and each tick (:func:`family_tick_read`, then
:func:`family_tick_write` in the snapshot's transaction):

1. reads the per-stream facts of the *members* (:func:`members_wanted`, at most
   ``BUSCONSOLE_FAMILY_MEMBERS_MAX``; pipelined XINFO as a snapshot reads any stream) and writes their
   samples and mirror figures through the same set-based :func:`~.snapshot_write.tick_write`. Which
   members, and in which order of precedence, is :mod:`.family_members`' rule (alert-named streams,
   single-key families, DLQs, what a rule over a glob could fire on, stuck work, the busiest);
2. goes on with the rolling family pass for at most ``BUSCONSOLE_FAMILY_TICK_KEYS`` keys
   (:func:`~streams_app.redis_ops.family_pass.family_pass_step`), adding what it read to the partial
   figures saved on :class:`~.models.FamilyPassState` with the SCAN cursor, so a pass goes on across
   ticks and processes. When the SCAN completes, the pass's figures are written as the family rows of the
   current tick, and its members become the set the next ticks read.

A family's ``rate_per_s`` is the growth of the sum of its members' entries-added counters since the
family's previous row, over the seconds between the two rows; when the sum fell (members that expired
took more with them than was added) the rate is unknown (None) rather than negative. A pass spread over
ticks sees each key at one moment of it, so its figures are as of the pass, not of its last tick.

The partial figures are kept as JSON rather than as rows: a family's sums are a handful of numbers and
five busiest members, written once a tick, and the pass's state stays one row per connection.
"""

from __future__ import annotations

import functools
import heapq
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings

from eventbus.families import Family, FamilyRow, FamilyTally, Grouping, KeyFacts
from eventbus.text import display_text, id_order
from streams_app.metrics.family_members import BUSIEST, candidates, kept, members_wanted, note, rule_watches
from streams_app.metrics.models import FamilyPassState, FamilySample, name_hash
from streams_app.metrics.snapshot_write import KEY_MEMO_KEY_MAX, TickWritten, tick_write
from streams_app.redis_ops import snapshot_reads
from streams_app.redis_ops.conventions import detect_dlq, dlq_patterns
from streams_app.redis_ops.family_pass import family_pass_step
from streams_app.redis_ops.reads.families import grouping
from streams_app.redis_ops.types import StreamInfo

#: Busiest members each family keeps.
TOP = 5
#: Keys whose family and DLQ origin the process remembers (:func:`_key_facts`): some 60 MB at most.
FAMILY_MEMO_MAX = 250_000


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
    families: dict[Family, Family] = field(default_factory=dict)  # one object per family (:func:`stream_rows`)


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
        family = Grouping.family_of(rule, key)
        known = (_MEMO.families.setdefault(family, family), kind.source_hint if kind is not None else None)
        if len(key) <= KEY_MEMO_KEY_MAX:
            if len(_MEMO.facts) >= FAMILY_MEMO_MAX:
                _MEMO.facts.clear()
                _MEMO.families.clear()
            _MEMO.facts[key] = known
    return known


def _remembered() -> _Remembered:
    """The console's grouping, remembering; the memo starts over when the settings changed."""
    base = grouping()
    rule = _remembering(base.configured, base.delimiter)
    patterns = dlq_patterns()
    if _MEMO.rule is not rule or _MEMO.patterns != patterns:
        _MEMO.rule, _MEMO.patterns, _MEMO.facts, _MEMO.families = rule, patterns, {}, {}
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


def stream_rows(streams: Sequence[StreamInfo]) -> list[FamilyRow]:
    """The family rows of a stream-by-stream tick: what :class:`~eventbus.families.FamilyTally` makes of
    ``streams``, in fewer Python steps per stream.

    Such a tick sums every stream of the connection every tick, inside the snapshot's transaction, and the
    snapshot's goal is its database writes within 1.5x of its Redis read (docs/performance.md#goals-and-floors):
    the tally, one stream at a time (a :class:`KeyFacts`, two cut IDs, a heap step and two family lookups
    each) cost about 2.7 us a stream. Here the streams are first put in their families (one remembered
    lookup each), then each family is summed by builtins over its list; its busiest members are the ones
    longer than the TOP-th longest, then those as long whose keys sort first, sorted as the tally sorts
    them (the longest first, ties by key). The rows are the tally's, the order included
    (tests/console/metrics/test_family_stream_rows.py); the tally stays what the rolling pass adds to.
    The snapshot runs this in a thread while the database writes the tick (:func:`stream_sums`).
    """
    rule = _remembered()
    # keyed by the family's object identity (the memo hands out one object per family), as hashing the
    # dataclass for each stream costs more than the rest of its sums
    families: dict[int, Family] = {}
    by_family: dict[int, list[StreamInfo]] = {}
    fed: dict[int, list[int]] = {}  # the lengths of the DLQs feeding back into a family's streams
    for stream in streams:
        family, origin = _key_facts(rule, stream.key)
        members = by_family.get(id(family))
        if members is None:
            families[id(family)] = family
            by_family[id(family)] = members = []
        members.append(stream)
        if origin is not None:
            fed_family = _key_facts(rule, origin)[0]
            families[id(fed_family)] = fed_family
            fed.setdefault(id(fed_family), []).append(stream.length)
    merged: dict[Family, tuple[list[StreamInfo], list[int]]] = {}
    for ident, family in families.items():  # two objects may stand for one family (the memo started over)
        members, depths = merged.setdefault(family, ([], []))
        members += by_family.get(ident, ())
        depths += fed.get(ident, ())
    rows = []
    for family, (members, depths) in merged.items():
        firsts = [m.first_id for m in members if m.first_id]
        lasts = [m.last_id for m in members if m.last_id]
        longest = members
        if len(members) > TOP:
            cut = heapq.nlargest(TOP, [m.length for m in members])[-1]
            longest = [m for m in members if m.length > cut]
            # of the members as long as the cut, the ones whose keys sort first (bytes compared in C)
            first = set(heapq.nsmallest(TOP - len(longest), [m.key for m in members if m.length == cut]))
            longest += [m for m in members if m.length == cut and m.key in first]
        longest = sorted(longest, key=lambda m: (-m.length, m.key))
        rows.append(FamilyRow(
            family=family, keys=len(members), entries=sum(m.length for m in members),
            groups=sum(len(m.groups) for m in members),
            pending=sum(g.pending for m in members for g in m.groups),
            dlq_depth=sum(depths), dlq_keys=len(depths),
            oldest_id=min(firsts, key=id_order) if firsts else None,
            newest_id=max(lasts, key=id_order) if lasts else None,
            busiest=tuple((m.key, m.length) for m in longest[:TOP]),
            entries_added=sum(m.entries_added or 0 for m in members),
        ))
    rows.sort(key=lambda row: (-row.entries, -row.keys, row.family.pattern))
    return rows


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
    candidates(step.streams, found, family_of=_remembered().family_of, watches=rule_watches(conn))
    state.candidates, left_out = kept(found, settings.BUSCONSOLE_FAMILY_MEMBERS_MAX)
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
                note(found, bytes.fromhex(h), BUSIEST, length)
        state.members, left_out = kept(found, settings.BUSCONSOLE_FAMILY_MEMBERS_MAX)
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


def stream_sums(streams: Sequence[StreamInfo]) -> dict[str, dict[str, Any]]:
    """The figures of a stream-by-stream tick's family rows (pattern hex -> sums), for
    :func:`family_samples_from_streams`. No database: the snapshot works them out in a thread while the
    database writes the tick's samples (:func:`~.snapshot_write.tick_write`)."""
    sums: dict[str, dict[str, Any]] = {}
    _merge(sums, stream_rows(streams))
    return sums


def family_samples_from_streams(
    conn: str, sums: dict[str, dict[str, Any]], *, streams: int, tick: datetime, keys_total: int | None,
    complete: bool,
) -> int:
    """A stream-by-stream tick's family rows, from the :func:`stream_sums` of the ``streams`` (how many)
    it read; returns how many rows.

    A family pass left under way when the connection fell below the threshold is dropped: its sums are
    older than these rows, and a pass resumed when the connection grows again starts afresh."""
    FamilyPassState.objects.filter(connection=conn, cursor__isnull=False).update(
        cursor=None, tally={}, carry=[], candidates=[], looked_at=0, streams=0, left_out=0
    )
    looked_at = keys_total if keys_total is not None else streams
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
