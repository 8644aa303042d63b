"""Console jobs never starve the bus's own upkeep, and a viewer's costly export never holds an operator's
fix for long (docs/decisions.md#jobs-on-their-own-queue-one-job-per-user).

The beat's tasks (snapshots, the mirror sync, resuming stalled jobs, retention, starting the scheduled
pipeline) and alert webhooks travel on ``busconsole-beat``, jobs on ``busconsole-jobs``, each with
workers of its own (``make run``, docker-compose.yml): with every job worker busy, a beat task still
runs. Jobs that fix the bus (replay, requeue) are sent before queued exports (a higher priority), and
each user holds one job at a time (``BUSCONSOLE_JOBS_PER_USER``), so the issue's scenario (a viewer's
two exports, then an operator's replay, two job workers) lets the replay run at once.

Real ``celery worker`` processes consume the queues as the deployment's do (``-Q``); what they did is
read from the database and Redis. Waits are bounded polls; the jobs that hold a worker are long (a
quadratic search query over thousands of entries, a replay one entry per batch) and cancelled at the end.
"""

from __future__ import annotations

import importlib.util
import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
import yaml
from django.conf import settings

from busconsole.celery import app as celery_app
from streams_app import services
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.metrics.models import SnapshotRun
from tests.console.celery_procs import Worker, celery_env
from tests.console.helpers import CONN
from tests.console.jobs.helpers import finished, job_state
from tests.polling import wait_for
from tests.servers import REPO

BEAT, JOBS = "busconsole-beat", "busconsole-jobs"
#: About 10,000 CEL iterations an entry (100 items against 100), well inside the search's cost bound:
#: a few milliseconds an entry, so a few thousand entries hold a worker for many seconds.
SLOW_QUERY = 'data.items.exists(x, data.items.exists(y, x == y + "z"))'


def _queue_of(task: str) -> str:
    """Where Celery's own router sends ``task`` (as beat's and the console's sends do)."""
    return celery_app.amqp.router.route({}, task)["queue"].name


def test_beat_work_and_jobs_travel_on_queues_of_their_own() -> None:
    assert settings.BUSCONSOLE_BEAT_QUEUE == BEAT and settings.BUSCONSOLE_JOBS_QUEUE == JOBS
    beat_tasks = {entry["task"] for entry in settings.CELERY_BEAT_SCHEDULE.values()}
    assert {"streams_app.tasks.snapshot_tick", "streams_app.tasks.mirror_sync_all",
            "streams_app.tasks.resume_stalled_jobs", "streams_app.tasks.samples_retention"} <= beat_tasks
    for task in [*beat_tasks, "streams_app.tasks.alert_notify"]:
        assert _queue_of(task) == BEAT, task
    assert _queue_of(jobs.RUN_JOB_TASK) == JOBS
    assert _queue_of("a.task.added.later") == JOBS  # unrouted work never lands on the upkeep's workers


def _waiting(broker: redis.Redis, queue: str) -> int:
    """Messages waiting on ``queue`` in the broker: kombu's Redis lists, one per priority step."""
    return sum(broker.llen(queue + ("" if step == 0 else f"\x06\x16{step}")) for step in (0, 3, 6, 9))


@pytest.mark.django_db(transaction=True)
def test_each_message_reaches_its_own_queue_only(r: redis.Redis, viewer) -> None:
    """Read from the broker itself: a beat task waits on the upkeep's queue alone, a job on the jobs' alone
    (a queue bound under another's routing key would get a copy of its every message)."""
    broker = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    celery_app.control.purge()
    try:
        celery_app.send_task("streams_app.tasks.snapshot_tick")
        assert (_waiting(broker, BEAT), _waiting(broker, JOBS)) == (1, 0)
        r.xadd("orders", {"n": "1"})
        services.stream_export_job(user=viewer, conn=CONN, key=b"orders", fmt="ndjson")
        assert (_waiting(broker, BEAT), _waiting(broker, JOBS)) == (1, 1)
    finally:
        celery_app.control.purge()  # no worker here: a later test's worker must not run these


