"""The longest idle time among a consumer group's pending entries: bounded, and exact when it can be.

"How long has work been stuck" is the maximum idle time over the group's pending entries list (PEL),
not the idle time of its lowest ID: once the oldest entry is claimed (which resets its idle time) the
lowest ID may be the freshest of all while entries behind it wait for minutes. Redis keeps no index by
idle time, so the maximum is found with ``XPENDING`` in a bounded number of probes per group:

1. ``XPENDING key group - + K`` (K = :data:`PROBE_COUNT`): the K lowest IDs; m is the largest idle
   time among them. Fewer than K rows is the whole PEL, and m is exact. This probe rides in a round
   trip the caller makes anyway (the snapshot's second one).
2. Otherwise up to :data:`PROBE_ROUNDS` rounds of ``XPENDING key group IDLE t - + K'`` with ``t`` just
   above m (Redis 6.2+; K' = :data:`IDLE_PROBE_COUNT`): the lowest IDs among the entries idler than m.
   An empty reply means m is the maximum; fewer than K' rows means the maximum is among them; K' rows
   give a new m and another round. When the rounds run out the figure is a lower bound and says so
   (``exact=False``). Only a PEL whose idle times grow with the ID over hundreds of entries gets there:
   the usual shapes (older entries idler; a batch delivered or claimed at once; a claimed head before
   a stuck tail) are decided by the first IDLE round, whose reply is then empty or short.

Bounds: at most ``1 + PROBE_ROUNDS`` commands per group, returning at most
``K + PROBE_ROUNDS * K'`` rows (310); only groups with pending entries are probed, and only those whose
first K rows were not the whole PEL get the IDLE rounds. One IDLE probe walks the PEL from its lowest ID until it has K rows, O(pending) on the
server (about 70 ns an entry: 7 ms for 100k pending), so groups with more than
:data:`SCAN_PENDING_MAX` pending entries are not walked: their figure is the lower bound from step 1,
marked ``exact=False``. Each round is one pipelined round trip for every group still undecided
(:func:`~.commands.keyed_pipeline`, so it works on a cluster, split by node).

Idle times grow while the rounds run: an entry at m when probed is at m + d one round later. The next
threshold is therefore m plus the time since the previous round was sent (measured here) plus
:data:`TIE_SLACK_MS` (for a server that runs the next probe later than the client sent it), so entries
delivered together with the m entry (the usual case: one XREADGROUP delivers many at the same
millisecond) are not found again and again. The price is that an entry idler than m by less than
that margin may be missed: "exact" means no pending entry has waited longer than the figure by more
than the rounds' own duration plus :data:`TIE_SLACK_MS`, a tenth of a second on figures that matter
in seconds and minutes.
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from .commands import keyed_pipeline
from .parsers import parse_pending_entry
from .types import PendingEntry, PendingIdle

#: Rows asked by the first probe (K): most groups' whole PEL, small enough for every group of a snapshot.
PROBE_COUNT = 10
#: Rows asked by each IDLE round (K'): larger, since only the groups that need a round pay for it.
IDLE_PROBE_COUNT = 100
#: IDLE-filtered rounds after the first probe, at most (R): at most R + 1 probes per group.
PROBE_ROUNDS = 3
#: Groups with more pending entries than this keep the first probe's lower bound (no O(pending) walk).
SCAN_PENDING_MAX = 20_000
#: Margin above m + elapsed time for the next IDLE threshold (ms): entries within it count as ties.
TIE_SLACK_MS = 100


def first_probe(key: bytes, group: bytes) -> tuple[object, ...]:
    """The command of step 1, for the caller to pipeline with its own reads."""
    return ("XPENDING", key, group, "-", "+", PROBE_COUNT)


def _idle_probe(key: bytes, group: bytes, threshold_ms: int) -> tuple[object, ...]:
    return ("XPENDING", key, group, "IDLE", threshold_ms, "-", "+", IDLE_PROBE_COUNT)


def _idlest(rows: Sequence[Any]) -> PendingEntry | None:
    """The row with the largest idle time (the lowest ID among equals: rows come in ID order).

    Only that row is parsed: a snapshot runs this over every group with pending entries.
    """
    best, best_idle = None, -1
    for row in rows:
        idle = int(row[2])
        if idle > best_idle:
            best, best_idle = row, idle
    return None if best is None else parse_pending_entry(best)


@dataclass(slots=True)
class _Probe:
    """One group's search: the idlest entry so far, and whether another round is needed."""

    key: bytes
    group: bytes
    best: PendingEntry
    exact: bool = False
    open: bool = True
    rounds: int = 0


