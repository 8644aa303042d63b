"""The job runner in this process: progress broadcast to the job's group (and a broken channel layer not
failing the job), a vanished DLQ failing with the reason, cancel and resume, the per-job lock, the beat's
resume lock, tasks enqueued by name, and the registry of job kinds.

End states are checked in Redis (XLEN, the markers each requeued entry carries, against the ids the test
wrote) and in the audit rows; the Celery-worker path is in test_workers.py.
"""

from __future__ import annotations

import asyncio
import threading

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.layers import channel_layers, get_channel_layer

from busconsole.celery import app as celery_app
from streams_app import services, tasks
from streams_app.alerts import webhooks
from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner as jobs
from streams_app.live.groups import job_group
from tests.console.helpers import CONN
from tests.console.jobs.helpers import dead_letters, field_values, job_state
from tests.polling import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_progress_is_broadcast_to_the_job_group(no_worker, r: redis.Redis, operator) -> None:
    """The channel layer gets small ``job.progress`` events on ``job-<id>`` (for live pages)."""
    ids = dead_letters(r, 30)
    job = services.dlq_requeue_all(user=operator, conn=CONN, key=b"orders:dlq", up_to=ids[-1], batch=10)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(job_group(job.pk), channel)
    jobs.job_run(job.pk)  # in this process: the Celery path is in test_workers.py
    events = []
    while True:
        event = async_to_sync(_receive_or_none)(layer, channel)
        if event is None:
            break
        events.append(event)
    assert events and all(e["type"] == "job.progress" and e["id"] == job.pk for e in events)
    assert events[-1]["state"] == "done" and events[-1]["done"] == 30
    assert set(events[-1]) == {"type", "id", "kind", "state", "done", "total", "error"}


async def _receive_or_none(layer, channel: str) -> dict | None:
    try:
        return await asyncio.wait_for(layer.receive(channel), timeout=0.5)
    except TimeoutError:
        return None


def test_a_failing_broadcast_does_not_fail_the_job(no_worker, r: redis.Redis, operator, settings) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]}}}
    channel_layers.backends.clear()
    try:
        ids = dead_letters(r, 12)
        job = services.dlq_requeue_all(user=operator, conn=CONN, key=b"orders:dlq", up_to=ids[-1], batch=5)
        assert jobs.job_run(job.pk).state == "done"
        assert r.xlen("orders:dlq") == 0
    finally:
        channel_layers.backends.clear()


def test_a_job_whose_dlq_vanished_fails_with_the_reason(no_worker, r: redis.Redis, operator) -> None:
    ids = dead_letters(r, 3)
    job = services.dlq_requeue_all(user=operator, conn=CONN, key=b"orders:dlq", up_to=ids[-1])
    r.delete("orders:dlq")
    failed = jobs.job_run(job.pk)
    assert failed.state == "failed"
    assert "No such stream" in failed.error
    assert AuditEvent.objects.filter(action="dlq.requeue_all.finished", outcome="error").count() == 1


def test_cancel_stops_a_running_job_after_its_batch(no_worker, r: redis.Redis, operator, monkeypatch) -> None:
    monkeypatch.setattr(jobs, "SAVE_EVERY_S", 0)  # every batch saves (and so sees the cancel)
    ids = dead_letters(r, 50)
    job = services.dlq_requeue_all(user=operator, conn=CONN, key=b"orders:dlq", up_to=ids[-1], batch=10)
    original = jobs.Progress.save
    calls = []

    def save_then_cancel(self, **kwargs):  # an operator presses Cancel while the first batch runs
        calls.append(kwargs["done"])
        if len(calls) == 2:
            jobs.job_cancel(job_id=self.job.pk)
        return original(self, **kwargs)

    jobs.Progress.save = save_then_cancel
    try:
        cancelled = jobs.job_run(job.pk)
    finally:
        jobs.Progress.save = original
    assert cancelled.state == "cancelled"
    assert r.xlen("orders:dlq") == 40 and cancelled.done == 10
    resumed = jobs.job_resume(job_id=job.pk)
    assert resumed.state == "queued"
    assert jobs.job_run(job.pk).state == "done"
    assert r.xlen("orders:dlq") == 0
    assert sorted(m.decode() for m in field_values(r, "orders", b"_requeued_from")) == sorted(ids)


