"""``python -m eventbus publish``."""

from __future__ import annotations

import json
import os
import subprocess
import sys

import redis

from tests.servers import REPO


def _cli(*args: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    return subprocess.run(
        [sys.executable, "-m", "eventbus", *args],
        cwd=REPO,
        env=env,
        capture_output=True,
        text=True,
        timeout=30,
    )


def test_publish_prints_the_entry_id(url: str, r: redis.Redis) -> None:
    done = _cli("publish", "--url", url, "orders", "order.created", '{"order_id": 7}')
    assert done.returncode == 0, done.stderr
    [(entry_id, fields)] = r.xrange("orders")
    assert done.stdout.strip() == entry_id.decode()
    assert fields[b"type"] == b"order.created"
    assert json.loads(fields[b"data"]) == {"order_id": 7}


def test_publish_refuses_bad_json(url: str, r: redis.Redis) -> None:
    done = _cli("publish", "--url", url, "orders", "order.created", "{nope")
    assert done.returncode == 2
    assert "JSON" in done.stderr
    assert r.exists("orders") == 0


def test_worker_refuses_a_target_that_is_not_a_bus(url: str) -> None:
    done = _cli("worker", "tests.eventbus.apps:SLEEP")
    assert done.returncode != 0
    assert "not an eventbus.Bus" in done.stderr
