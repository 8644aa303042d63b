"""A requeue-all job never calls itself done while dead letters up to its bound are left.

Right after a failover a batch can be answered by a server that is not the primary (a replica still
re-syncing, a restarted old primary): its empty answer ends the batch short, and the job used to take
that for the end of the DLQ. These tests send the job's batches, for as long as each says, to a second
real redis-server holding the same DLQ as an empty stream (the stale server), and the rest to the real
one. The outcome is read from the real server: every dead letter requeued exactly once (its
``_requeued_from`` marker against the IDs the test wrote), or none moved and the job not done.
"""

from __future__ import annotations

import pytest
import redis

from streams_app import services
from streams_app.jobs import kinds
from streams_app.jobs import runner as jobs
from streams_app.redis_ops import actions
from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops.actions import requeue_run
from streams_app.redis_ops.errors import Unreachable
from tests.console.helpers import CONN
from tests.console.jobs.helpers import dead_letters, field_values, job_state

pytestmark = pytest.mark.django_db(transaction=True)

STALE = "stale"


@pytest.fixture
def stale(settings, spare_redis) -> redis.Redis:
    """Connection ``stale``: a second real server whose ``orders:dlq`` exists and is empty."""
    client = redis.Redis.from_url(spare_redis.url(0))
    client.xadd("orders:dlq", {"x": "1"}, id="1-1")
    client.xdel("orders:dlq", "1-1")
    settings.BUS_REDIS_URLS = {**settings.BUS_REDIS_URLS, STALE: spare_redis.url(0)}
    redis_client.reset()
    yield client
    redis_client.reset()


def _stale_for(monkeypatch, calls: int) -> list[str]:
    """The job's first ``calls`` batches go to the stale server; returns the log of where each went."""
    real = actions.requeue_range
    where: list[str] = []

    def routed(conn, key, **kwargs):
        to = STALE if len(where) < calls else conn
        where.append(to)
        return real(to, key, **kwargs)

    monkeypatch.setattr(requeue_run, "requeue_range", routed)  # the job's batches, one by one on one server
    monkeypatch.setattr(kinds, "RECHECK_PAUSE_S", 0.01)
    return where


def test_a_short_batch_from_a_stale_server_does_not_end_the_job(
    no_worker, r: redis.Redis, stale: redis.Redis, operator, monkeypatch
) -> None:
    ids = dead_letters(r, 50)
    job = services.dlq_requeue_all(user=operator, conn=CONN, key=b"orders:dlq", up_to=ids[-1], batch=10)
    where = _stale_for(monkeypatch, calls=1)
    jobs.job_run(job.pk)
    assert where[0] == STALE and len(where) > 1, where
    assert job_state(job.pk).state == "done"
    assert r.xlen("orders:dlq") == 0
    markers = [m.decode() for m in field_values(r, "orders", b"_requeued_from")]
    assert sorted(markers) == sorted(ids)  # each exactly once
    assert job_state(job.pk).done == 50


def test_a_job_whose_batches_keep_reading_nothing_waits_instead_of_finishing(
    no_worker, r: redis.Redis, stale: redis.Redis, operator, monkeypatch
) -> None:
    ids = dead_letters(r, 20)
    job = services.dlq_requeue_all(user=operator, conn=CONN, key=b"orders:dlq", up_to=ids[-1], batch=10)
    where = _stale_for(monkeypatch, calls=1_000)
    with pytest.raises(Unreachable, match="still holds dead letters"):
        jobs.job_run(job.pk)
    assert len(where) == kinds.FINAL_RECHECKS + 1
    state = job_state(job.pk)
    assert state.state != "done" and state.error.startswith("Waiting to retry")
    assert r.xlen("orders:dlq") == 20 and not r.exists("orders")
