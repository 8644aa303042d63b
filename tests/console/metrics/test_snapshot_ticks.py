"""Snapshot ticks at scale: the renewable lock (outlives the run, never two at once, a dead holder's lock
expires), the catch-up of a tick that began during a run, and missed ticks made visible (the skip
records, the overview's notice, ``/metrics``).

Expected counts of missed ticks are worked out from the ticks the test chose; the lock's state is read
from the console's Redis (redis-py's own lock and the key's presence), not from the code under test.
"""

from __future__ import annotations

import time
from datetime import timedelta

import pytest
import redis
from django.test import Client
from django.utils import timezone
from prometheus_client.parser import text_string_to_metric_families

from busconsole.celery import app as celery_app
from busconsole.locks import console_redis, renewable_lock, renewed_lock
from streams_app import tasks
from streams_app.metrics import snapshots
from streams_app.metrics.health import snapshot_health
from streams_app.metrics.models import GroupSample, SnapshotRun, SnapshotSkip, StreamSample
from tests.console.metrics.helpers import T0
from tests.polling import wait_for


def _other_can_take(name: str) -> bool:
    lock = console_redis().lock(f"busconsole:{name}", timeout=5, blocking=False)
    if lock.acquire(blocking=False):
        lock.release()
        return True
    return False


@pytest.mark.slow
def test_a_held_lock_outlives_its_timeout_and_is_released_after(db) -> None:
    with renewed_lock("lock:test-renewed", timeout_s=1.5) as held:
        assert held.acquired
        with renewed_lock("lock:test-renewed", timeout_s=1.5) as second:
            assert not second.acquired  # never two at once
        started = time.monotonic()
        wait_for(lambda: time.monotonic() - started > 4.5, what="three lock timeouts to pass", timeout=10, step=0.1)
        assert console_redis().exists("busconsole:lock:test-renewed")  # renewed by the heartbeat
        assert not _other_can_take("lock:test-renewed")
        assert not held.lost.is_set()
    assert not console_redis().exists("busconsole:lock:test-renewed")


def test_the_lock_of_a_killed_run_expires_by_itself(db) -> None:
    dead = renewable_lock("lock:test-dead", timeout_s=0.5)  # taken, then never renewed nor released
    assert dead.acquire(blocking=False)
    with renewed_lock("lock:test-dead", timeout_s=0.5) as held:
        assert not held.acquired
    wait_for(lambda: _other_can_take("lock:test-dead"), what="the dead holder's lock to expire", timeout=5)


def test_the_guarded_snapshot_waits_for_nothing_while_another_run_holds_the_lock(r: redis.Redis, db) -> None:
    r.xadd("s", {"x": "1"})
    with renewed_lock("lock:snapshot", timeout_s=5) as other:
        assert other.acquired
        assert snapshots.snapshot_take_guarded(now=T0) is None
    assert SnapshotRun.objects.count() == 0
    assert snapshots.snapshot_take_guarded(now=T0).tick == T0


def test_a_run_that_ends_after_the_next_tick_began_takes_that_tick_too(r: redis.Redis, db, settings) -> None:
    settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S = 10
    r.xadd("s", {"x": "1"})
    # the clock says the run of T0 ended 12 s after T0: the T0+10 tick began meanwhile
    later = iter([T0 + timedelta(seconds=12), T0 + timedelta(seconds=14)])
    run = snapshots.snapshot_take_guarded(now=T0 + timedelta(seconds=1), catch_up=True, clock=lambda: next(later))
    assert run.tick == T0 + timedelta(seconds=10)
    assert sorted(SnapshotRun.objects.values_list("tick", flat=True)) == [T0, T0 + timedelta(seconds=10)]
    assert StreamSample.objects.filter(at=T0 + timedelta(seconds=10)).count() == 1
    assert not SnapshotSkip.objects.exists()


def test_a_gap_between_two_runs_is_recorded_once_with_its_length(r: redis.Redis, db, settings) -> None:
    settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S = 10
    r.xadd("s", {"x": "1"})
    for seconds in (0, 10, 50, 60, 90):  # missed: 20, 30, 40 and 70, 80
        snapshots.snapshot_take(tick=T0 + timedelta(seconds=seconds))
    snapshots.snapshot_take(tick=T0 + timedelta(seconds=90))  # the same tick again: no new gap
    gaps = sorted(SnapshotSkip.objects.values_list("tick", "ticks"))
    assert gaps == [(T0 + timedelta(seconds=20), 3), (T0 + timedelta(seconds=70), 2)]

    health = snapshot_health(now=T0 + timedelta(seconds=95))
    assert (health.skipped_total, health.skipped_recent) == (5, 5)
    assert health.last_skip == T0 + timedelta(seconds=80)
    assert health.lag_s == 5.0 and not health.behind
    # an hour later, only the part of the gaps within the last hour counts as recent
    later = snapshot_health(now=T0 + timedelta(hours=1, seconds=75))
    assert (later.skipped_total, later.skipped_recent) == (5, 1) and later.behind


