"""Metric snapshots: ``snapshot_take`` at a tick, the per-tick rate, one run per tick under overlap and
under the beat task's lock, errors of unreachable connections, and the signal and broadcast after commit.

Expected values come from Redis itself (redis-py's XINFO and XPENDING, read around the snapshot) or
from plain arithmetic over the entries the test added.
"""

from __future__ import annotations

import asyncio
import threading
from datetime import UTC, datetime, timedelta

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connections

from busconsole.locks import lock_held
from streams_app.live.groups import snapshot_group
from streams_app.metrics import family_ticks, signals, snapshots
from streams_app.metrics.models import (
    DlqSample,
    FamilySample,
    GroupMirror,
    GroupSample,
    SnapshotRun,
    StreamMirror,
    StreamSample,
)
from tests.console.helpers import CONN
from tests.console.metrics.helpers import T0, bus, group_row, mirror_row
from tests.console.redis_ops.pel import pel_max


def test_the_family_sums_run_beside_the_writes_and_a_failure_there_fails_the_tick(r: redis.Redis, db, monkeypatch) -> None:
    """A stream-by-stream tick works its family sums out in a thread of their own while the database runs
    its statements; what goes wrong there fails the snapshot, and nothing of the tick is kept."""
    bus(r)
    threads: list[int] = []

    def failing(streams):
        threads.append(threading.get_ident())
        raise RuntimeError("the sums failed")

    monkeypatch.setattr(family_ticks, "stream_sums", failing)
    with pytest.raises(RuntimeError, match="the sums failed"):
        snapshots.snapshot_take(tick=T0)
    assert threads and threads[0] != threading.get_ident()
    assert not SnapshotRun.objects.exists() and not StreamSample.objects.exists() and not FamilySample.objects.exists()
    monkeypatch.undo()
    run = snapshots.snapshot_take(tick=T0)
    assert FamilySample.objects.filter(at=T0).count() == run.families[CONN]["families"] > 0


def test_snapshot_values_match_xinfo_and_xpending(r: redis.Redis, db) -> None:
    bus(r)
    r.xclaim("orders", "billing", "worker-2", 0, [r.xpending_range("orders", "billing", "-", "+", 1)[0]["message_id"]])
    idlest = r.xpending_range("orders", "billing", "-", "+", 10)[-1]["message_id"]  # claimed long ago (below)
    r.xclaim("orders", "billing", "worker-2", 0, [idlest], idle=120_000)
    before = pel_max(r, "orders", "billing")
    run = snapshots.snapshot_take(tick=T0)
    after = pel_max(r, "orders", "billing")
    assert run.tick == T0 and run.errors == [] and run.finished_at is not None
    assert (run.streams, run.groups) == (4, 3)

    for key in ("orders", "orders:dlq", b"bin\xff\x00key", "empty"):
        sample = StreamSample.objects.get(stream=mirror_row(key), at=T0, resolution="raw")
        info = r.xinfo_stream(key)
        assert (sample.length, sample.entries_added) == (info["length"], info["entries-added"])
        assert sample.added is None and sample.rate_per_s is None  # no previous tick to compare with
        for g in r.xinfo_groups(key):
            gs = GroupSample.objects.get(group=group_row(key, g["name"]), at=T0)
            assert (gs.lag, gs.pending) == (g["lag"], g["pending"])
            if g["pending"] == 0:
                assert gs.oldest_pending_idle_ms is None
    # The sample holds the longest idle time over the PEL (the lowest ID was just claimed), the mirror its entry.
    billing = GroupSample.objects.get(group=group_row("orders", "billing"), at=T0)
    assert before[1] == after[1] == idlest.decode()
    assert before[0] <= billing.oldest_pending_idle_ms <= after[0]
    assert group_row("orders", "billing").oldest_pending_id == idlest.decode()

    dlqs = {bytes(s.stream.key): s.depth for s in DlqSample.objects.filter(at=T0).select_related("stream")}
    assert dlqs == {b"orders:dlq": r.xlen("orders:dlq")}