def _after_first(reply: Any, pending: int) -> tuple[PendingEntry | None, bool, bool]:
    """(idlest row, exact, needs rounds) from the first probe's reply."""
    if isinstance(reply, Exception) or not reply:
        return None, False, False  # the group vanished, or its PEL emptied since its pending count was read
    best = _idlest(reply)
    if len(reply) < PROBE_COUNT or len(reply) >= pending:
        return best, True, False  # the whole PEL
    if pending > SCAN_PENDING_MAX:
        return best, False, False  # too long to walk: a lower bound
    return best, False, True


def longest_idle(
    conn: str,
    firsts: Sequence[tuple[bytes, bytes, int, Any]],
    *,
    sent_at: float,
) -> tuple[list[PendingIdle | None], int, tuple[str, ...]]:
    """Each group's longest pending idle time, from its reply to :func:`first_probe` and the IDLE rounds.

    ``firsts`` holds ``(key, group, pending count, reply to first_probe)`` per group, ``sent_at`` the
    ``time.monotonic()`` at which the round trip carrying those probes was sent. Returns one
    :class:`PendingIdle` per group (None when it has nothing pending or vanished), the round trips
    spent here, and the primaries that did not answer a round (their groups keep a lower bound).
    """
    out: list[PendingIdle | None] = [None] * len(firsts)
    probes: dict[int, _Probe] = {}
    for i, (key, group, pending, reply) in enumerate(firsts):
        best, exact, more = _after_first(reply, pending)
        if best is None:
            continue
        if more:
            probes[i] = _Probe(key, group, best)
        else:
            out[i] = PendingIdle(id=best.id, idle_ms=best.idle_ms, exact=exact)

    round_trips = 0
    missed: dict[str, None] = {}
    previous_sent = sent_at
    while open_ := {i: p for i, p in probes.items() if p.open}:
        now = time.monotonic()
        # Idle times grew by about this much since the previous probe was sent: see the module docstring.
        drift_ms = math.ceil((now - previous_sent) * 1000) + TIE_SLACK_MS
        previous_sent = now
        missed.update(dict.fromkeys(_round(conn, open_, drift_ms)))
        round_trips += 1
    for i, p in probes.items():
        out[i] = PendingIdle(id=p.best.id, idle_ms=p.best.idle_ms, exact=p.exact)
    return out, round_trips, tuple(missed)


def _round(conn: str, probes: dict[int, _Probe], drift_ms: int) -> tuple[str, ...]:
    """One pipelined IDLE round over ``probes`` (all of them open); the primaries that did not answer."""
    by_key: dict[bytes, list[_Probe]] = {}
    for p in probes.values():
        by_key.setdefault(p.key, []).append(p)

    def commands(key: bytes) -> list[tuple[object, ...]]:
        return [_idle_probe(key, p.group, p.best.idle_ms + drift_ms + 1) for p in by_key[key]]

    replies = keyed_pipeline(conn, list(by_key), commands)
    for same_key, per_key in zip(by_key.values(), replies.replies, strict=True):
        for n, p in enumerate(same_key):
            _advance(p, None if per_key is None else per_key[n])
    return replies.missed


def _advance(probe: _Probe, reply: Any) -> None:
    """One IDLE round's reply for one group: a new idlest entry, and whether the search is over."""
    probe.rounds += 1
    if reply is None or isinstance(reply, Exception):
        probe.open = False  # its node went silent or the group vanished: keep the lower bound
        return
    best = _idlest(reply)
    if best is not None:
        probe.best = best  # every row is idler than the previous best
    if len(reply) < IDLE_PROBE_COUNT:
        probe.exact, probe.open = True, False
    elif probe.rounds >= PROBE_ROUNDS:
        probe.open = False  # rounds spent: a lower bound