@pytest.mark.slow
def test_a_job_inside_one_long_batch_keeps_beating(no_worker, r: redis.Redis, operator, settings, monkeypatch) -> None:
    """A batch may take longer than the stalled threshold or the lock's expiry (a big Lua call, a slow
    server): the heartbeat keeps the job's ``updated_at`` fresh and its lock held all the same, so the
    beat never takes a live job for a dead one."""
    settings.BUSCONSOLE_JOB_LOCK_S = 2  # expires within two seconds unless renewed
    ids = dead_letters(r, 3)
    job = services.dlq_requeue_all(user=operator, conn=CONN, key=b"orders:dlq", up_to=ids[-1])
    release = threading.Event()

    def one_long_batch(job, progress) -> None:
        release.wait(60)

    monkeypatch.setitem(jobs._bodies, jobs.KIND_REQUEUE_ALL, one_long_batch)
    runner = threading.Thread(target=jobs.job_run, args=(job.pk,))
    runner.start()
    try:
        began = wait_for(lambda: job_state(job.pk).started_at, what="the job to start")
        # Well past the lock's lifetime, by the job's own clock, the job is fresh and its lock still held.
        wait_for(lambda: (job_state(job.pk).updated_at - began).total_seconds() > 5, timeout=30,
                 what="the heartbeat to touch the job", step=0.1)
        assert not jobs._job_lock(job.pk).acquire(blocking=False)
    finally:
        release.set()
        runner.join(30)
    assert job_state(job.pk).state == "done"


def test_a_cancelled_job_resumed_later_counts_only_what_it_moved(no_worker, r: redis.Redis, operator,
                                                                   monkeypatch) -> None:
    """A cancel stops a job right after a save, so its numbers are whole: entries someone else deletes
    before the resume are not reconciled into the job's count (only a run that died is)."""
    monkeypatch.setattr(jobs, "SAVE_EVERY_S", 0)
    ids = dead_letters(r, 50)
    job = services.dlq_requeue_all(user=operator, conn=CONN, key=b"orders:dlq", up_to=ids[-1], batch=10)
    original = jobs.Progress.save

    def save_then_cancel(self, **kwargs):
        if kwargs["done"] == 10:
            jobs.job_cancel(job_id=self.job.pk)
        return original(self, **kwargs)

    monkeypatch.setattr(jobs.Progress, "save", save_then_cancel)
    assert jobs.job_run(job.pk).state == "cancelled"
    monkeypatch.setattr(jobs.Progress, "save", original)
    assert r.xdel("orders:dlq", *ids[-5:]) == 5  # an admin deletes five of the rest meanwhile
    jobs.job_resume(job_id=job.pk)
    resumed = jobs.job_run(job.pk)
    assert resumed.state == "done" and r.xlen("orders:dlq") == 0
    assert resumed.done == r.xlen("orders") == 45


def test_a_job_held_by_another_worker_is_not_run_twice(no_worker, r: redis.Redis, operator) -> None:
    ids = dead_letters(r, 5)
    job = services.dlq_requeue_all(user=operator, conn=CONN, key=b"orders:dlq", up_to=ids[-1])
    lock = jobs._job_lock(job.pk)
    assert lock.acquire(blocking=False)
    try:
        with pytest.raises(jobs.JobBusy):
            jobs.job_run(job.pk)
        assert r.xlen("orders:dlq") == 5
    finally:
        lock.release()
    assert jobs.job_run(job.pk).state == "done"


def test_a_resume_run_that_outlived_its_lock_leaves_the_next_runs_lock(db, settings, monkeypatch) -> None:
    console = redis.Redis.from_url(settings.REDIS_URL)
    taken_over: list[bytes] = []

    def slow_run(*, stalled_after_s: float | None) -> list[int]:
        # This run outlived its lock: the lock expired and the next beat's run took it meanwhile.
        (key,) = [k for k in console.scan_iter(match="*resume-stalled-jobs*") if console.type(k) == b"string"]
        console.set(key, b"the next run", px=30_000)
        taken_over.append(key)
        return []

    monkeypatch.setattr(jobs, "jobs_resume_stalled", slow_run)
    try:
        assert tasks.resume_stalled_jobs() == []
        assert console.get(taken_over[0]) == b"the next run"  # the late run released nothing of the next one's
        assert tasks.resume_stalled_jobs() == [] and len(taken_over) == 1  # and it still keeps overlaps out
    finally:
        for key in taken_over:
            console.delete(key)
        console.close()


def test_tasks_are_enqueued_by_name_as_the_registered_task(r: redis.Redis, operator) -> None:
    """The runner and the alerts name their tasks instead of importing them (the task module imports
    them). Every Django process registers the tasks, so the name is the task itself: Celery's eager
    mode runs the job right here, as ``run_job.delay`` did, with nothing sent to a broker."""
    assert celery_app.signature(jobs.RUN_JOB_TASK).type == tasks.run_job  # == : shared_task gives a proxy
    assert celery_app.signature(webhooks.ALERT_NOTIFY_TASK).type == tasks.alert_notify
    ids = dead_letters(r, 7)
    celery_app.conf.task_always_eager = True
    try:
        job = services.dlq_requeue_all(user=operator, conn=CONN, key=b"orders:dlq", up_to=ids[-1], batch=3)
    finally:
        celery_app.conf.task_always_eager = False
    job.refresh_from_db()
    assert (job.state, job.done, job.total) == ("done", 7, 7)
    assert r.xlen("orders:dlq") == 0 and r.xlen("orders") == 7


def test_only_known_kinds_can_be_given_a_body() -> None:
    with pytest.raises(ValueError, match="nightly"):
        jobs.kinds_register({"nightly": lambda job, progress: None})
