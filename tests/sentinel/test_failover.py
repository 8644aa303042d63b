"""A real failover: the primary is killed (SIGKILL), the sentinels promote the replica, and the console,
its jobs and the bus carry on.

Each test has a deployment of its own (a primary, a replica, three sentinels). Writers in the tests are
independent of the code under test (redis-py's own Sentinel client) and retry until Redis takes the
write. Replication is asynchronous, so a write the primary took but had not yet sent to the replica is
lost with it: a write counts as acknowledged once ``WAIT 1`` says the replica has it, and only those are
required to survive. Expected values are what the new primary holds (read with a plain client after
the failover) and what the writers were acknowledged.
"""

from __future__ import annotations

import asyncio
import json
import threading
import time
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from typing import Any

import pytest
import redis
import redis.sentinel
from django.test import Client

from eventbus import Bus, DuplicateEvent
from eventbus.connection import REDIS_ERRORS
from streams_app import services
from streams_app.redis_ops import client as redis_client
from tests.conftest import session_cookie
from tests.console.celery_procs import Worker, celery_env
from tests.console.helpers import api
from tests.console.jobs.helpers import dead_letters, field_values, finished
from tests.console.live.helpers import entries_of, frame, open_tail, run, until_live
from tests.eventbus.conftest import running
from tests.polling import until, wait_for
from tests.servers import SentinelServers

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def on_failover(settings, failover: SentinelServers) -> Iterator[SentinelServers]:
    """The console's ``default`` connection on this test's own Sentinel deployment (db 0)."""
    settings.BUS_REDIS_URLS = {"default": failover.url(0)}
    redis_client.reset()
    yield failover
    redis_client.reset()


def sentinel_client(servers: SentinelServers, db: int = 0) -> redis.Redis:
    """redis-py's own Sentinel client of the service's primary: the tests' writer, independent of the console."""
    sentinel = redis.sentinel.Sentinel([("127.0.0.1", s.port) for s in servers.sentinels], socket_timeout=1)
    return sentinel.master_for(servers.service, db=db, socket_timeout=1, socket_connect_timeout=1)


def replicated(client: redis.Redis) -> bool:
    """WAIT 1: whether the replica has every write of this connection (the premise of 'acknowledged')."""
    return int(client.execute_command("WAIT", 1, 2000)) >= 1


@dataclass
class Writer:
    """XADDs to ``key`` in a thread until stopped, each write retried until Redis takes it."""

    client: redis.Redis
    key: str
    acked: list[str] = field(default_factory=list)  # the replica had it (WAIT 1): must survive
    unconfirmed: list[str] = field(default_factory=list)  # taken by a primary that died before WAIT said so
    failures: int = 0
    stop: threading.Event = field(default_factory=threading.Event)

    def run(self) -> None:
        n = 0
        while not self.stop.is_set():
            try:
                pipe = self.client.pipeline(transaction=False)  # one connection: WAIT covers this XADD
                pipe.xadd(self.key, {"n": str(n)})
                pipe.execute_command("WAIT", 1, 1000)
                entry_id, replicas = pipe.execute()
            except redis.RedisError:
                self.failures += 1
                time.sleep(0.05)
                continue
            (self.acked if int(replicas) >= 1 else self.unconfirmed).append(entry_id.decode())
            n += 1
            time.sleep(0.005)

    @contextmanager
    def running(self) -> Iterator[Writer]:
        thread = threading.Thread(target=self.run, name=f"writer-{self.key}", daemon=True)
        thread.start()
        try:
            yield self
        finally:
            self.stop.set()
            thread.join(30)
        assert not thread.is_alive()


def xrange_all(client: redis.Redis, key: str) -> list[str]:
    """Every entry ID of ``key``, read in pages."""
    out: list[str] = []
    start = "-"
    while True:
        page = client.xrange(key, start, "+", count=1000)
        out += [entry_id.decode() for entry_id, _ in page]
        if len(page) < 1000:
            return out
        start = "(" + out[-1]


@pytest.mark.slow
def test_pages_say_failing_over_while_the_primary_is_down_and_read_the_new_one_after(
    on_failover: SentinelServers, viewer_client: Client
) -> None:
    servers = on_failover
    writer = sentinel_client(servers)
    entry = writer.xadd("orders", {"n": "1"}).decode()
    assert replicated(writer)
    assert viewer_client.get("/c/default/streams/").status_code == 200
    # The replica may not be promoted until the test has seen the pages with no primary.
    replicas = [node for node in servers.data if node.port != servers.primary_port()]
    for replica in replicas:
        redis.Redis(port=replica.port).config_set("replica-priority", 0)
    old = servers.kill_primary()

    page = viewer_client.get("/c/default/streams/")
    assert page.status_code == 503 and "failing over" in page.content.decode()
    reply = viewer_client.get(api("/c/default/streams/"))
    assert reply.status_code == 503 and reply.json()["error"]["code"] == "unreachable"
    assert "failing over" in reply.json()["error"]["message"]
    overview = viewer_client.get("/")
    assert overview.status_code == 200 and "failing over" in overview.content.decode()

    for replica in replicas:
        redis.Redis(port=replica.port).config_set("replica-priority", 100)
    assert servers.wait_failover(old) in replicas
    listed = wait_for(lambda: viewer_client.get(api("/c/default/streams/")), what="the API on the new primary",
                      timeout=30)
    assert [s["key"] for s in listed.json()["streams"]] == ["orders"]
    assert entry in viewer_client.get("/c/default/streams/orders/").content.decode()


