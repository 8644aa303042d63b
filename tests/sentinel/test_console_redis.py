"""The console's own Redis (REDIS_URL) behind real sentinels: Celery's broker, the channel layer, the cache
and the locks, in long-lived processes that must follow a failover without a restart.

A console process (``console_probe``) and a real Celery worker both run with ``REDIS_URL`` set to the
``redis+sentinel://`` URL. What each step wrote is read back from the primary the sentinels name, with a
plain client; that the worker ran a task is its own log line for the task's id.
"""

from __future__ import annotations

import json
import subprocess
import sys

import pytest
import redis

from tests.console.celery_procs import Worker, celery_env
from tests.polling import wait_for
from tests.servers import REPO, SentinelServers

pytestmark = pytest.mark.django_db(transaction=True)


class Probe:
    def __init__(self, env: dict[str, str]) -> None:
        self.process = subprocess.Popen([sys.executable, "-m", "tests.sentinel.console_probe"], cwd=REPO, env=env,
                                        stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)

    def round(self, tag: str) -> dict[str, object]:
        assert self.process.stdin is not None and self.process.stdout is not None
        self.process.stdin.write(tag + "\n")
        self.process.stdin.flush()
        return json.loads(self.process.stdout.readline())

    def stop(self) -> None:
        if self.process.stdin:
            self.process.stdin.close()
        self.process.wait(20)


def ran(worker: Worker, task_id: object) -> bool:
    return f"resume_stalled_jobs[{task_id}] succeeded" in worker.output()


@pytest.mark.slow
def test_celery_the_channel_layer_the_cache_and_the_locks_use_sentinel_and_follow_a_failover(
    failover: SentinelServers,
) -> None:
    servers = failover
    env = celery_env(REDIS_URL=servers.url(1))
    worker = Worker("sentinel-broker", env)
    probe = Probe(env)
    try:
        before = probe.round("one")
        assert (before["cache"], before["lock"], before["channel"]) == ("one", True, "one"), before
        primary = redis.Redis(port=servers.primary().port, db=1)
        assert primary.exists("busconsole:1:probe-one") and primary.exists("busconsole:probe-one")
        wait_for(lambda: ran(worker, before["task"]), what="the worker to run the task sent before", timeout=60)

        old = servers.kill_primary()
        promoted = servers.wait_failover(old)

        after = wait_for(lambda: (lambda r: r if "error" not in json.dumps(r) else None)(probe.round("two")),
                         what="the same console process to use its Redis again", timeout=30, step=0.5)
        assert (after["cache"], after["lock"], after["channel"]) == ("two", True, "two"), after
        primary = redis.Redis(port=promoted.port, db=1)
        assert primary.exists("busconsole:1:probe-two") and primary.exists("busconsole:probe-two")
        wait_for(lambda: ran(worker, after["task"]), what="the same worker to run a task sent after the failover",
                 timeout=90)
    finally:
        probe.stop()
        worker.stop()