def test_rate_counts_entries_added_between_ticks(r: redis.Redis, db) -> None:
    r.xadd("s", {"x": "0"})
    snapshots.snapshot_take(tick=T0)
    for i in range(30):
        r.xadd("s", {"x": str(i)})
    r.xtrim("s", maxlen=5, approximate=False)  # trimming does not hide what was added
    snapshots.snapshot_take(tick=T0 + timedelta(seconds=10))
    sample = StreamSample.objects.get(stream=mirror_row("s"), at=T0 + timedelta(seconds=10))
    assert (sample.length, sample.added, sample.rate_per_s) == (5, 30, 3.0)
    assert mirror_row("s").length == 5  # the snapshot keeps the mirror's figures fresh


def test_the_same_tick_is_recorded_once(r: redis.Redis, db) -> None:
    bus(r)
    first = snapshots.snapshot_take(tick=T0)
    r.xadd("orders", {"more": "1"})
    second = snapshots.snapshot_take(tick=T0)
    assert second.pk == first.pk and SnapshotRun.objects.count() == 1
    assert StreamSample.objects.filter(at=T0).count() == 4
    assert StreamSample.objects.get(stream=mirror_row("orders"), at=T0).length == 12


def test_tick_is_the_interval_aligned_time() -> None:
    now = datetime(2026, 1, 1, 12, 0, 17, 500000, tzinfo=UTC)
    assert snapshots.snapshot_tick_for(now=now, interval_s=10) == datetime(2026, 1, 1, 12, 0, 10, tzinfo=UTC)
    assert snapshots.snapshot_tick_for(now=now, interval_s=60) == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_overlapping_runs_record_one_snapshot_per_tick(r: redis.Redis) -> None:
    bus(r)
    barrier = threading.Barrier(3)
    runs: list[int] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait(10)
            runs.append(snapshots.snapshot_take(tick=T0).pk)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures
    assert len(runs) == 3 and len(set(runs)) == 1
    assert SnapshotRun.objects.count() == 1
    assert StreamSample.objects.filter(at=T0).count() == 4 and GroupSample.objects.filter(at=T0).count() == 3
    assert StreamMirror.objects.count() == 4 and GroupMirror.objects.count() == 3


def test_the_beat_task_skips_while_another_run_holds_the_lock(r: redis.Redis, db) -> None:
    r.xadd("s", {"x": "1"})
    with lock_held(name="snapshot", ttl_ms=5000) as held:
        assert held
        assert snapshots.snapshot_take_guarded(now=T0) is None
        with lock_held(name="snapshot", ttl_ms=5000) as again:
            assert not again
    assert SnapshotRun.objects.count() == 0
    run = snapshots.snapshot_take_guarded(now=T0 + timedelta(seconds=3))
    assert run is not None and run.tick == T0  # the lock is released after the block


def test_an_unreachable_connection_is_an_error_of_the_run(r: redis.Redis, db, settings) -> None:
    r.xadd("s", {"x": "1"})
    settings.BUS_REDIS_URLS = {CONN: settings.BUS_REDIS_URLS[CONN], "down": "redis://127.0.0.1:1/0"}
    run = snapshots.snapshot_take(tick=T0)
    assert [e["conn"] for e in run.errors] == ["down"]
    assert run.streams == 1 and StreamSample.objects.filter(at=T0).count() == 1


def test_signal_then_broadcast_after_commit(r: redis.Redis, db, django_capture_on_commit_callbacks) -> None:
    r.xadd("s", {"x": "1"})
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(snapshot_group(), channel)
    seen: list[tuple[datetime, int]] = []

    def receiver(sender, *, tick, run, **kwargs) -> None:
        seen.append((tick, run.pk))

    def broken(sender, **kwargs) -> None:
        raise RuntimeError("a receiver's bug must not fail the snapshot")

    signals.snapshot_taken.connect(receiver)
    signals.snapshot_taken.connect(broken)
    try:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            run = snapshots.snapshot_take(tick=T0)
            assert seen == []  # nothing before the commit
        assert len(callbacks) == 1
    finally:
        signals.snapshot_taken.disconnect(receiver)
        signals.snapshot_taken.disconnect(broken)
    assert seen == [(T0, run.pk)]
    event = async_to_sync(_receive)(layer, channel)
    assert event == {"type": "metrics.snapshot", "tick": T0.isoformat()}


async def _receive(layer, channel: str) -> dict | None:
    try:
        return await asyncio.wait_for(layer.receive(channel), timeout=5)
    except TimeoutError:
        return None