@pytest.mark.slow
def test_the_tail_resumes_after_a_failover_with_no_gap_and_no_duplicate(
    on_failover: SentinelServers, viewer, asgi_server
) -> None:
    servers = on_failover
    cookies = session_cookie(viewer)
    writer = Writer(sentinel_client(servers), "orders")
    writer.client.xadd("orders", {"n": "start"})

    async def scenario() -> tuple[list[str], list[dict[str, Any]], SentinelServers]:
        async with open_tail(asgi_server, cookies, b"orders") as ws:
            await until_live(ws)
            frames: list[dict[str, Any]] = []
            with writer.running():
                await until(lambda: len(writer.acked) >= 50, what="50 writes before the kill", timeout=30)
                old = servers.kill_primary()
                promoted = await asyncio.to_thread(servers.wait_failover, old)
                after = len(writer.acked)
                await until(lambda: len(writer.acked) >= after + 50, what="50 writes after the failover",
                            timeout=60)
            last = writer.acked[-1]
            got: list[str] = []
            while last not in got:
                frames.append(await frame(ws))
                got += [e["id"] for e in entries_of(frames[-1:])]
            while _states(frames)[-1:] != ["live"]:  # said after the round that brought the entries
                frames.append(await frame(ws))
                got += [e["id"] for e in entries_of(frames[-1:])]
            return got, frames, promoted

    got, frames, promoted = run(scenario())
    held = xrange_all(redis.Redis(port=promoted.port), "orders")[1:]  # the new primary's, after "start"
    assert writer.failures > 0, "the writer must have met the failover"
    assert len(got) == len(set(got)), "an entry was delivered twice"
    assert got == sorted(got, key=lambda i: tuple(map(int, i.split("-"))))
    assert set(writer.acked) <= set(held), "an acknowledged write did not survive the failover"
    assert [i for i in got if i in set(held)] == held, "an entry of the new primary never reached the tail"
    lost = set(got) - set(held)  # delivered from the old primary, which died before the replica had them
    assert not lost & set(writer.acked)
    states = _states(frames)
    assert states[0] == "reconnecting" and set(states[:-1]) <= {"reconnecting", "stalled"}, states


def _states(frames: list[dict[str, Any]]) -> list[str]:
    return [f["state"] for f in frames if f["type"] == "status"]


@pytest.mark.slow
def test_a_requeue_job_running_through_a_failover_finishes_with_exact_counts(
    on_failover: SentinelServers, operator, django_db_blocker
) -> None:
    servers = on_failover
    writer = sentinel_client(servers)
    ids = dead_letters(writer, 3000)
    assert replicated(writer)
    job = services.dlq_requeue_all(user=operator, conn="default", key=b"orders:dlq", up_to=ids[-1], batch=1)
    worker = Worker("failover", celery_env(BUS_REDIS_URLS=f"default={servers.url(0)}", BUSCONSOLE_JOB_LOCK_S="2"))
    try:
        wait_for(lambda: writer.xlen("orders") >= 300, what="the job to requeue 300 entries", timeout=60, step=0.01)
        assert writer.xlen("orders:dlq") > 0, "the job must be running when the primary dies"
        old = servers.kill_primary()
        promoted = servers.wait_failover(old)
        done = wait_for(lambda: finished(job.pk), what="the job to finish after the failover", timeout=120,
                        step=0.1)
    finally:
        worker.stop()
    primary = redis.Redis(port=promoted.port)
    assert done.state == "done", done.error
    assert primary.xlen("orders:dlq") == 0
    markers = [m.decode() for m in field_values(primary, "orders", b"_requeued_from")]
    assert sorted(markers) == sorted(ids)  # each dead letter requeued exactly once
    assert (done.done, done.total) == (primary.xlen("orders"), 3000)


@pytest.mark.slow
def test_bus_workers_lose_nothing_through_a_failover(failover: SentinelServers) -> None:
    servers = failover
    # One connection in the publisher's pool, so its WAIT follows its own publish on the same socket.
    bus = Bus.from_url(servers.url(4), maxlen=None, redis_kwargs={"max_connections": 1, "socket_timeout": 1})
    handled: set[int] = set()
    lock = threading.Lock()

    @bus.on("order.created", stream="orders", group="billing")
    def charge(event) -> None:
        with lock:
            handled.add(event.data["n"])

    acked: list[int] = []
    failures = 0

    def publish(n: int) -> None:
        """The bus's own publish, retried with the same unique key until Redis has it."""
        nonlocal failures
        while True:
            try:
                bus.publish("orders", "order.created", {"n": n}, unique_key=f"order-{n}")
            except DuplicateEvent:
                pass  # an earlier try went through (its reply was lost) and survived
            except REDIS_ERRORS:
                failures += 1
                time.sleep(0.05)
                continue
            try:
                if replicated(bus.client):
                    acked.append(n)
            except REDIS_ERRORS:
                failures += 1
            return

    try:
        bus.ensure_groups()
        with running(bus, lease_ms=2000):
            for n in range(100):
                publish(n)
            old = servers.kill_primary()
            for n in range(100, 200):  # the first of these wait out the failover
                publish(n)
            promoted = servers.wait_failover(old)
            for n in range(200, 300):
                publish(n)
            wait_for(lambda: set(acked) <= handled, what="every acknowledged event to be handled", timeout=90)
        held = redis.Redis(port=promoted.port, db=4)
        stored = {json.loads(f[b"data"])["n"] for _, f in held.xrange("orders")}
    finally:
        bus.close()
    assert failures > 0, "the publisher must have met the failover"
    assert set(acked) <= stored and set(acked) <= handled
    assert stored <= handled, "an event the new primary holds was never handled"
