"""A read-only process never changes a monitored Redis, whoever asks: not a job queued before it started,
not the beat's resume of a stalled job.

The web process refuses new actions in read-only mode; these tests cover what reaches a worker or the
beat by another road. The job is queued while the console may still write, then a real Celery worker
started with ``BUSCONSOLE_READ_ONLY=1`` takes it. The DLQ is compared entry by entry (every ID and
every field, read with XRANGE) before and after, and the audit trail is read from its table.
"""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta

import pytest
import redis
from django.utils import timezone

from streams_app import services, tasks
from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.lake import run as pipeline_run
from tests.console.celery_procs import Worker, celery_env
from tests.console.helpers import CONN
from tests.console.jobs.helpers import dead_letters, finished, job_state
from tests.polling import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

DLQ = "orders:dlq"


def dlq_bytes(r: redis.Redis) -> list:
    """Every entry of the DLQ with all its fields, as Redis returns them (small DLQs only)."""
    return r.xrange(DLQ, "-", "+")


@pytest.fixture
def read_only_worker() -> Iterator[list[Worker]]:
    """Start read-only workers on demand (``read_only_worker.append(...)`` is done by ``start``)."""
    started: list[Worker] = []
    yield started
    for worker in started:
        worker.stop()


@pytest.mark.slow
def test_a_job_queued_before_a_read_only_worker_started_is_refused(
    r: redis.Redis, operator, read_only_worker: list[Worker]
) -> None:
    ids = dead_letters(r, 40, key=DLQ)
    before = dlq_bytes(r)
    # Queued while the console could still write; no worker is running yet.
    job = services.dlq_requeue_all(user=operator, conn=CONN, key=DLQ.encode(), up_to=ids[-1], batch=7)
    assert job_state(job.pk).state == "queued"

    read_only_worker.append(Worker("read-only", celery_env(BUSCONSOLE_READ_ONLY="1")))
    refused = wait_for(lambda: finished(job.pk), timeout=60, what="the read-only worker to end the job", step=0.05)

    assert refused.state == "failed"
    assert "read-only" in refused.error
    assert refused.done == 0
    assert dlq_bytes(r) == before  # every entry, ID and field as it was
    assert r.exists("orders") == 0  # nothing was requeued anywhere
    rows = AuditEvent.objects.filter(action="dlq.requeue_all.finished")
    assert rows.count() == 1
    row = rows.get()
    assert (row.outcome, row.affected) == ("denied", 0)
    assert "read-only" in row.error and row.parameters["job"] == job.pk


def test_resume_of_a_stalled_job_in_a_read_only_process_is_refused(r: redis.Redis, operator, settings) -> None:
    ids = dead_letters(r, 25, key=DLQ)
    before = dlq_bytes(r)
    job = services.dlq_requeue_all(user=operator, conn=CONN, key=DLQ.encode(), up_to=ids[-1], batch=5)
    # Its worker died mid-job: still "running", silent for long.
    long_ago = timezone.now() - timedelta(hours=1)
    Job.objects.filter(pk=job.pk).update(state=Job.State.RUNNING, started_at=long_ago, updated_at=long_ago)

    settings.BUSCONSOLE_READ_ONLY = True
    resumed = tasks.resume_stalled_jobs(stalled_after_s=0)  # the beat task, in this (read-only) process

    assert job.pk not in resumed
    refused = job_state(job.pk)
    assert refused.state == "failed" and "read-only" in refused.error
    assert dlq_bytes(r) == before
    rows = AuditEvent.objects.filter(action="dlq.requeue_all.finished")
    assert [(row.outcome, row.parameters["job"]) for row in rows] == [("denied", job.pk)]
    # A second beat finds nothing left to refuse: one row per job, not one per beat.
    assert tasks.resume_stalled_jobs(stalled_after_s=0) == []
    assert rows.count() == 1


@pytest.mark.slow
def test_the_beat_task_in_a_read_only_worker_refuses_a_stalled_job(
    r: redis.Redis, operator, read_only_worker: list[Worker]
) -> None:
    """The beat's resume task, run by a read-only worker process: the stalled job is refused, not enqueued."""
    read_only_worker.append(Worker("read-only-beat", celery_env(BUSCONSOLE_READ_ONLY="1")))
    ids = dead_letters(r, 12, key=DLQ)
    before = dlq_bytes(r)
    long_ago = timezone.now() - timedelta(hours=1)
    # A job whose writable worker died long ago (created directly: no task of its own is queued).
    job = Job.objects.create(
        kind=jobs.KIND_REQUEUE_ALL, connection=CONN, created_by=operator, state=Job.State.RUNNING,
        parameters={"key": DLQ.encode().hex(), "key_text": DLQ, "up_to": ids[-1]}, started_at=long_ago,
    )
    Job.objects.filter(pk=job.pk).update(updated_at=long_ago)

    tasks.resume_stalled_jobs.delay(0)
    refused = wait_for(lambda: finished(job.pk), timeout=60, what="the read-only worker's beat task", step=0.05)

    assert refused.state == "failed" and "read-only" in refused.error
    assert dlq_bytes(r) == before and r.exists("orders") == 0
    row = wait_for(lambda: AuditEvent.objects.filter(action="dlq.requeue_all.finished").first(), what="the audit row")
    assert (row.outcome, row.parameters["job"]) == ("denied", job.pk)


def test_a_read_only_process_refuses_to_run_a_replay_it_is_handed(r: redis.Redis, operator, settings) -> None:
    """The run-time check is in the runner itself, for every kind that writes a monitored Redis."""
    for i in range(10):
        r.xadd("events", {"n": str(i)})
    before = r.xrange("events", "-", "+")
    job = services.stream_replay(user=operator, conn=CONN, key=b"events", start="-", end="+", target=b"copy")
    settings.BUSCONSOLE_READ_ONLY = True
    ran = jobs.job_run(job.pk)
    assert ran is not None and ran.state == "failed" and "read-only" in ran.error
    assert r.exists("copy") == 0 and r.xrange("events", "-", "+") == before
    assert AuditEvent.objects.filter(action="replay.finished", outcome="denied").count() == 1


def test_a_read_only_process_still_runs_the_pipeline(r: redis.Redis, settings, monkeypatch) -> None:
    """The pipeline only reads the monitored Redis (its export) and writes the lake and the console's own
    tables, which read-only mode does not protect: a read-only console keeps its reports fresh. (The
    body is stubbed here: Spark has its own tests; what is checked is that the runner lets the kind run.)"""
    job = pipeline_run.pipeline_job_start(user=None)
    ran: list[int] = []
    monkeypatch.setitem(jobs._bodies, jobs.KIND_PIPELINE, lambda job, progress: ran.append(job.pk))
    settings.BUSCONSOLE_READ_ONLY = True
    assert jobs.job_run(job.pk).state == "done" and ran == [job.pk]
