"""The members that keep their per-stream rows when a connection is snapshotted by family
(docs/operations.md#stream-families), chosen by :mod:`.family_ticks` and the mirror sync.

Members are, in this order of precedence: streams an alert names by a plain key
(:data:`~.signals.family_members_named`), families of a single key (``orders``), dead-letter queues and
the streams they feed back into, streams an enabled rule over a glob could fire on
(:data:`~.signals.family_members_watched`: a group lag rule's members with a group's lag above its N, a
pending rule's members with pending entries; the largest figure first), streams whose work is stuck
(pending entries or lag, the most entries first), then the busiest members of each family (the longest
first), at most ``BUSCONSOLE_FAMILY_MEMBERS_MAX``. Each is kept as ``[key hex, kind, weight]`` in
:class:`~.models.FamilyPassState`.

*Stuck* is pending and lag alike: a pending entry was delivered and not acknowledged, a lagging one not
delivered at all (the group's consumers are down), and either is work waiting, so a stream ranks by the
sum of its groups' pending entries and lag. A group whose lag Redis cannot tell (Redis 7.0 after a
deletion, docs/architecture.md#lag-redis-cannot-tell) counts when its entries-read is behind the stream's
entries-added or its last delivered ID behind the last generated one, weighing the first difference (at
least 1). Rules that read what XINFO STREAM and XINFO GROUPS do not tell (a consumer's idle time, a
stream's silence) keep no member by their glob; DLQs (a DLQ growth rule's targets) are kept anyway. When
the cap cuts members other than the busiest, how many is counted (``members_left_out`` of the last
completed pass, in ``SnapshotRun.families``), a key counted when the pass cuts it.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
from typing import Any

from django.conf import settings

from eventbus.families import Family
from eventbus.glob import glob_match
from eventbus.text import id_order
from streams_app.metrics.models import FamilyPassState
from streams_app.metrics.signals import MemberWatch, family_members_named, family_members_watched
from streams_app.redis_ops.conventions import detect_dlq
from streams_app.redis_ops.types import GroupInfo, StreamInfo

#: The kinds of member, as stored in :class:`FamilyPassState` (``STUCK`` was "pending" before lag counted).
NAMED, SINGLE, DLQ, STUCK, BUSIEST, WATCHED = range(6)
#: Their precedence (lower first): a rule's members come before other stuck ones.
_RANK = {NAMED: 0, SINGLE: 1, DLQ: 2, WATCHED: 3, STUCK: 4, BUSIEST: 5}


def ranked(found: dict[str, tuple[int, int]], cap: int) -> list[list[Any]]:
    """``[hex, kind, weight]`` of the ``cap`` members that come first: by kind, then the heaviest, then key."""
    order = sorted(found.items(), key=lambda item: (_RANK[item[1][0]], -item[1][1], bytes.fromhex(item[0])))
    return [[h, kind, weight] for h, (kind, weight) in order[:cap]]


def note(found: dict[str, tuple[int, int]], key: bytes, kind: int, weight: int = 0) -> None:
    """Note ``key`` as a member of ``kind``, unless it is noted already with a precedence at least as high."""
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


def candidates(
    streams: Iterable[StreamInfo], found: dict[str, tuple[int, int]], *, family_of: Callable[[bytes], Family],
    watches: Sequence[MemberWatch] = (),
) -> None:
    """Note the members of ``streams`` that matter whatever the rest of the pass finds."""
    for s in streams:
        if family_of(s.key).kind == "key":
            note(found, s.key, SINGLE)
        origin = detect_dlq(s.key)
        if origin is not None:
            note(found, s.key, DLQ, s.length)
            if origin.source_hint:
                note(found, origin.source_hint, DLQ, s.length)
        stuck = sum(g.pending + _behind(s, g) for g in s.groups)
        if stuck:
            note(found, s.key, STUCK, stuck)
            if watches and (figure := _watched(s, watches)):
                note(found, s.key, WATCHED, figure)


def rule_watches(conn: str) -> list[MemberWatch]:
    """What the receivers of :data:`~.signals.family_members_watched` watch on ``conn`` (a receiver that
    fails is skipped, as for the named keys)."""
    out: list[MemberWatch] = []
    for _receiver, got in family_members_watched.send_robust(sender=FamilyPassState, conn=conn):
        if not isinstance(got, Exception):
            out += got or ()
    return out


def kept(found: dict[str, tuple[int, int]], cap: int) -> tuple[list[list[Any]], int]:
    """:func:`ranked`, and how many members other than the busiest it left out."""
    first = ranked(found, cap)
    left_out = sum(1 for kind, _ in found.values() if kind != BUSIEST) - sum(1 for _, k, _ in first if k != BUSIEST)
    return first, left_out


def members_wanted(conn: str, state: FamilyPassState | None) -> list[bytes]:
    """The members whose per-stream rows a family-mode tick (and the mirror) keeps, the first
    ``BUSCONSOLE_FAMILY_MEMBERS_MAX`` by precedence: those an alert names, the last completed pass's
    members, and those the pass under way has found so far."""
    found: dict[str, tuple[int, int]] = {}
    for _receiver, keys in family_members_named.send_robust(sender=FamilyPassState, conn=conn):
        if isinstance(keys, Exception):
            continue
        for key in keys or ():
            note(found, bytes(key), NAMED)
    if state is not None:
        for h, kind, weight in [*state.members, *state.candidates]:
            note(found, bytes.fromhex(h), kind, weight)
    return [bytes.fromhex(h) for h, _, _ in ranked(found, settings.BUSCONSOLE_FAMILY_MEMBERS_MAX)]
