"""A job whose worker is SIGKILLed resumes by itself within about half a minute, and ends with exact counts.

Everything runs as production runs it, with production's job settings (stalled threshold, lock, beat
interval): a real worker is killed in the middle of a bulk requeue, a real beat process notices the
silent job and enqueues it again, a fresh worker finishes it. Nobody presses Resume. The expected
count comes from Redis alone: how many entries the target stream holds and how many are left in the
DLQ, against the 50,000 the test wrote.
"""

from __future__ import annotations

import contextlib
import signal
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from streams_app import services
from streams_app.audit.models import AuditEvent
from tests.console.celery_procs import Beat, CeleryProcess, Worker, celery_env
from tests.console.helpers import CONN
from tests.console.jobs.helpers import dead_letters, field_values, finished, job_state
from tests.polling import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

N = 50_000
#: How long a resume may take after the kill: the stalled threshold (30 s by default) plus a beat
#: interval and the rest of the work, with room for a slow machine; far below the old 300 s.
RESUME_BOUND_S = 60


@pytest.fixture
def processes() -> Iterator[list[CeleryProcess]]:
    """The Celery processes a test starts, stopped at its end: all asked at once, so that their warm
    shutdowns run side by side rather than one after the other."""
    started: list[CeleryProcess] = []
    yield started
    for process in started:
        if process.process.poll() is None:
            process.process.send_signal(signal.SIGTERM)
    for process in started:
        with contextlib.suppress(subprocess.TimeoutExpired):
            process.process.wait(20)
        process.stop()  # removes its log; kills one that would not stop


@pytest.mark.slow
def test_a_killed_requeue_resumes_unattended_with_exact_counts(
    processes: list[CeleryProcess], r: redis.Redis, operator, tmp_path: Path
) -> None:
    env = celery_env()  # no overrides: the default stalled threshold, lock and beat interval
    ids = dead_letters(r, N)
    job = services.dlq_requeue_all(user=operator, conn=CONN, key=b"orders:dlq", up_to=ids[-1], batch=5)
    victim = Worker("victim-crash", env)
    processes.append(victim)
    wait_for(lambda: r.xlen("orders:dlq") < N - 1000, timeout=60, what="the job to make progress", step=0.01)
    victim.kill()

    left = r.xlen("orders:dlq")
    assert 0 < left < N, "the worker must die in the middle of the job"
    assert job_state(job.pk).state == "running"

    processes.append(Beat(tmp_path / "beat-schedule", env))
    processes.append(Worker("rescuer", env))
    done = wait_for(lambda: finished(job.pk), timeout=RESUME_BOUND_S, what="the job to resume by itself and finish",
                    step=0.2)

    moved = r.xlen("orders")  # the target held nothing before: what it holds now is what the job moved
    assert done.state == "done", done.error
    assert r.xlen("orders:dlq") == 0 and moved == N
    assert sorted(m.decode() for m in field_values(r, "orders", b"_requeued_from")) == sorted(ids)
    assert (done.done, done.total) == (moved, N)
    row = AuditEvent.objects.get(action="dlq.requeue_all.finished")
    assert (row.outcome, row.affected) == ("ok", moved)
