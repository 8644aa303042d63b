"""The console as deployed, every Redis connection over mutual TLS: a web process (uvicorn) and a Celery
worker started with ``REDIS_URL`` and ``BUS_REDIS_URLS`` set to ``rediss://`` URLs with a CA, a client
certificate and key, and nothing else: the one setting reaches the monitored connection (pages, API, the
live tail), the Celery broker (a background job), the channel layer (every websocket joins a group on it),
the cache (a long key's link) and the locks (the login throttle).

The server requires client certificates (``tls-auth-clients yes``). What the console did is checked on
the server's plain port, never through the console. And each of the four clients of the console's own
Redis verifies the server's name: before, only the monitored connections' redis-py was told to, and
redis-py 5 checks no name unless told (kombu reads the URL's ``ssl_*`` parameters, but not that default).
"""

from __future__ import annotations

import hashlib
import json
import re
import subprocess
import sys
from collections.abc import Iterator

import httpx
import pytest
import redis
from django.contrib.auth.hashers import make_password

from tests.console.celery_procs import Worker, celery_env
from tests.console.conftest import PASSWORD
from tests.console.helpers import CONN, seg
from tests.console.live.helpers import entries_until, open_tail, run, until_live
from tests.deploy.production import WebProcess
from tests.polling import wait_for
from tests.servers import REPO, TlsRedisServer
from tests.tls.conftest import client_params
from tests.tls.pki import Pki

LONG_KEY = b"long:" + b"k" * 3000  # linked by its digest, which the cache remembers


