"""Background jobs run by real Celery worker processes against the real Redis and the test database.

The crash tests SIGKILL a worker in the middle of a job, resume it the way production does (the beat
task re-enqueues jobs that stopped making progress) on a fresh worker, and check the end state in
Redis: every entry handled exactly once, none lost, against the ids the test wrote, and the job's count equal to
what Redis moved. A finished job run
again, as a redelivered task or a direct call, must change nothing.
"""

from __future__ import annotations

import pytest
import redis

from streams_app import services, tasks
from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner as jobs
from tests.console.celery_procs import Workers
from tests.console.helpers import CONN
from tests.console.jobs.helpers import dead_letters, field_values, finished, job_state
from tests.polling import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.mark.slow
def test_bulk_requeue_of_20k_survives_a_killed_worker(workers: Workers, r: redis.Redis, operator) -> None:
    workers.stop_shared()  # the victim must be the only worker when the job starts
    ids = dead_letters(r, 20_000)
    # One entry per batch makes the job take long enough (seconds) to be killed in the middle of it.
    job = services.dlq_requeue_all(user=operator, conn=CONN, key=b"orders:dlq", up_to=ids[-1], batch=1)
    victim = workers.start("victim")
    # Killed while Redis is ahead of the job's saved count: the batches moved since its last save.
    wait_for(lambda: 0 < job_state(job.pk).done < 20_000 - r.xlen("orders:dlq"), timeout=60,
             what="the job to make progress", step=0.005)
    victim.kill()

    left = r.xlen("orders:dlq")
    killed = job_state(job.pk)
    assert killed.state == "running"
    assert 0 < left < 20_000, "the worker must die in the middle of the job"
    assert r.xlen("orders") == 20_000 - left  # nothing lost and nothing doubled so far either

    assert job.pk in tasks.resume_stalled_jobs(stalled_after_s=0)  # what the beat does after a while
    workers.shared()
    done = wait_for(lambda: finished(job.pk), timeout=120, what="the resumed job to finish", step=0.1)

    assert done.state == "done", done.error
    assert r.xlen("orders:dlq") == 0
    markers = field_values(r, "orders", b"_requeued_from")
    assert len(markers) == 20_000
    assert sorted(m.decode() for m in markers) == sorted(ids)  # each dead letter exactly once
    # Exact, although the kill lost the counts of the batches moved since the last saved progress:
    # the resumed job reconciles them from the DLQ.
    assert (done.done, done.total) == (r.xlen("orders"), 20_000)
    row = AuditEvent.objects.get(action="dlq.requeue_all.finished", outcome="ok")
    assert row.affected == 20_000


@pytest.mark.slow
def test_replay_job_killed_midway_copies_each_entry_exactly_once(workers: Workers, r: redis.Redis, operator) -> None:
    workers.stop_shared()
    pipe = r.pipeline(transaction=False)
    for i in range(6000):
        pipe.xadd("events", {"type": "keep" if i % 3 else "skip", "n": str(i)})
    ids = [x.decode() for x in pipe.execute()]
    expected = [ids[i] for i in range(6000) if i % 3]
    job = services.stream_replay(user=operator, conn=CONN, key=b"events", start="-", end="+", target=b"events-copy",
                                 match={b"type": b"keep"}, batch=1)
    victim = workers.start("victim-replay")
    wait_for(lambda: 0 < job_state(job.pk).done < r.xlen("events-copy"), timeout=60,
             what="the replay to make progress", step=0.005)
    victim.kill()
    assert 0 < r.xlen("events-copy") < len(expected), "the worker must die in the middle of the replay"

    assert job.pk in tasks.resume_stalled_jobs(stalled_after_s=0)
    workers.shared()
    done = wait_for(lambda: finished(job.pk), timeout=120, what="the resumed replay to finish", step=0.1)
    assert done.state == "done", done.error
    assert done.total == len(expected)
    copies = field_values(r, "events-copy", b"_replayed_from")
    assert [c.decode() for c in copies] == expected  # in order, none twice, none missing
    assert r.xlen("events") == 6000
    # Exact, from the count the replay script keeps in Redis next to its cursor.
    assert done.done == r.xlen("events-copy")
    assert AuditEvent.objects.get(action="replay.finished", outcome="ok").affected == len(expected)


@pytest.mark.slow
def test_replay_counts_through_the_job_and_a_finished_job_is_not_run_again(workers: Workers, r: redis.Redis, operator) -> None:
    workers.shared()
    pipe = r.pipeline(transaction=False)
    for i in range(1000):
        pipe.xadd("clicks", {"page": f"/p/{i % 4}", "n": str(i)})
    ids = [x.decode() for x in pipe.execute()]
    start, end = ids[100], ids[899]
    expected = sum(1 for i in range(100, 900) if i % 4 == 2)
    preview = services.stream_replay_count(user=operator, conn=CONN, key=b"clicks", start=start, end=end,
                                           match={b"page": b"/p/2"})
    assert preview.count == expected
    job = services.stream_replay(user=operator, conn=CONN, key=b"clicks", start=start, end=end,
                                 match={b"page": b"/p/2"}, batch=64)
    done = wait_for(lambda: finished(job.pk), timeout=60, what="the replay job", step=0.05)
    assert (done.state, done.done, done.total) == ("done", expected, expected)
    assert r.xlen("clicks") == 1000 + expected  # copies into the same stream, none of them copied again
    copies = [fields for _, fields in r.xrange("clicks", "(" + ids[-1], "+")]
    assert [c[b"_replayed_from"].decode() for c in copies] == [ids[i] for i in range(100, 900) if i % 4 == 2]

    # The same job again, as a redelivered task and as a direct call: nothing happens.
    stamp = job_state(job.pk).updated_at
    tasks.run_job.delay(job.pk)
    sentinel = services.stream_replay(user=operator, conn=CONN, key=b"clicks", start=ids[0], end=ids[0],
                                      target=b"sentinel")
    wait_for(lambda: finished(sentinel.pk), timeout=60, what="the job queued after the re-run")  # FIFO: after it
    assert jobs.job_run(job.pk).state == "done"
    assert r.xlen("clicks") == 1000 + expected
    assert job_state(job.pk).updated_at == stamp
    assert AuditEvent.objects.filter(action="replay.finished", parameters__job=job.pk).count() == 1
