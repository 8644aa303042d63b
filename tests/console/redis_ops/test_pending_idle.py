"""The longest pending idle time: the maximum over the whole PEL, bounded, and flagged when it is a bound.

Every expected figure is what ``XPENDING key group - + <all>`` itself reports (read before and after the
code under test: idle times only grow meanwhile), with the tolerance :func:`~tests.console.redis_ops.pel.measured`
derives from the call's measured duration. PELs are shaped with ``XCLAIM ... IDLE`` (see ``pel.py``).
"""

from __future__ import annotations

import time

import pytest
import redis

from streams_app.redis_ops import pending_idle, snapshot_reads
from streams_app.redis_ops.pending_idle import IDLE_PROBE_COUNT, PROBE_COUNT, PROBE_ROUNDS
from streams_app.redis_ops.reads import groups as group_reads
from streams_app.redis_ops.types import PendingIdle, StreamInfo
from tests.console.helpers import CONN
from tests.console.redis_ops.pel import FRESH, lowest, measured, pel, pel_max

MIN = 60_000


def scattered(n: int, *, peak_at: int) -> list[int | None]:
    """Idle times of ``n`` entries: the lowest ID claimed just now, the others 1 to 8 minutes apart in a
    scrambled order, and entry ``peak_at`` idle 9 minutes (the issue's case)."""
    idles: list[int | None] = [FRESH] + [MIN + ((i * 7919) % 97) * 4_000 for i in range(1, n)]
    idles[peak_at] = 9 * MIN
    return idles


def group_of(info: StreamInfo, name: bytes) -> PendingIdle | None:
    [g] = [g for g in info.groups if g.name == name]
    return g.longest_idle


def assert_is_pel_max(r: redis.Redis, key: str, group: str, read) -> PendingIdle:
    """``read()``'s figure for the group against XPENDING over the whole PEL, before and after it."""
    before = pel_max(r, key, group)
    figure, slack_ms = measured(read)
    after = pel_max(r, key, group)
    assert figure is not None and figure.exact
    assert before[0] - slack_ms <= figure.idle_ms <= after[0]
    assert figure.id == before[1] == after[1]
    return figure


def test_snapshot_figure_is_the_longest_idle_after_the_oldest_entry_was_claimed(r: redis.Redis) -> None:
    ids = pel(r, "orders", "billing", scattered(30, peak_at=17))
    old_idle, old_id = lowest(r, "orders", "billing")
    assert old_id == ids[0] and old_idle < MIN  # what "- + 1" reported: the freshest entry of all

    def read() -> PendingIdle | None:
        [info], _ = snapshot_reads.streams_read(CONN, [b"orders"])
        return group_of(info, b"billing")

    figure = assert_is_pel_max(r, "orders", "billing", read)
    assert figure.id == ids[17] and figure.idle_ms >= 9 * MIN


def test_group_page_read_gives_the_same_figure(r: redis.Redis) -> None:
    ids = pel(r, "orders", "billing", scattered(25, peak_at=22))
    figure = assert_is_pel_max(
        r, "orders", "billing", lambda: group_reads.group_info(CONN, b"orders", b"billing").longest_idle
    )
    assert figure.id == ids[22]
    r.xgroup_create("orders", "idle-free", id="$")
    assert group_reads.group_info(CONN, b"orders", b"idle-free").longest_idle is None  # nothing pending


