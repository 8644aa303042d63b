"""Every client of the project reaches its Redis through real sentinels: the console's monitored
connections (pages, API, actions, the live tail), the event bus (``Bus.from_url``, ``python -m eventbus``).

What each reads is checked against a plain client on the primary the sentinels name; what each writes
is read back from that primary. Nothing here kills a server (see ``test_failover.py``).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys

import pytest
import redis
from django.test import Client

from eventbus import Bus
from tests.conftest import session_cookie
from tests.console.helpers import api, dlq_url, post_json, stream_api
from tests.console.live.helpers import entries_until, open_tail, run, until_live, xadd_many
from tests.eventbus.conftest import running
from tests.polling import wait_for
from tests.servers import REPO, SentinelServers


def test_pages_and_the_api_read_a_monitored_connection_through_sentinel(
    on_sentinel: redis.Redis, sentinels: SentinelServers, viewer_client: Client
) -> None:
    primary = on_sentinel
    ids = xadd_many(primary, b"orders", 5)
    primary.xadd("payments", {"n": "1"})
    primary.set("not-a-stream", "x")

    [conn] = viewer_client.get(api("/connections/")).json()["connections"]
    assert conn["ok"] is True, conn
    assert conn["redis_version"] == primary.info("server")["redis_version"]
    assert sentinels.service in conn["host"] and str(sentinels.sentinels[0].port) in conn["host"]
    listed = viewer_client.get(api("/c/default/streams/")).json()["streams"]
    assert sorted(s["key"] for s in listed) == ["orders", "payments"]
    entries = viewer_client.get(stream_api("orders", "entries/?order=asc")).json()["entries"]
    assert [e["id"] for e in entries] == ids
    page = viewer_client.get("/c/default/streams/orders/")
    assert page.status_code == 200 and ids[-1] in page.content.decode()


def test_an_action_writes_to_the_primary_through_sentinel(
    on_sentinel: redis.Redis, operator, api_token
) -> None:
    primary = on_sentinel
    dlq_id = primary.xadd("orders:dlq", {
        "type": "order.created", "data": json.dumps({"order_id": 7}), "dlq_original_stream": "orders",
        "dlq_original_id": "1-1", "dlq_group": "billing", "dlq_error": "boom", "dlq_retries": "5",
        "dlq_failed_at": "1700000000000",
    }).decode()
    reply = post_json(api(dlq_url("orders:dlq") + "requeue"), {"ids": [dlq_id]}, api_token(operator))
    assert reply.status_code == 200, reply.content
    [moved] = reply.json()["requeued"]
    [(new_id, fields)] = primary.xrange("orders")
    assert new_id.decode() == moved["new_id"] and fields[b"_requeued_from"] == dlq_id.encode()
    assert primary.xlen("orders:dlq") == 0


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_the_live_tail_reads_through_sentinel(on_sentinel: redis.Redis, viewer, asgi_server) -> None:
    primary = on_sentinel
    primary.xadd("clicks", {"n": "0"})
    cookies = session_cookie(viewer)

    async def scenario() -> tuple[list[str], list[str]]:
        async with open_tail(asgi_server, cookies, b"clicks") as ws:
            await until_live(ws)
            sent = xadd_many(primary, b"clicks", 10)
            return sent, [e["id"] for e in await entries_until(ws, sent[-1])]

    sent, got = run(scenario())
    assert got == sent


def test_the_bus_publishes_and_its_workers_handle_through_sentinel(sentinels: SentinelServers) -> None:
    primary = redis.Redis(port=sentinels.primary().port, db=2)
    primary.flushdb()
    bus = Bus.from_url(sentinels.url(2), maxlen=None)
    handled: list[str] = []

    @bus.on("order.created", stream="orders", group="billing")
    def charge(event) -> None:
        handled.append(event.data["order_id"])

    try:
        bus.ensure_groups()  # before the first publish: the group starts at the stream's end ($)
        with running(bus):
            entry_ids = [bus.publish("orders", "order.created", {"order_id": f"o-{i}"}) for i in range(20)]
            wait_for(lambda: len(handled) >= 20, what="the worker to handle 20 events", timeout=30)
        assert [e.decode() for e, _ in primary.xrange("orders")] == entry_ids
        assert sorted(handled) == sorted(f"o-{i}" for i in range(20))
        assert primary.xinfo_groups("orders")[0]["pending"] == 0
    finally:
        bus.close()
        primary.close()


def test_python_m_eventbus_publishes_through_sentinel(sentinels: SentinelServers) -> None:
    primary = redis.Redis(port=sentinels.primary().port, db=3)
    primary.flushdb()
    done = subprocess.run(
        [sys.executable, "-m", "eventbus", "publish", "--url", sentinels.url(3), "orders", "order.created",
         '{"order_id": 9}'],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=60,
    )
    assert done.returncode == 0, done.stderr
    [(entry_id, fields)] = primary.xrange("orders")
    assert entry_id.decode() in done.stdout
    assert json.loads(fields[b"data"]) == {"order_id": 9}
    primary.close()
