"""The console as deployed under each shipped console user (deploy/redis/users.acl), for every connection:
``REDIS_URL`` (Celery's broker, the channel layer, the cache, the locks) and ``BUS_REDIS_URLS`` both log in
as ``busconsole-viewer`` (with ``BUSCONSOLE_READ_ONLY=1``, as the read-only console runs) or as
``busconsole-operator``. A web process, a Celery worker and beat run; a person logs in (the throttle's
counters), reads pages (a long key's link goes through the cache), tails a stream over a websocket (the
channel layer), runs a job (an export as the viewer, a requeue of a DLQ as the operator), waits for a
metric snapshot of beat's schedule, and ``celery inspect ping`` (docker-compose's health check) answers
from the worker, which runs as deployed (gossip, mingle and heartbeats on). Then ``ACL LOG`` must hold nothing the user was refused: the console's
own Redis needs only what the user's selector grants (its own keys, never the monitored ones).
"""

from __future__ import annotations

import hashlib
import subprocess
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
import redis

from streams_app.metrics.models import SnapshotRun
from tests.console.celery_procs import Beat, CeleryProcess, celery_env
from tests.console.helpers import CONN, seg
from tests.console.live.helpers import entries_until, open_tail, run, until_live
from tests.deploy.production import WebProcess
from tests.polling import wait_for
from tests.security.test_acl import acl_server, r, refusals, user_url  # noqa: F401  (fixtures)
from tests.servers import CELERY, REPO, RedisServer
from tests.tls.test_deployed_tls import login

LONG_KEY = b"long:" + b"k" * 3000


@pytest.fixture(params=["busconsole-viewer", "busconsole-operator"])
def deployed(request, transactional_db, settings, acl_server: RedisServer, r: redis.Redis,  # noqa: F811
             tmp_path: Path) -> Iterator[tuple[str, WebProcess, dict[str, str]]]:
    user = request.param
    settings.PASSWORD_HASHERS = [*settings.PASSWORD_HASHERS, "django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    env = celery_env(
        REDIS_URL=user_url(acl_server, user, 1), BUS_REDIS_URLS=f"{CONN}={user_url(acl_server, user, 0)}",
        BUSCONSOLE_READ_ONLY="1" if user == "busconsole-viewer" else "0",
        BUSCONSOLE_SNAPSHOT_INTERVAL_S="1", BUSCONSOLE_MIRROR_INTERVAL_S="1",
    )
    processes = []
    try:
        processes.append(WebProcess(env).start())
        # as deployed: gossip, mingle and heartbeats on (the suite's other workers switch them off)
        worker = CeleryProcess("worker", ["worker", "--pool", "solo", "--loglevel", "INFO", "-n", "acl@127.0.0.1"], env)
        processes.append(worker)
        wait_for(lambda: worker.alive() and " ready." in worker.output(), timeout=60, what="the worker to start")
        processes.append(Beat(tmp_path / "beat-schedule", env))
        yield user, processes[0], env
    finally:
        for process in reversed(processes):
            process.stop()


@pytest.mark.slow
def test_the_console_runs_under_the_shipped_user(deployed: tuple[str, WebProcess, dict[str, str]],
                                                 r: redis.Redis, viewer, operator, api_token) -> None:  # noqa: F811
    user, web, env = deployed
    ids = [r.xadd("orders", {"type": "order.created", "n": str(n)}).decode() for n in range(3)]
    r.xadd(LONG_KEY, {"n": "1"})
    dead = [r.xadd("orders:dlq", {"type": "order.created", "dlq_original_stream": "orders",
                                  "dlq_error": "boom"}).decode() for _ in range(2)]
    person = viewer if user == "busconsole-viewer" else operator
    session = login(web, person)
    for path in ("/", f"/c/{CONN}/streams/", f"/c/{CONN}/streams/orders/", f"/c/{CONN}/dlq/"):
        page = session.get(path)
        assert page.status_code == 200 and "unreachable" not in page.text, (path, page.text[:300])
    digest = hashlib.sha256(LONG_KEY).hexdigest()
    assert session.get(f"/c/{CONN}/streams/~sha256:{digest}/").status_code == 200

    async def tail() -> tuple[list[str], list[str]]:
        async with open_tail(web, dict(session.cookies), b"orders") as ws:
            await until_live(ws)
            added = [r.xadd("orders", {"n": str(n)}).decode() for n in (7, 8)]
            return [e["id"] for e in await entries_until(ws, added[-1])], added

    got, added = run(tail())
    assert got == added

    token = {"Authorization": f"Bearer {api_token(person)}"}
    if user == "busconsole-viewer":
        started = httpx.post(f"{web.url}/api/v1/c/{CONN}/streams/orders/export", json={"format": "ndjson"},
                             headers=token)
    else:
        started = httpx.post(f"{web.url}/api/v1/c/{CONN}/dlq/{seg('orders:dlq')}/requeue",
                             json={"all": True, "up_to": dead[-1]}, headers=token)
    assert started.status_code in (200, 202), started.text
    job = started.json()["job"]
    state = wait_for(lambda: (s := httpx.get(f"{web.url}/api/v1/jobs/{job}", headers=token).json())["state"]
                     in ("done", "failed", "cancelled") and s, timeout=90, what="the job to finish")
    assert state["state"] == "done", (state, refusals(r, user))
    if user == "busconsole-operator":
        assert r.xlen("orders:dlq") == 0 and r.xlen("orders") == len(ids) + 2 + 2
    wait_for(lambda: SnapshotRun.objects.exists(), timeout=60, what="beat's first metric snapshot")
    # the health check docker-compose.yml runs on the workers
    ping = subprocess.run([*CELERY, "-A", "busconsole", "inspect", "ping", "-d", "acl@127.0.0.1", "--timeout", "10"],
                          cwd=REPO, env=env, capture_output=True, text=True, timeout=60)
    assert ping.returncode == 0 and "pong" in ping.stdout, ping.stdout + ping.stderr
    assert refusals(r, user) == []
