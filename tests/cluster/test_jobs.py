"""The worker-kill tests of ``tests/console/jobs/test_workers.py``, run on a real Redis Cluster across slots.

A real Celery worker, configured with the cluster as its ``default`` connection, is SIGKILLed in the
middle of a bulk requeue whose DLQ (``orders:dlq``) and stream (``orders``) hash to different slots
on different nodes, and in the middle of a replay between two such streams. The job is then resumed the
way production does (the beat's stalled-job task) on a fresh worker, and the end state is read back with
``rc``: every entry handled exactly once against the IDs the test wrote, and the job's count equal to
what Redis holds.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
from redis.cluster import RedisCluster

from streams_app import services, tasks
from streams_app.audit.models import AuditEvent
from tests.console.celery_procs import Workers, celery_env
from tests.console.jobs.helpers import finished, job_state
from tests.console.services.helpers import eventbus_dead_letter
from tests.polling import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture(scope="module")
def cluster_workers(django_db_setup, django_db_blocker, redis_cluster_servers) -> Iterator[Workers]:
    """Workers whose ``default`` connection is the cluster (and whose job lock expires in 2 s)."""
    with django_db_blocker.unblock():
        env = celery_env(BUSCONSOLE_JOB_LOCK_S="2", BUS_REDIS_URLS=f"default={redis_cluster_servers.url()}")
    pool = Workers(env)
    yield pool
    pool.stop_all()


def field_values(rc: RedisCluster, key: str, field: bytes) -> list[bytes]:
    out, start = [], "-"
    while True:
        page = rc.xrange(key, start, "+", count=2000)
        out += [fields.get(field) for _, fields in page]
        if len(page) < 2000:
            return out
        start = "(" + page[-1][0].decode()


def test_bulk_requeue_across_slots_survives_a_killed_worker(cluster_workers, on_cluster, rc, operator) -> None:
    assert rc.get_node_from_key("orders:dlq").name != rc.get_node_from_key("orders").name
    cluster_workers.stop_shared()  # the victim must be the only worker when the job starts
    n = 3000
    pipe = rc.pipeline()
    for i in range(n):
        pipe.xadd("orders:dlq", eventbus_dead_letter(i, f"1-{i}"))
    ids = [x.decode() for x in pipe.execute()]
    # One entry per batch makes the job take long enough (seconds) to be killed in the middle of it.
    job = services.dlq_requeue_all(user=operator, conn=on_cluster, key=b"orders:dlq", up_to=ids[-1], batch=1)
    victim = cluster_workers.start("victim")
    wait_for(lambda: 0 < job_state(job.pk).done < n - rc.xlen("orders:dlq"), timeout=60,
             what="the job to make progress", step=0.005)
    victim.kill()

    left = rc.xlen("orders:dlq")
    assert job_state(job.pk).state == "running"
    assert 0 < left < n, "the worker must die in the middle of the job"
    # a copy may exist for the one entry being moved at the kill, never more
    assert n - left <= rc.xlen("orders") <= n - left + 1

    assert job.pk in tasks.resume_stalled_jobs(stalled_after_s=0)
    cluster_workers.shared()
    done = wait_for(lambda: finished(job.pk), timeout=120, what="the resumed job to finish", step=0.1)

    assert done.state == "done", done.error
    assert rc.xlen("orders:dlq") == 0
    markers = field_values(rc, "orders", b"_requeued_from")
    assert sorted(m.decode() for m in markers) == sorted(ids)  # each dead letter exactly once
    assert (done.done, done.total) == (n, n)
    assert AuditEvent.objects.get(action="dlq.requeue_all.finished", outcome="ok").affected == n


def test_replay_across_slots_killed_midway_copies_each_entry_exactly_once(
    cluster_workers, on_cluster, rc, operator
) -> None:
    assert rc.get_node_from_key("events").name != rc.get_node_from_key("clicks-copy").name
    pipe = rc.pipeline()
    for i in range(4500):
        pipe.xadd("events", {"type": "keep" if i % 3 else "skip", "n": str(i)})
    ids = [x.decode() for x in pipe.execute()]
    expected = [ids[i] for i in range(4500) if i % 3]
    cluster_workers.stop_shared()
    job = services.stream_replay(user=operator, conn=on_cluster, key=b"events", start="-", end="+",
                                 target=b"clicks-copy", match={b"type": b"keep"}, batch=1)
    victim = cluster_workers.start("victim-replay")
    wait_for(lambda: 0 < job_state(job.pk).done < rc.xlen("clicks-copy"), timeout=60,
             what="the replay to make progress", step=0.005)
    victim.kill()
    assert 0 < rc.xlen("clicks-copy") < len(expected), "the worker must die in the middle of the replay"

    assert job.pk in tasks.resume_stalled_jobs(stalled_after_s=0)
    cluster_workers.shared()
    done = wait_for(lambda: finished(job.pk), timeout=120, what="the resumed replay to finish", step=0.1)
    assert done.state == "done", done.error
    copies = field_values(rc, "clicks-copy", b"_replayed_from")
    assert [c.decode() for c in copies] == expected  # in order, none twice, none missing
    assert (done.done, done.total) == (len(expected), len(expected))
    assert AuditEvent.objects.get(action="replay.finished", outcome="ok").affected == len(expected)