def _load_run_script():
    spec = importlib.util.spec_from_file_location("busconsole_run_script", REPO / "scripts" / "run.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _queues_of(argv: list[str]) -> list[str]:
    return argv[argv.index("-Q") + 1].split(",") if "-Q" in argv else ["<every queue>"]


def test_make_run_and_compose_give_each_queue_workers_of_its_own() -> None:
    run = _load_run_script()
    workers = [argv for _, argv in run.celery_workers() if "worker" in argv]
    assert sorted(_queues_of(argv) for argv in workers) == [[BEAT], [JOBS]]

    compose = yaml.safe_load((Path(REPO) / "docker-compose.yml").read_text())
    commands = [s["command"] for s in compose["services"].values() if "worker" in (s.get("command") or [])]
    assert sorted(_queues_of(argv) for argv in commands) == [[BEAT], [JOBS]]


# --------------------------------------------------------------------------------- real workers


@pytest.fixture(scope="module")
def env(django_db_setup, django_db_blocker, tmp_path_factory) -> dict[str, str]:
    with django_db_blocker.unblock():
        return celery_env(BUSCONSOLE_EXPORT_DIR=str(tmp_path_factory.mktemp("exports")))


@pytest.fixture
def started(env) -> Iterator[list[Worker]]:
    """Workers a test starts, stopped after it (``Worker(name, env, queues=[...])``)."""
    workers: list[Worker] = []
    yield workers
    for worker in workers:
        worker.stop()


def _slow_stream(r: redis.Redis, n: int) -> None:
    payload = json.dumps({"items": [f"i{i:03d}" for i in range(100)]})
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd("big", {"type": "order.created", "n": str(i), "data": payload})
    pipe.execute()


def _running(job_id: int) -> bool:
    return job_state(job_id).state == "running"


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_beat_task_runs_while_every_job_worker_is_busy(env, started, r: redis.Redis, viewer, operator) -> None:
    started.append(Worker("jobs", env, queues=[JOBS]))
    started.append(Worker("upkeep", env, queues=[BEAT]))
    _slow_stream(r, 5000)
    job = services.stream_export_job(user=viewer, conn=CONN, key=b"big", fmt="csv", q=SLOW_QUERY)
    wait_for(lambda: _running(job.pk), timeout=60, what="the export to hold the only job worker", step=0.02)

    celery_app.send_task("streams_app.tasks.snapshot_tick")  # as beat sends it: by name, through the routes
    run = wait_for(lambda: SnapshotRun.objects.first(), timeout=60, what="the snapshot to run", step=0.05)
    assert run is not None
    assert _running(job.pk)  # the job worker was busy all along

    services.job_cancel(user=viewer, job=job)
    assert wait_for(lambda: finished(job.pk), timeout=30, what="the cancel").state == "cancelled"


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_viewers_two_exports_leave_an_operators_replay_a_worker(env, started, r: redis.Redis, viewer,
                                                                  operator) -> None:
    """The issue's scenario with two job workers: the second export is refused, the replay runs at once."""
    started.append(Worker("jobs-1", env, queues=[JOBS]))
    started.append(Worker("jobs-2", env, queues=[JOBS]))
    _slow_stream(r, 5000)
    first = services.stream_export_job(user=viewer, conn=CONN, key=b"big", fmt="ndjson", q=SLOW_QUERY)
    with pytest.raises(jobs.JobLimitReached):
        services.stream_export_job(user=viewer, conn=CONN, key=b"big", fmt="csv", q=SLOW_QUERY)
    wait_for(lambda: _running(first.pk), timeout=60, what="the export to start", step=0.02)

    first_id = r.xrange("big", count=1)[0][0].decode()
    replay = services.stream_replay(user=operator, conn=CONN, key=b"big", start=first_id, end=first_id,
                                    target=b"copy")
    done = wait_for(lambda: finished(replay.pk), timeout=60, what="the replay to run beside the export")
    assert done.state == "done" and r.xlen("copy") == 1
    assert _running(first.pk)  # it ran beside the export, not after it

    services.job_cancel(user=operator, job=first)
    assert wait_for(lambda: finished(first.pk), timeout=30, what="the cancel").state == "cancelled"


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_queued_fix_goes_before_queued_exports(env, started, r: redis.Redis, viewer, operator,
                                                 admin_user) -> None:
    """One job worker, busy; an export is queued, then a replay: the replay runs first when it frees."""
    _slow_stream(r, 5000)
    holding = services.stream_export_job(user=viewer, conn=CONN, key=b"big", fmt="ndjson", q=SLOW_QUERY)
    waiting = services.stream_export_job(user=admin_user, conn=CONN, key=b"big", fmt="csv", q=SLOW_QUERY)
    started.append(Worker("jobs", env, queues=[JOBS]))
    wait_for(lambda: _running(holding.pk), timeout=60, what="the first export to hold the worker", step=0.02)
    first_id = r.xrange("big", count=1)[0][0].decode()
    fix = services.stream_replay(user=operator, conn=CONN, key=b"big", start=first_id, end=first_id,
                                 target=b"copy")
    assert job_state(waiting.pk).state == "queued" and job_state(fix.pk).state == "queued"

    services.job_cancel(user=viewer, job=holding)
    done = wait_for(lambda: finished(fix.pk), timeout=60, what="the replay to run next")
    assert done.state == "done"
    assert job_state(waiting.pk).started_at is None or job_state(waiting.pk).started_at > done.started_at

    services.job_cancel(user=admin_user, job=job_state(waiting.pk))
    wait_for(lambda: finished(waiting.pk), timeout=30, what="the cancel of the waiting export")
    assert Job.objects.filter(state__in=["queued", "running"]).count() == 0
