"""A cancelled pipeline run stops at the next boundary of its work, as every job does.

A pipeline job looks at its state through the runner's :class:`~streams_app.jobs.runner.Progress` at each
boundary of its work: after every chunk (here: every stream) of the export, after every Spark job, before
the load. It looked only when its throttled progress save was due (every 0.25 s), so a cancel that came
just after a save let the streams exported in the next quarter of a second go on, and a long stream
among them to its end.

A real Celery worker runs the job; the test cancels it right after a progress save (it sees the job's
count of exported entries change) and then asks the database, not a clock: every stream's checkpoint
moves when its chunk is written, so the checkpoints written after the cancel's own timestamp are the
work the run did after the cancel. At most one (the stream in hand when the cancel came) may be among
them. The run never reaches Spark, so no JVM is started.
"""

from __future__ import annotations

import json
from collections.abc import Iterator

import pytest
import redis

from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.lake import run as pipeline_run
from streams_app.lake.models import ExportCheckpoint, PipelineRun
from tests.console.celery_procs import Worker, celery_env
from tests.polling import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

STREAMS = 150


@pytest.fixture(scope="module")
def worker(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Worker]:
    lake = tmp_path_factory.mktemp("lake")
    with django_db_blocker.unblock():
        env = celery_env(BUSCONSOLE_LAKE=str(lake), BUSCONSOLE_EXPORT_WORKERS="1")
    process = Worker("pipeline-cancel", env)
    yield process
    process.stop()


def _streams(r: redis.Redis) -> None:
    pipe = r.pipeline(transaction=False)
    for s in range(STREAMS):
        for n in range(40):
            pipe.xadd(f"orders-{s:03d}", {"type": "order.created", "data": json.dumps({"order_id": n, "s": s})})
    pipe.execute()


def _entries_exported(job_id: int) -> int | None:
    progress = Job.objects.get(pk=job_id).progress or {}
    return progress.get("entries") if progress.get("phase") == "export" else None


@pytest.mark.slow
def test_a_cancel_during_the_export_stops_the_run_at_its_next_stream(worker: Worker, r: redis.Redis) -> None:
    _streams(r)
    job = pipeline_run.pipeline_job_start(user=None)
    first = wait_for(lambda: worker.alive() and _entries_exported(job.pk), timeout=120,
                     what="the export's first progress save", step=0.005)
    # Right after the next save: the throttled saver would not look at the job again for 0.25 s.
    wait_for(lambda: (_entries_exported(job.pk) or first) != first, timeout=60, what="the next save", step=0.002)
    assert jobs.job_cancel(job_id=job.pk)
    cancelled_at = Job.objects.get(pk=job.pk).finished_at

    run = wait_for(lambda: PipelineRun.objects.filter(job_id=job.pk, state=PipelineRun.State.FAILED).first(),
                   timeout=60, what="the run to stop")
    assert run.error.startswith("JobCancelled")
    assert "jobs" not in run.stats and "loaded" not in run.stats  # Spark and the load never ran

    written = ExportCheckpoint.objects.filter(kind=ExportCheckpoint.Kind.STREAM).exclude(last_id="")
    after = sorted(written.filter(updated_at__gt=cancelled_at).values_list("key_text", flat=True))
    assert len(after) <= 1, f"{len(after)} streams exported after the cancel: {after}"
    assert written.count() < STREAMS

    assert Job.objects.get(pk=job.pk).state == Job.State.CANCELLED
    # The runner writes the job's last audit row once the body has raised (after the run's record).
    row = wait_for(lambda: AuditEvent.objects.filter(action="pipeline.finished", parameters__job=job.pk).first(),
                   timeout=30, what="the job's finishing audit row")
    assert row.parameters["state"] == "cancelled"