def _families(text: str) -> dict[str, dict[tuple, float]]:
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_missed_ticks_show_on_the_overview_and_in_metrics(
    r: redis.Redis, db, settings, viewer, viewer_client: Client, client: Client, api_token
) -> None:
    settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S = 10
    r.xadd("s", {"x": "1"})
    page = viewer_client.get("/").content.decode()
    assert 'id="snapshot-notice"' not in page  # no snapshot at all yet: nothing to say about gaps
    from django.utils import timezone

    now = snapshots.snapshot_tick_for(now=timezone.now(), interval_s=10)
    snapshots.snapshot_take(tick=now - timedelta(seconds=40))
    snapshots.snapshot_take(tick=now)  # three ticks missed in between

    page = viewer_client.get("/").content.decode()
    assert 'id="snapshot-notice"' in page and "3 metric snapshot ticks of the last hour got no run" in page
    metrics = _families(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {api_token(viewer)}").content.decode())
    assert metrics["busconsole_snapshot_skipped_total"][()] == 3
    assert metrics["busconsole_snapshot_interval_seconds"][()] == 10
    assert 0 <= metrics["busconsole_snapshot_lag_seconds"][()] < 3600


def test_the_beat_task_sends_itself_again_when_its_catch_up_stopped_behind(
    r: redis.Redis, db, settings, monkeypatch
) -> None:
    """A run of T0 that ends 11 s after T0, with no catch-up left: the T0+10 tick's beat message was
    dropped while the lock was held, so the task sends itself again (run here by Celery's eager mode)
    and that tick is recorded, not skipped; the second task, caught up, sends nothing more."""
    settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S = 10
    monkeypatch.setattr(snapshots, "CATCH_UP_MAX", 0)
    r.xadd("s", {"x": "1"})
    clock = [T0 + timedelta(seconds=1)]
    monkeypatch.setattr(timezone, "now", lambda: clock[0])
    take = snapshots.snapshot_take

    def take_then_time_passes(*, tick):
        run = take(tick=tick)
        if tick == T0:
            clock[0] = T0 + timedelta(seconds=11)  # the run of T0 ended in the next tick
        return run

    monkeypatch.setattr(snapshots, "snapshot_take", take_then_time_passes)
    celery_app.conf.task_always_eager = True
    try:
        tasks.snapshot_tick.delay()
    finally:
        celery_app.conf.task_always_eager = False
    assert sorted(SnapshotRun.objects.values_list("tick", flat=True)) == [T0, T0 + timedelta(seconds=10)]
    assert not SnapshotSkip.objects.exists()


def test_rollups_that_fall_behind_show_on_the_overview_and_in_metrics(
    db, settings, viewer, viewer_client: Client, client: Client, api_token
) -> None:
    """The backlog runs from the newest tick back to where the 1-minute rollups of the slowest sample table
    end (a table never rolled up: from its oldest raw sample), worked out here from the rows written."""
    settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S = 10
    now = snapshots.snapshot_tick_for(now=timezone.now(), interval_s=10)
    SnapshotRun.objects.create(tick=now, started_at=now, finished_at=now)
    minute, tick = timedelta(minutes=1), timedelta(seconds=10)
    values = {StreamSample: {"stream_id": 1, "length": 0}, GroupSample: {"group_id": 1, "pending": 0}}

    def write(model, resolution: str, first, last, step) -> None:
        count = int((last - first) / step) + 1
        model.objects.bulk_create(
            [model(at=first + k * step, resolution=resolution, **values[model]) for k in range(count)]
        )

    def rolled_up_to(model, ago: timedelta):
        """1-minute rows for the ten minutes before ``now - ago`` (minute-aligned); where they end."""
        end = (now - ago).replace(second=0)
        write(model, "1m", end - 10 * minute, end - minute, minute)
        return end

    write(StreamSample, "raw", now - 40 * minute, now, tick)
    write(GroupSample, "raw", now - 50 * minute, now, tick)  # never rolled up: counts from its oldest sample
    stream_end = rolled_up_to(StreamSample, 30 * minute)
    health = snapshot_health()
    assert health.rollups_until == now - 50 * minute < stream_end
    assert health.rollup_backlog_s == 50 * 60 and health.rollups_behind

    page = viewer_client.get("/").content.decode()
    assert 'id="snapshot-notice"' in page and "The 1-minute rollups end at" in page
    token = api_token(viewer)
    metrics = _families(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").content.decode())
    assert metrics["busconsole_snapshot_rollup_backlog_seconds"][()] == 50 * 60

    # Both tables rolled up to within a few minutes of the newest tick: the steady state, no notice.
    StreamSample.objects.filter(resolution="1m").delete()
    stream_end = rolled_up_to(StreamSample, 3 * minute)
    group_end = rolled_up_to(GroupSample, 5 * minute)
    health = snapshot_health()
    assert health.rollups_until == group_end < stream_end
    assert health.rollup_backlog_s == (now - group_end).total_seconds() and not health.rollups_behind
    assert 'id="snapshot-notice"' not in viewer_client.get("/").content.decode()
