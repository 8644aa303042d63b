"""Fixtures for the event bus tests: a Bus on the suite's real redis-server (db 0, flushed per
test by the ``r`` fixture), workers run in threads or in subprocesses. Waits use ``tests.polling``."""

from __future__ import annotations

import asyncio
import os
import subprocess
import sys
import threading
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import pytest
import redis

from eventbus import Bus, Worker
from tests.servers import REPO, RedisServer


def server_ms(client: redis.Redis) -> int:
    """The Redis server's clock, in ms: the clock the bus computes retry due times with."""
    seconds, micros = client.time()
    return seconds * 1000 + micros // 1000


def group_info(client: redis.Redis, stream: str, group: str) -> dict[str, Any]:
    """XINFO GROUPS' row for ``group`` (empty until a worker has created it)."""
    try:
        rows = client.xinfo_groups(stream)
    except redis.ResponseError:  # no such key yet
        return {}
    return next((row for row in rows if row["name"].decode() == group), {})


@pytest.fixture
def url(redis_server: RedisServer, r: redis.Redis) -> str:
    """db 0 of the suite's server, already flushed by ``r``."""
    return redis_server.url(0)


@pytest.fixture
def bus(url: str) -> Iterator[Bus]:
    instance = Bus.from_url(url, maxlen=None)
    yield instance
    instance.close()


@contextmanager
def running(bus: Bus, groups: set[str] | None = None, **config: Any) -> Iterator[Worker]:
    """Run a worker of ``bus`` in a thread for the duration of the block, then stop it cleanly."""
    config.setdefault("block_ms", 100)
    config.setdefault("pump_interval", 0.02)
    worker = bus.worker(groups, **config)
    failure: list[BaseException] = []

    def target() -> None:
        try:
            asyncio.run(worker.run())
        except BaseException as exc:  # noqa: BLE001 - reported to the test below
            failure.append(exc)

    thread = threading.Thread(target=target, name=f"worker-{worker.consumer}", daemon=True)
    thread.start()
    try:
        yield worker
    finally:
        worker.stop()
        thread.join(timeout=20)
    assert not thread.is_alive(), "the worker did not stop"
    if failure:
        raise failure[0]


def spawn_worker(url: str, *args: str, **env: str) -> subprocess.Popen[bytes]:
    """``python -m eventbus worker tests.eventbus.apps:bus ...`` in its own process."""
    environment = {**os.environ, "EVENTBUS_TEST_URL": url, "PYTHONPATH": str(REPO), **env}
    return subprocess.Popen(
        [
            sys.executable,
            "-m",
            "eventbus",
            "--log-level",
            "WARNING",
            "worker",
            "tests.eventbus.apps:bus",
            *args,
        ],
        cwd=REPO,
        env=environment,
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
    )
