"""End to end: real ``celery beat`` and ``celery worker`` processes fill the mirror and the samples on the
test database file at one-second intervals.

The mirrored figures are checked against Redis's own XINFO and XLEN; the ticks must be whole seconds
and each recorded once.
"""

from __future__ import annotations

from pathlib import Path

import pytest
import redis

from streams_app.metrics.models import ConsumerMirror, SnapshotRun, StreamSample
from tests.console.celery_procs import Beat, Worker, celery_env
from tests.console.metrics.helpers import assert_stream_matches_redis, bus, mirror_row
from tests.polling import wait_for


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
def test_beat_and_worker_fill_the_mirror_and_the_samples(r: redis.Redis, tmp_path: Path) -> None:
    bus(r)
    env = celery_env(BUSCONSOLE_SNAPSHOT_INTERVAL_S="1", BUSCONSOLE_MIRROR_INTERVAL_S="1")
    worker = Worker("metrics", env)
    beat = Beat(tmp_path / "celerybeat-schedule", env)
    try:
        wait_for(lambda: worker.alive() and beat.alive() and SnapshotRun.objects.filter(streams=4).count() >= 2,
                 timeout=90, what="two snapshot runs written by the worker", step=0.05)
        wait_for(lambda: ConsumerMirror.objects.exists(), timeout=60, what="the mirror sync (consumers)", step=0.05)
    finally:
        beat.stop()
        worker.stop()
    ticks = list(SnapshotRun.objects.order_by("tick").values_list("tick", flat=True))
    assert len(ticks) == len(set(ticks)) and all(t.microsecond == 0 for t in ticks)
    assert_stream_matches_redis(r, "orders")
    latest = ticks[-1]
    assert StreamSample.objects.get(stream=mirror_row("orders"), at=latest).length == r.xlen("orders")
