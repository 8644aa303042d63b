"""Celery tasks: thin interfaces that take an id and call the feature package that does the work.

Nothing below imports this module: the code that enqueues a task names it (``run_job`` under
:data:`streams_app.jobs.runner.RUN_JOB_TASK`, ``alert_notify`` under
:data:`streams_app.alerts.webhooks.ALERT_NOTIFY_TASK`), and ``StreamsAppConfig.ready`` imports this
module so that those names resolve to these tasks in every Django process. Enqueue a job with
:func:`streams_app.jobs.runner.job_enqueue` (``transaction.on_commit``), never by calling
``run_job.delay`` inside a transaction: the worker must find the committed row.

Read-only mode (``BUSCONSOLE_READ_ONLY=1``) is enforced where the work runs, not only where it was
asked for: :func:`run_job` and :func:`resume_stalled_jobs` go through the runner, which refuses every
job kind that writes a monitored Redis in a read-only process. The other beat tasks only read the
monitored Redis (snapshots, the mirror, the pipeline's export) or write the console's own tables.
"""

from __future__ import annotations

import logging

from celery import shared_task
from celery.exceptions import SoftTimeLimitExceeded
from django.conf import settings
from django.utils import timezone

from busconsole.locks import interval_lock_ms, lock_held, renewed_lock
from streams_app.alerts import webhooks
from streams_app.jobs import runner as jobs
from streams_app.lake import run as pipeline_run
from streams_app.metrics import mirror_schedule, pruning, rollups, snapshots
from streams_app.redis_ops.errors import Unreachable

log = logging.getLogger(__name__)