def test_entries_delivered_together_need_one_round_not_all_of_them(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    """148 entries delivered by one call share one idle time; the lowest is claimed again (the issue).

    The reader is made to spend longer between its round trips than the tie margin (a busy snapshot
    parsing a chunk), so the tied entries have grown idler by the time the IDLE round runs: the threshold
    must follow the clock or it finds them again, K at a time, and runs out of rounds.
    """
    real = snapshot_reads.longest_idle  # type: ignore[attr-defined]  # the test patches the name snapshot_reads calls

    def after_a_pause(*args, **kwargs):
        time.sleep(2 * pending_idle.TIE_SLACK_MS / 1000)
        return real(*args, **kwargs)

    monkeypatch.setattr(snapshot_reads, "longest_idle", after_a_pause)
    ids = pel(r, "orders", "billing", [FRESH] + [9 * MIN] * 147)
    r.xclaim("orders", "billing", "worker", 0, ids[1:], idle=9 * MIN)  # one command: one delivery time
    before = pel_max(r, "orders", "billing")
    ([info], trips), slack_ms = measured(lambda: snapshot_reads.streams_read(CONN, [b"orders"]))
    figure = group_of(info, b"billing")
    assert figure is not None and figure.exact and figure.id == ids[1] == before[1]
    assert before[0] - slack_ms <= figure.idle_ms <= pel_max(r, "orders", "billing")[0]
    assert trips == 3  # XINFO, the first probe, one IDLE round: the ties were not walked K at a time


def test_small_pels_are_exact_from_the_first_probe_with_no_extra_round_trip(r: redis.Redis) -> None:
    ids = pel(r, "small", "g", [FRESH, 3 * MIN, 5 * MIN, MIN][: PROBE_COUNT - 1])
    ([info], trips), _ = measured(lambda: snapshot_reads.streams_read(CONN, [b"small"]))
    figure = group_of(info, b"g")
    assert figure is not None and figure.exact and figure.id == ids[2] and trips == 2


def test_a_pel_walked_past_its_rounds_is_flagged_as_a_lower_bound(r: redis.Redis) -> None:
    """Idle growing with the ID: every round finds K' idler entries, so the rounds run out."""
    n = PROBE_COUNT + IDLE_PROBE_COUNT * PROBE_ROUNDS + 20
    ids = pel(r, "worst", "g", [MIN + i * 1_000 for i in range(n)])
    first_k_max = max(
        row["time_since_delivered"] for row in r.xpending_range("worst", "g", "-", "+", PROBE_COUNT)
    )
    [info], trips = snapshot_reads.streams_read(CONN, [b"worst"])
    true_max = pel_max(r, "worst", "g")
    figure = group_of(info, b"g")
    assert figure is not None and not figure.exact
    assert first_k_max < figure.idle_ms < true_max[0] and figure.id in ids and figure.id != true_max[1]
    assert trips == 2 + PROBE_ROUNDS  # and never more


def test_a_big_pel_with_one_idle_straggler_is_exact(r: redis.Redis) -> None:
    """More than K + R * K' entries, the usual shape (older IDs idler), and one straggler far behind."""
    n = PROBE_COUNT + IDLE_PROBE_COUNT * PROBE_ROUNDS + 20
    idles: list[int | None] = [30 * MIN - i * 1_000 for i in range(n)]
    idles[n - 3] = 45 * MIN
    ids = pel(r, "big", "g", idles)

    def read() -> PendingIdle | None:
        [info], _ = snapshot_reads.streams_read(CONN, [b"big"])
        return group_of(info, b"g")

    assert assert_is_pel_max(r, "big", "g", read).id == ids[n - 3]


def test_a_pel_longer_than_the_walk_limit_keeps_the_first_probe_as_a_lower_bound(
    r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    monkeypatch.setattr(pending_idle, "SCAN_PENDING_MAX", 2 * PROBE_COUNT)
    idles = scattered(3 * PROBE_COUNT, peak_at=3 * PROBE_COUNT - 1)
    pel(r, "long", "g", idles)
    first_k = r.xpending_range("long", "g", "-", "+", PROBE_COUNT)
    [info], trips = snapshot_reads.streams_read(CONN, [b"long"])
    figure = group_of(info, b"g")
    assert figure is not None and not figure.exact and trips == 2  # no IDLE walk
    best = max(first_k, key=lambda row: row["time_since_delivered"])
    assert figure.id == best["message_id"].decode() and figure.idle_ms < pel_max(r, "long", "g")[0]


def test_one_chunk_mixes_groups_that_need_rounds_and_groups_that_do_not(r: redis.Redis) -> None:
    """Several groups of one stream and of several streams in one pipelined chunk, each against its PEL."""
    pel(r, "a", "g1", scattered(30, peak_at=11))
    for name, peak in (("g2", 4), ("g3", 29)):  # more groups on the same stream
        r.xgroup_create("a", name, id="0")
        r.xreadgroup(name, "w", {"a": ">"}, count=30)
        rows = r.xpending_range("a", name, "-", "+", 30)
        r.xclaim("a", name, "w", 0, [rows[0]["message_id"]])
        for i, row in enumerate(rows[1:], start=1):
            r.xclaim("a", name, "w", 0, [row["message_id"]], idle=(7 * MIN if i == peak else MIN + i * 1_000))
    pel(r, "b", "g1", [FRESH, 2 * MIN])
    r.xadd("c", {"n": "1"})
    r.xgroup_create("c", "none-pending", id="$")
    for group in ("g1", "g2", "g3"):

        def read(group: str = group) -> PendingIdle | None:
            infos, _ = snapshot_reads.streams_read(CONN, [b"a", b"b", b"c"], chunk=2)
            return group_of(infos[0], group.encode())

        assert_is_pel_max(r, "a", group, read)
    infos, _ = snapshot_reads.streams_read(CONN, [b"a", b"b", b"c"], chunk=2)
    assert group_of(infos[1], b"g1").idle_ms >= 2 * MIN and group_of(infos[2], b"none-pending") is None
