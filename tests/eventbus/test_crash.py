"""Worker processes that die: SIGKILL mid-batch loses nothing; SIGTERM finishes or releases.

Workers run as real processes (``python -m eventbus worker``). What they did is read from Redis
itself (XPENDING, XRANGE) and from the lists the test handler appends to, never from the bus.
"""

from __future__ import annotations

import json
import signal
import subprocess

import pytest
import redis

from eventbus import Bus
from tests.eventbus.apps import FINISHED, STARTED
from tests.eventbus.conftest import spawn_worker
from tests.polling import wait_for

STREAM, GROUP = "jobs", "workers"


def _finished(r: redis.Redis) -> list[int]:
    return [int(n) for n in r.lrange(FINISHED, 0, -1)]


def _pending(r: redis.Redis) -> int:
    return r.xpending(STREAM, GROUP)["pending"]


def _publish_jobs(url: str, count: int) -> None:
    bus = Bus.from_url(url, maxlen=None)
    bus.publish_many(STREAM, [("job", {"n": n}) for n in range(count)])
    bus.ensure_groups()
    bus.close()


def _stop(process: subprocess.Popen[bytes], sig: signal.Signals) -> int:
    process.send_signal(sig)
    try:
        return process.wait(timeout=20)
    finally:
        if process.poll() is None:
            process.kill()


@pytest.mark.slow
def test_sigkill_mid_batch_loses_no_event(url: str, r: redis.Redis) -> None:
    total = 300
    _publish_jobs(url, total)
    worker_args = ("--concurrency", "4", "--prefetch", "8", "--lease-ms", "500", "--block-ms", "100")
    redelivery_bound = 0

    # Two workers are killed mid-batch, at about a third and two thirds of the work.
    for fraction in (3, 3 / 2):
        process = spawn_worker(url, *worker_args, EVENTBUS_TEST_SLEEP="0.01")
        target = total / fraction
        wait_for(lambda target=target: len(_finished(r)) >= target, timeout=30,
                 what="the worker to make progress (worker made no progress)")
        _stop(process, signal.SIGKILL)
        pending_at_kill = _pending(r)
        # Mid-batch: the dead worker held entries it had read and not acknowledged.
        assert pending_at_kill > 0
        redelivery_bound += pending_at_kill

    survivor = spawn_worker(url, *worker_args, EVENTBUS_TEST_SLEEP="0.001")
    try:
        wait_for(lambda: set(_finished(r)) >= set(range(total)) and _pending(r) == 0, timeout=30,
                 what="the survivor to finish every job with nothing pending")
    finally:
        assert _stop(survivor, signal.SIGTERM) == 0

    finished = _finished(r)
    assert set(finished) == set(range(total))
    # At least once, and redelivered only what was pending (unacknowledged) when a worker died.
    assert total <= len(finished) <= total + redelivery_bound
    group = r.xinfo_groups(STREAM)[0]
    assert group["pending"] == 0
    assert group["entries-read"] == total


@pytest.mark.slow
def test_sigterm_finishes_running_handlers_and_releases_the_rest(url: str, r: redis.Redis) -> None:
    _publish_jobs(url, 40)
    lease_ms = 60_000
    process = spawn_worker(
        url, "--concurrency", "2", "--prefetch", "6", "--lease-ms", str(lease_ms), EVENTBUS_TEST_SLEEP="0.3"
    )
    wait_for(lambda: r.llen(STARTED) >= 3, timeout=20, what="three jobs to start")
    assert _stop(process, signal.SIGTERM) == 0

    started = [int(n) for n in r.lrange(STARTED, 0, -1)]
    finished = _finished(r)
    assert sorted(started) == sorted(finished), "a handler was abandoned mid-run"

    number_of = {entry_id.decode(): json.loads(fields[b"data"])["n"] for entry_id, fields in r.xrange(STREAM)}
    pending = r.xpending_range(STREAM, GROUP, min="-", max="+", count=100)
    pending_numbers = {number_of[row["message_id"].decode()] for row in pending}
    # Everything that finished was acknowledged before the process exited...
    assert not pending_numbers & set(finished)
    # ...and what was fetched but not started was released: idle for a whole lease already, so
    # the next worker's reclaim takes it at once instead of in a minute.
    assert pending, "the worker had prefetched entries when it stopped"
    assert all(row["time_since_delivered"] >= lease_ms for row in pending)
    # The consumer is kept while it holds entries: deleting it would drop them from the PEL.
    first_consumer = {row["consumer"] for row in pending}
    assert first_consumer <= {c["name"] for c in r.xinfo_consumers(STREAM, GROUP)}

    # A new worker (with a short lease) takes over the released entries and finishes the job.
    process = spawn_worker(url, "--concurrency", "4", "--lease-ms", "1000", EVENTBUS_TEST_SLEEP="0.001")
    try:
        wait_for(lambda: set(_finished(r)) == set(range(40)) and _pending(r) == 0, timeout=20,
                 what="the new worker to finish the 40 jobs with nothing pending")
    finally:
        assert _stop(process, signal.SIGTERM) == 0
    # A clean shutdown with nothing pending removes its consumer from the group.
    assert {c["name"] for c in r.xinfo_consumers(STREAM, GROUP)} == first_consumer