@shared_task(
    name=jobs.RUN_JOB_TASK,
    bind=True,
    acks_late=True,
    ignore_result=True,
    max_retries=60,
    time_limit=settings.CELERY_TASK_TIME_LIMIT,
    soft_time_limit=settings.CELERY_TASK_SOFT_TIME_LIMIT,
)
def run_job(self, job_id: int) -> None:
    """Run a background job to its end (or until the time limit, when it continues in a new task).

    The job may be running elsewhere (a redelivered message, a resume): :func:`jobs.job_run` then
    raises JobBusy and this task tries again once the other holder's lock could have expired, by
    which time the job is usually finished and the retry does nothing.
    """
    try:
        jobs.job_run(job_id)
    except jobs.JobBusy as exc:
        raise self.retry(exc=exc, countdown=max(1, settings.BUSCONSOLE_JOB_LOCK_S // 2)) from exc
    except Unreachable as exc:
        raise self.retry(exc=exc, countdown=min(300, 5 * 2 ** min(self.request.retries, 6))) from exc
    except SoftTimeLimitExceeded:
        log.info("job %s reached the task time limit: continuing in a new task", job_id)
        # Sent as every job is (the same queue, its kind's priority): a bare apply_async would send
        # an export's continuation at the top priority, ahead of the fixes its priority lets go first.
        jobs.job_send(job_id=job_id, countdown=1)


# soft = hard: without its own soft limit a task takes the app's (CELERY_TASK_SOFT_TIME_LIMIT, 3,570 s),
# and Celery 5.7 refuses to send a task whose soft limit is above its hard one. Equal, the hard one
# ends the run as it did before.
@shared_task(ignore_result=True, soft_time_limit=50, time_limit=50)
def resume_stalled_jobs(stalled_after_s: float | None = None) -> list[int]:
    """Beat task: enqueue again the jobs whose worker died (see :func:`jobs.jobs_resume_stalled`).

    A lock shorter than the beat interval keeps two overlapping runs (a slow one, a second beat by
    mistake) from enqueueing the same jobs twice. In a read-only process the stalled jobs that would
    write a monitored Redis are refused instead of enqueued.
    """
    ttl_ms = interval_lock_ms(settings.BUSCONSOLE_JOB_RESUME_EVERY_S)
    with lock_held(name="resume-stalled-jobs", ttl_ms=ttl_ms) as acquired:
        if not acquired:
            return []
        return jobs.jobs_resume_stalled(stalled_after_s=stalled_after_s)


@shared_task(
    name=webhooks.ALERT_NOTIFY_TASK, bind=True, acks_late=True, ignore_result=True, max_retries=None,
    soft_time_limit=60, time_limit=60,  # soft = hard: see resume_stalled_jobs
)
def alert_notify(self, alert_id: int) -> None:
    """POST an alert's open/resolved transition to its rule's webhook, retrying with backoff.

    :func:`streams_app.alerts.webhooks.alert_deliver` is idempotent (it records the state it delivered), so a
    redelivered or duplicate task sends nothing twice. After ``WEBHOOK_MAX_ATTEMPTS`` tries in all
    the alert keeps its last ``notify_error`` for the alerts page and the task gives up.
    """
    if webhooks.alert_deliver(alert_id=alert_id) != "failed":
        return
    if self.request.retries + 1 >= webhooks.WEBHOOK_MAX_ATTEMPTS:
        log.warning("alert %s: webhook still failing after %d attempts, giving up", alert_id, self.request.retries + 1)
        return
    raise self.retry(countdown=webhooks.notify_backoff(self.request.retries))


# ---------------------------------------------------------------------------------------- metrics
# Beat tasks (busconsole/settings.py CELERY_BEAT_SCHEDULE): each holds a renewable lock for its whole run
# (busconsole.locks.renewed_lock, taken inside the service), so an overlapping run (a slow one, a second
# beat) returns at once and a killed run's lock expires by itself.

#: Seconds of each samples_retention run given to the rollups and to the deletions (well within its
#: soft time limit): what a budget leaves is done by the next run, a minute later.
RETENTION_BUDGET_S = {"rollups": 90.0, "prune": 90.0}


@shared_task(ignore_result=True, soft_time_limit=120, time_limit=150)
def snapshot_tick() -> int | None:
    """Record the snapshot of the current tick (and catch up with a tick that began meanwhile, sending
    itself again when the catch-up stopped behind); returns the last SnapshotRun id (None: another run
    held the lock)."""
    run = snapshots.snapshot_take_guarded(now=timezone.now(), catch_up=True)
    if snapshots.snapshot_resume_due(run, now=timezone.now()):
        # The tick under way had its beat message while the lock was held, and it was dropped: send
        # one of our own, which takes that tick in a task of its own (and catches up from there).
        snapshot_tick.apply_async(expires=float(settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S))
    return run.pk if run else None


@shared_task(ignore_result=True, soft_time_limit=240, time_limit=300)
def mirror_sync_all() -> dict[str, int | str] | None:
    """Sync the mirror of every connection (incremental, or full when due); returns the streams written
    (or the error) per connection."""
    results = mirror_schedule.mirror_sync_guarded()
    if results is None:
        return None
    return {conn: r if isinstance(r, str) else r.streams_written for conn, r in results.items()}


@shared_task(ignore_result=True, soft_time_limit=240, time_limit=300)
def samples_retention() -> dict[str, object] | None:
    """Roll samples up (1 m, 1 h) and apply retention, each within its budget (None: a run is in progress)."""
    with renewed_lock("lock:samples-retention", timeout_s=60.0) as held:
        if not held.acquired:
            return None
        now = timezone.now()
        return {
            "rollups": rollups.samples_downsample(now=now, budget_s=RETENTION_BUDGET_S["rollups"]),
            "deleted": pruning.samples_prune(now=now, budget_s=RETENTION_BUDGET_S["prune"]),
        }


# ---------------------------------------------------------------------------------- data pipeline


@shared_task(ignore_result=True, soft_time_limit=60, time_limit=60)  # soft = hard: see resume_stalled_jobs
def run_pipeline_scheduled() -> int | None:
    """Beat task: start a pipeline job (export, Spark rollups, load) unless one is queued or running.

    The run itself is a ``pipeline`` job (:mod:`streams_app.lake.run`) executed by :func:`run_job`,
    so it shows its progress on the jobs page like a manual run; the id of the job, or None.
    """
    return pipeline_run.pipeline_scheduled_start()
