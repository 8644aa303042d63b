"""Background jobs run by real Celery worker processes against the real Redis and the test database.

The crash tests SIGKILL a worker in the middle of a job, resume it the way production does (the beat
task re-enqueues jobs that stopped making progress) on a fresh worker, and check the end state in
Redis: every entry handled exactly once, none lost. Workers take seconds to start, so one is shared
by the tests of this module that do not kill theirs.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from django.db import connection

from busconsole.celery import app as celery_app
from streams_app import services, tasks
from streams_app.alerts import webhooks
from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.live.groups import job_group
from streams_app.redis_ops import client as redis_client
from tests.console.helpers import wait_for
from tests.servers import REPO

pytestmark = pytest.mark.django_db(transaction=True)

CONN = "default"
CELERY = str(REPO / ".venv" / "bin" / "celery")
LOCK_S = 2  # the job lock of these workers: a killed worker's lock is gone within 2 s


class Worker:
    """``celery -A busconsole worker --pool solo`` on the test's Redis and database file."""

    def __init__(self, name: str, env: dict[str, str]) -> None:
        self.name = name
        self.log = Path(tempfile.mkstemp(prefix=f"celery-{name}-", suffix=".log")[1])
        self.process = subprocess.Popen(
            [CELERY, "-A", "busconsole", "worker", "--pool", "solo", "--concurrency", "1", "--loglevel", "INFO",
             "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{name}@127.0.0.1"],
            cwd=REPO, env=env, stdout=self.log.open("wb"), stderr=subprocess.STDOUT,
        )
        wait_for(self._ready, timeout=60, what=f"worker {name} to start", step=0.05)

    def _ready(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"worker {self.name} exited:\n{self.output()}")
        return " ready." in self.output()

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs, the task message stays unacked, the job stays 'running'."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.unlink(missing_ok=True)


class Workers:
    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.started: list[Worker] = []
        self._shared: Worker | None = None

    def start(self, name: str) -> Worker:
        worker = Worker(name, self.env)
        self.started.append(worker)
        return worker

    def shared(self) -> Worker:
        if self._shared is None or self._shared.process.poll() is not None:
            self._shared = self.start("shared")
        return self._shared

    def stop_shared(self) -> None:
        if self._shared is not None:
            self._shared.stop()
            self._shared = None

    def stop_all(self) -> None:
        for worker in self.started:
            worker.stop()


@pytest.fixture(scope="module")
def workers(django_db_setup, django_db_blocker) -> Iterator[Workers]:
    """Worker processes sharing the test database file (pytest-django's test DB, not the dev one)."""
    with django_db_blocker.unblock():
        db_name = connection.settings_dict["NAME"]
    assert db_name and os.path.exists(db_name), db_name
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{db_name}",
        "BUSCONSOLE_JOB_LOCK_S": str(LOCK_S),
        "DJANGO_SETTINGS_MODULE": "busconsole.settings",
        "PYTHONUNBUFFERED": "1",
    }
    pool = Workers(env)
    yield pool
    pool.stop_all()


@pytest.fixture(autouse=True)
def _fresh(settings) -> Iterator[None]:
    settings.BUSCONSOLE_READ_ONLY = False
    settings.BUSCONSOLE_DLQ_PATTERNS = ""
    redis_client.reset()
    yield
    redis_client.reset()


@pytest.fixture
def no_worker(workers: Workers) -> None:
    """For tests that run a job in this process: no worker may take the job's queued task meanwhile."""
    workers.stop_shared()


def dead_letters(r: redis.Redis, n: int, *, key: str = "orders:dlq") -> list[str]:
    """``n`` eventbus-convention dead letters of ``orders``, written in pipelined chunks."""
    ids: list[str] = []
    for start in range(0, n, 5000):
        pipe = r.pipeline(transaction=False)
        for i in range(start, min(n, start + 5000)):
            pipe.xadd(key, {
                "type": "order.created", "data": json.dumps({"order_id": i}), "_retries": "5",
                "dlq_original_stream": "orders", "dlq_original_id": f"1-{i}", "dlq_group": "billing",
                "dlq_error": "ValueError: declined", "dlq_retries": "5", "dlq_failed_at": "1700000000000",
            })
        ids += [x.decode() for x in pipe.execute()]
    return ids


def field_values(r: redis.Redis, key: str, field: bytes) -> list[bytes]:
    """One field of every entry of ``key``, read in pages (never one XRANGE - + of everything)."""
    out: list[bytes] = []
    start = "-"
    while True:
        page = r.xrange(key, start, "+", count=5000)
        out += [fields.get(field) for _, fields in page]
        if len(page) < 5000:
            return out
        start = "(" + page[-1][0].decode()


def job_state(job_id: int) -> Job:
    return Job.objects.get(pk=job_id)


def finished(job_id: int) -> Job | None:
    job = job_state(job_id)
    return job if job.is_finished else None


def test_bulk_requeue_of_20k_survives_a_killed_worker(workers: Workers, r: redis.Redis, operator) -> None:
    workers.stop_shared()  # the victim must be the only worker when the job starts
    ids = dead_letters(r, 20_000)
    # One entry per batch makes the job take long enough (seconds) to be killed in the middle of it.
    job = services.dlq_requeue_all(user=operator, conn=CONN, key=b"orders:dlq", up_to=ids[-1], batch=1)
    victim = workers.start("victim")
    wait_for(lambda: job_state(job.pk).done > 0 and r.xlen("orders:dlq") < 20_000, timeout=60,
             what="the job to make progress")
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
    assert done.total == 20_000
    assert 0 < done.done <= 20_000  # may miss the one batch whose save the kill interrupted
    assert AuditEvent.objects.filter(action="dlq.requeue_all.finished", outcome="ok").count() == 1


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
    wait_for(lambda: job_state(job.pk).done > 0, timeout=60, what="the replay to make progress")
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


def test_progress_is_broadcast_to_the_job_group(no_worker, r: redis.Redis, operator) -> None:
    """The channel layer gets small ``job.progress`` events on ``job-<id>`` (for live pages)."""
    from asgiref.sync import async_to_sync
    from channels.layers import get_channel_layer

    ids = dead_letters(r, 30)
    job = services.dlq_requeue_all(user=operator, conn=CONN, key=b"orders:dlq", up_to=ids[-1], batch=10)
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(job_group(job.pk), channel)
    jobs.job_run(job.pk)  # in this process: the Celery path is tested above
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
    import asyncio

    try:
        return await asyncio.wait_for(layer.receive(channel), timeout=0.5)
    except TimeoutError:
        return None


def test_a_failing_broadcast_does_not_fail_the_job(no_worker, r: redis.Redis, operator, settings) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]}}}
    from channels.layers import channel_layers

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