@pytest.fixture
def deployed(transactional_db, settings, tls_server: TlsRedisServer, pki: Pki, plain: redis.Redis) -> Iterator[WebProcess]:
    settings.PASSWORD_HASHERS = [*settings.PASSWORD_HASHERS, "django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    params = client_params(pki)
    env = celery_env(REDIS_URL=tls_server.tls_url(1, **params),
                     BUS_REDIS_URLS=f"{CONN}={tls_server.tls_url(0, **params)}")
    web = WebProcess(env).start()
    try:
        worker = Worker("tls", env)
    except BaseException:
        web.stop()
        raise
    try:
        yield web
    finally:
        worker.stop()
        web.stop()


def login(web: WebProcess, user) -> httpx.Client:
    """A browser-like session: the login form, its CSRF token, the password (the throttle is counted).

    The web process checks passwords with Django's default hashers, not the tests' fast one."""
    user.password = make_password(PASSWORD, hasher="pbkdf2_sha256")
    user.save(update_fields=["password"])
    username = user.username
    session = httpx.Client(base_url=web.url, timeout=30, follow_redirects=False)
    form = session.get("/login/")
    token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', form.text)[1]
    done = session.post("/login/", data={"username": username, "password": PASSWORD, "csrfmiddlewaretoken": token},
                        headers={"Referer": f"{web.url}/login/"})
    assert done.status_code == 302, done.text[:500]
    return session


@pytest.mark.slow
def test_pages_api_tail_and_a_job_over_mutual_tls(deployed: WebProcess, plain: redis.Redis, viewer, operator,
                                                 api_token) -> None:
    web = deployed
    console_db = redis.Redis(host="127.0.0.1", port=plain.connection_pool.connection_kwargs["port"], db=1)
    console_db.flushdb()
    ids = [plain.xadd("orders", {"type": "order.created", "n": str(n)}).decode() for n in range(3)]
    plain.xgroup_create("orders", "workers", id="0")
    plain.xadd(LONG_KEY, {"n": "1"})
    dead = [plain.xadd("orders:dlq", {"type": "order.created", "n": str(n), "dlq_original_stream": "orders",
                                      "dlq_original_id": ids[n], "dlq_error": "boom"}).decode() for n in range(3)]

    # pages, through a real login (the throttle's counters are on the console's Redis)
    session = login(web, viewer)
    for path in ("/", f"/c/{CONN}/streams/", f"/c/{CONN}/streams/orders/", f"/c/{CONN}/streams/orders/groups/workers/"):
        page = session.get(path)
        assert page.status_code == 200, (path, page.text[:300])
        assert "unreachable" not in page.text, path
    digest = hashlib.sha256(LONG_KEY).hexdigest()
    assert console_db.exists(f"busconsole:1:console:long-key:{digest}")  # written by Django's cache
    assert session.get(f"/c/{CONN}/streams/~sha256:{digest}/").status_code == 200  # and read back

    # the API
    token = {"Authorization": f"Bearer {api_token(operator)}"}
    listed = httpx.get(f"{web.url}/api/v1/connections/", headers=token).json()["connections"]
    assert [(c["name"], c["ok"]) for c in listed] == [(CONN, True)]
    entries = httpx.get(f"{web.url}/api/v1/c/{CONN}/streams/orders/entries/?order=asc", headers=token).json()
    assert [e["id"] for e in entries["entries"]] == ids

    # the live tail, over websockets (the consumer joins its groups on the channel layer first)
    async def tail() -> list[str]:
        async with open_tail(web, dict(session.cookies), b"orders") as ws:
            await until_live(ws)
            added = [plain.xadd("orders", {"type": "order.created", "n": str(n)}).decode() for n in (7, 8)]
            got = await entries_until(ws, added[-1])
            return [e["id"] for e in got], added

    got, added = run(tail())
    assert got == added

    # a background job: the requeue of the whole DLQ, queued on the broker and run by the worker
    queued = httpx.post(f"{web.url}/api/v1/c/{CONN}/dlq/{seg('orders:dlq')}/requeue",
                        json={"all": True, "up_to": dead[-1]}, headers=token)
    assert queued.status_code in (200, 202), queued.text
    job = queued.json()["job"]
    state = wait_for(lambda: (s := httpx.get(f"{web.url}/api/v1/jobs/{job}", headers=token).json())["state"]
                     in ("done", "failed", "cancelled") and s, timeout=60, what="the requeue job to finish")
    assert state["state"] == "done" and state["done"] == 3, state
    assert plain.xlen("orders:dlq") == 0
    requeued = [fields for _, fields in plain.xrange("orders") if b"_requeued_from" in fields]
    assert sorted(f[b"_requeued_from"].decode() for f in requeued) == dead
    console_db.close()


_FOUR_CLIENTS = """
import json
import django
django.setup()
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.core.cache import cache
from busconsole.celery import app
from busconsole.locks import console_redis

def chain(exc):
    out = []
    while exc is not None and len(out) < 10:
        out.append(f"{type(exc).__name__}: {exc}")
        exc = exc.__cause__ or exc.__context__
    return " <- ".join(out)

def broker():
    with app.connection_for_write() as connection:
        connection.ensure_connection(max_retries=1)

checks = {
    "cache": lambda: cache.set("tls-probe", 1, 5),
    "channel layer": lambda: async_to_sync(get_channel_layer().send)("tls-probe", {"type": "probe"}),
    "celery broker": broker,
    "locks": lambda: console_redis().ping(),
}
out = {}
for name, check in checks.items():
    try:
        check()
        out[name] = "connected"
    except Exception as exc:
        out[name] = chain(exc)
print(json.dumps(out))
"""


def four_clients(redis_url: str) -> dict[str, str]:
    """What each client of the console's own Redis (cache, channel layer, Celery broker, locks) makes of
    ``REDIS_URL``, in a fresh process whose settings read it: "connected", or its error chain."""
    env = celery_env(REDIS_URL=redis_url)
    done = subprocess.run([sys.executable, "-c", _FOUR_CLIENTS], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)
    assert done.returncode == 0, done.stderr[-3000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.mark.slow
def test_every_client_of_the_console_redis_verifies_the_server(db, pki: Pki, tls_server: TlsRedisServer,
                                                               wrong_name_server: TlsRedisServer) -> None:
    """One REDIS_URL, the same verification for the cache, the channel layer, Celery and the locks: a
    certificate of the right CA naming another host is refused by each, and by none when the URL's host is
    one of the certificate's names."""
    params = client_params(pki)
    assert four_clients(tls_server.tls_url(1, host="localhost", **params)) == dict.fromkeys(
        ("cache", "channel layer", "celery broker", "locks"), "connected")
    refused = four_clients(wrong_name_server.tls_url(1, **params))
    for client, outcome in refused.items():
        assert "certificate is not valid for '127.0.0.1'" in outcome, (client, outcome)
