"""Handler metrics read from the bus's metric streams: rates, percentiles, the read cap, the nearest-rank rule.

Entries are written in the bus's own format (by hand, and once by ``eventbus.metrics.MetricsBuffer``
itself). Expected figures come from a plain-Python computation over the same entries: each ``processed``
entry expanded into ``count`` runs of its mean duration, each ``failed`` entry one run, the runs sorted
and the nearest rank (``ceil(p/100 * N)``-th smallest) picked.
"""

from __future__ import annotations

import math

import pytest
import redis

from eventbus.metrics import MetricsBuffer
from streams_app.redis_ops.handler_metrics import handler_metrics, nearest_rank
from tests.console.redis_ops.helpers import METRICS, metric_entry

NOW_MS = 1_800_000_000_000  # "now" for the reads below; entry IDs are placed relative to it


def add(r: redis.Redis, fields: dict[str, str], *, seconds_ago: float, seq: int = 0, key: str = METRICS) -> None:
    ms = NOW_MS - int(seconds_ago * 1000)
    r.xadd(key, {**fields, "ts": str(ms)}, id=f"{ms}-{seq}")


def plain_percentile(runs: list[float], p: float) -> float:
    ordered = sorted(runs)
    return ordered[math.ceil(p / 100 * len(ordered)) - 1]


def test_rates_and_percentiles_match_a_plain_computation(r: redis.Redis) -> None:
    processed = [(40, 120.0, 9.5), (10, 300.0, 60.0), (25, 50.0, 4.0), (5, 1000.0, 400.0)]  # count, total ms, max
    failed = [35.0, 80.0, 2.5]
    add(r, metric_entry("processed", count=99, duration_ms=99.0), seconds_ago=400)  # before the 5-minute window
    for i, (count, total, longest) in enumerate(processed):
        add(r, metric_entry("processed", count=count, duration_ms=total, max_ms=longest), seconds_ago=200 - 30 * i)
    for i, ms in enumerate(failed):
        add(r, metric_entry("failed", duration_ms=ms, entry_id=f"1-{i}", event_id=f"e{i}", error="ValueError: no"), seconds_ago=100 - i)
    add(r, metric_entry("retried", entry_id="1-0", event_id="e0"), seconds_ago=50)
    add(r, metric_entry("dead_lettered", entry_id="1-1", event_id="e1", error="ValueError: no"), seconds_ago=40)
    add(r, metric_entry("processed", count=3, duration_ms=3.0, type_="order.paid"), seconds_ago=30)
    add(r, metric_entry("processed", count=7, duration_ms=7.0, group="shipping"), seconds_ago=20)

    result = handler_metrics("default", window_s=300, now_ms=NOW_MS)

    rows = {(row.group, row.type): row for row in result.rows}
    assert set(rows) == {(b"billing", b"order.created"), (b"billing", b"order.paid"), (b"shipping", b"order.created")}
    row = rows[(b"billing", b"order.created")]
    runs = [total / count for count, total, _ in processed for _ in range(count)] + failed
    assert (row.processed, row.failed, row.retried, row.dead_lettered) == (80, 3, 1, 1)
    assert row.processed_per_s == pytest.approx(80 / 300)
    assert row.failed_per_s == pytest.approx(3 / 300)
    assert row.p50_ms == pytest.approx(plain_percentile(runs, 50))
    assert row.p95_ms == pytest.approx(plain_percentile(runs, 95))
    assert row.max_ms == pytest.approx(400.0)
    assert not result.truncated and result.entries_read == 11  # the one before the window is not read
    assert result.for_stream(b"orders", b"shipping")[0].processed == 7


def test_entries_written_by_the_bus_buffer_itself(r: redis.Redis) -> None:
    buffer = MetricsBuffer("worker-9")
    durations = [1.0, 2.0, 3.0, 50.0]
    for ms in durations:
        buffer.processed("orders", "billing", "order.created", ms)
    buffer.event("failed", stream="orders", group="billing", type_="order.created", entry_id="9-9", event_id="x",
                 duration_ms=7.0, error="boom")
    for fields in buffer.drain(force=True):
        r.xadd(METRICS, fields)

    (row,) = handler_metrics("default", window_s=300, fresh=True).rows
    # Four successes in one aggregate (mean 14 ms) and one failure of 7 ms: runs 7, 14, 14, 14, 14.
    assert (row.processed, row.failed) == (4, 1)
    assert row.p50_ms == pytest.approx(plain_percentile([7.0] + [sum(durations) / 4] * 4, 50))
    assert row.max_ms == pytest.approx(50.0)


def test_the_read_is_capped_and_says_so(r: redis.Redis) -> None:
    for i in range(100):
        add(r, metric_entry("processed", count=i + 1, duration_ms=float(i + 1)), seconds_ago=100 - i)  # one a second
    capped = handler_metrics("default", window_s=300, now_ms=NOW_MS, max_entries=30)
    (row,) = capped.rows
    newest = range(70, 100)
    assert capped.truncated and capped.entries_read == 30
    assert row.processed == sum(i + 1 for i in newest)
    assert capped.span_s == pytest.approx(100 - 70)  # the oldest entry read was written 30 s before now
    assert row.processed_per_s == pytest.approx(row.processed / 30)

    exact = handler_metrics("default", window_s=300, now_ms=NOW_MS, max_entries=100)
    assert not exact.truncated and exact.rows[0].processed == sum(range(1, 101))


def test_nearest_rank_definition() -> None:
    assert nearest_rank([], 50) is None
    assert nearest_rank([(10.0, 1)], 95) == 10.0
    samples = [(5.0, 3), (1.0, 1), (9.0, 6)]  # ten runs: 1, 5, 5, 5, 9 x 6
    assert [nearest_rank(samples, p) for p in (10, 11, 40, 41, 50, 100)] == [1.0, 5.0, 5.0, 9.0, 9.0, 9.0]


def test_per_stream_metric_streams_and_the_old_shared_one_are_read_together(r: redis.Redis) -> None:
    """Workers write ``{stream}:metrics``; older ones wrote ``eventbus:metrics``: both count."""
    for key, stream, count in (("{orders}:metrics", "orders", 5), ("{pay}.v2:metrics", "{pay}.v2", 2)):
        add(r, metric_entry("processed", stream=stream, count=count, duration_ms=float(count)), seconds_ago=60,
            key=key)
    add(r, metric_entry("processed", stream="orders", count=3, duration_ms=3.0), seconds_ago=50)  # the old stream
    r.xadd("{orders}:metrics:x", {"unrelated": "1"})  # a name that only looks alike is not read

    every = handler_metrics("default", window_s=300, now_ms=NOW_MS)
    assert {(row.stream, row.processed) for row in every.rows} == {(b"orders", 8), (b"{pay}.v2", 2)}
    assert every.sources == 3 and not every.partial

    one = handler_metrics("default", window_s=300, now_ms=NOW_MS, stream=b"orders")
    assert [(row.stream, row.processed) for row in one.rows] == [(b"orders", 8)]
    assert one.sources == 2


def test_a_capped_read_over_several_streams_covers_one_exact_span(r: redis.Redis) -> None:
    written: list[tuple[int, int]] = []  # (ms, count) of every entry, to check the result against
    for i in range(100):  # one a second in one stream, one every ten seconds in another
        ms = NOW_MS - (100 - i) * 1000
        r.xadd("{busy}:metrics", {**metric_entry("processed", stream="s", count=1), "ts": str(ms)}, id=f"{ms}-0")
        written.append((ms, 1))
        if i % 10 == 5:
            r.xadd("{calm}:metrics", {**metric_entry("processed", stream="s", count=100), "ts": str(ms)},
                   id=f"{ms}-0")
            written.append((ms, 100))

    capped = handler_metrics("default", window_s=300, now_ms=NOW_MS, max_entries=40)
    assert capped.truncated and capped.entries_read <= 40
    start = NOW_MS - round(capped.span_s * 1000)
    (row,) = capped.rows
    # Exactly the entries of both streams from the span's start on, however the read was split.
    assert row.processed == sum(count for ms, count in written if ms >= start)
    assert row.processed_per_s == pytest.approx(row.processed / capped.span_s)
