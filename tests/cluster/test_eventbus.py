"""The event bus on a real 3-primary Redis Cluster: publishing, workers, retries, dead letters, unique
keys, metrics, request/reply, leases and progress, for streams whose slots live on different nodes.

Where each key lives is asked of the cluster itself (``rc.keyslot``, ``rc.get_node_from_key``); what a
worker did is read back from Redis with the raw cluster client, never from the bus's own bookkeeping.
"""

from __future__ import annotations

import asyncio
import json
import signal
import threading
import time
from collections.abc import Iterator

import httpx
import pytest
from redis.cluster import RedisCluster

from eventbus import Bus, DuplicateEvent, Event, Message, RequestFailed, RetryPolicy
from eventbus.errors import SlotUnsafeStream
from streams_app.redis_ops.handler_metrics import handler_metrics
from tests.conftest import session_cookie
from tests.console.views.test_progress_sse import events_url, messages, read
from tests.eventbus.apps import FINISHED
from tests.eventbus.conftest import running, spawn_worker
from tests.polling import wait_for


def on_every_node(rc: RedisCluster, prefix: str) -> list[str]:
    """Three stream names without a hash tag, one whose slot each primary serves."""
    by_port: dict[int, str] = {}
    for n in range(500):
        name = f"{prefix}-{n}"
        by_port.setdefault(rc.get_node_from_key(name).port, name)
        if len(by_port) == 3:
            break
    assert len(by_port) == 3, "the cluster has three primaries"
    return [by_port[port] for port in sorted(by_port)]


def fields_of(rc: RedisCluster, key: str) -> list[dict[bytes, bytes]]:
    return [fields for _, fields in rc.xrange(key)]


@pytest.fixture
def bus(cluster) -> Iterator[Bus]:
    instance = Bus.from_url(cluster.url(), maxlen=None)  # detected, not declared
    yield instance
    instance.close()


def test_publish_reaches_streams_on_every_node(bus: Bus, rc: RedisCluster, cluster) -> None:
    streams = on_every_node(rc, "orders")
    assert bus.cluster
    for n, stream in enumerate(streams):
        bus.publish(stream, "order.created", {"n": n})
        ids = bus.publish_many(stream, [("order.paid", {"n": n, "i": i}) for i in range(5)])
        assert len(ids) == 5 and len(set(ids)) == 5

    async def publish_async() -> list[str | None]:
        return await bus.apublish_many(streams[0], [Message("order.shipped", {"i": i}) for i in range(3)])

    assert len(asyncio.run(publish_async())) == 3
    for n, stream in enumerate(streams):
        entries = fields_of(rc, stream)
        assert [e[b"type"] for e in entries[:6]] == [b"order.created"] + [b"order.paid"] * 5
        assert json.loads(entries[0][b"data"]) == {"n": n}
    assert rc.xlen(streams[0]) == 9
    # The URL may declare the kind instead: the same bus, no probe.
    declared = Bus.from_url(cluster.url(cluster="yes"))
    assert declared.cluster and declared.publish(streams[1], "x") is not None
    declared.close()


def test_a_worker_handles_streams_on_every_node(bus: Bus, rc: RedisCluster) -> None:
    streams = on_every_node(rc, "jobs")
    seen: list[tuple[str, int]] = []
    lock = threading.Lock()
    for stream in streams:

        @bus.on("job", stream=stream, group="workers", start="0")
        def handle(event: Event) -> None:
            with lock:
                seen.append((event.stream, event.data))

    # Also a second group on the first stream, read by its own XREADGROUP.
    audited: list[int] = []

    @bus.on("job", stream=streams[0], group="audit", start="0")
    async def audit(event: Event) -> None:
        audited.append(event.data)

    for stream in streams:
        bus.publish_many(stream, [("job", n) for n in range(20)])
    with running(bus, concurrency=4):
        wait_for(lambda: len(seen) == 60 and len(audited) == 20, what="every job handled by both groups")
        wait_for(lambda: all(rc.xpending(s, "workers")["pending"] == 0 for s in streams), what="all acked")
    assert sorted(seen) == sorted((s, n) for s in streams for n in range(20))
    assert sorted(audited) == list(range(20))
    assert rc.xpending(streams[0], "audit")["pending"] == 0


def test_a_failing_handler_retries_then_dead_letters_in_the_stream_s_slot(bus: Bus, rc: RedisCluster) -> None:
    stream = "payments"  # no hash tag: its retry set and DLQ get one
    retry_key, dlq_key = "{payments}:retry", "{payments}:dlq"
    assert rc.keyslot(retry_key) == rc.keyslot(stream) == rc.keyslot(dlq_key)
    attempts: list[int] = []

    @bus.on("payment", stream=stream, group="ledger", start="0", max_retries=2,
            retry=RetryPolicy(base=0.5, jitter=0.0))
    def book(event: Event) -> None:
        attempts.append(event.retries)
        raise RuntimeError("ledger closed")

    bus.publish(stream, "payment", {"amount": 5})
    with running(bus):
        # The first failure waits half a second in the retry set of the stream's slot.
        wait_for(lambda: rc.zcard(retry_key) == 1, what="the first retry to be scheduled")
        wait_for(lambda: rc.xlen(dlq_key) == 1, what="the payment to be dead-lettered")
        wait_for(lambda: rc.xpending(stream, "ledger")["pending"] == 0, what="nothing pending")
    assert attempts == [0, 1, 2]
    assert rc.zcard(retry_key) == 0
    [dead] = fields_of(rc, dlq_key)
    assert dead[b"dlq_original_stream"] == b"payments" and dead[b"dlq_retries"] == b"2"
    assert dead[b"dlq_error"] == b"RuntimeError: ledger closed"
    # Nothing under the pre-cluster names, which live in other slots.
    assert rc.exists("payments:retry", "payments:dlq") == 0
    assert rc.keyslot("payments:dlq") != rc.keyslot(stream)


def test_unique_keys_dedupe_in_the_stream_s_slot(bus: Bus, rc: RedisCluster) -> None:
    streams = on_every_node(rc, "signups")
    for stream in streams:
        bus.publish(stream, "signup", {"user": 1}, unique_key="user-1")
        with pytest.raises(DuplicateEvent):
            bus.publish(stream, "signup", {"user": 1}, unique_key="user-1")
        ids = bus.publish_many(stream, [Message("signup", {"user": u}, unique_key=f"user-{u}") for u in (1, 2, 3, 2)])
        assert [entry_id is None for entry_id in ids] == [True, False, False, True]
        assert rc.xlen(stream) == 3
        assert rc.keyslot(f"{{{stream}}}:unique") == rc.keyslot(stream)
        assert sorted(rc.zrange(f"{{{stream}}}:unique", 0, -1)) == [b"user-1", b"user-2", b"user-3"]
    assert bus.forget_unique(streams[0], "user-1")

    async def publish_async() -> tuple[list[str | None], str]:
        batch = [Message("signup", {"user": u}, unique_key=f"user-{u}") for u in (1, 4, 4)]
        ids = await bus.apublish_many(streams[0], batch)
        return ids, await bus.apublish(streams[1], "signup", None, unique_key="user-9")

    ids, single = asyncio.run(publish_async())
    assert [entry_id is None for entry_id in ids] == [False, False, True]
    assert [e[b"_unique"] for e in fields_of(rc, streams[0])[3:]] == [b"user-1", b"user-4"]
    assert single.encode() == rc.xrange(streams[1])[-1][0]


def test_a_script_flushed_meanwhile_is_loaded_again(bus: Bus, rc: RedisCluster) -> None:
    stream = on_every_node(rc, "flushed")[2]
    assert bus.publish_many(stream, [Message("a", unique_key="k1")]) != [None]
    rc.script_flush()  # on every primary, as restarts or a failover would
    ids = bus.publish_many(stream, [Message("a", unique_key="k1"), Message("a", unique_key="k2"), ("b", 1)])
    assert [entry_id is None for entry_id in ids] == [True, False, False]
    # The two scripted publishes were answered NOSCRIPT (not run) and re-run after the batch.
    assert [e[b"type"] for e in fields_of(rc, stream)] == [b"a", b"b", b"a"]
    assert ids[1] == rc.xrange(stream)[-1][0].decode()


def test_a_stream_that_cannot_share_its_slot_is_refused_up_front(bus: Bus) -> None:
    @bus.on("x", stream="a}b", group="g")
    def handle(event: Event) -> None: ...

    with pytest.raises(SlotUnsafeStream, match="Rename it"):
        asyncio.run(bus.worker().run())
    with pytest.raises(SlotUnsafeStream):
        bus.publish("a}b", "x", unique_key="k")
    assert bus.publish("a}b", "x")  # a plain publish has one key and works


def test_metrics_of_streams_on_every_node_reach_the_console(bus: Bus, rc: RedisCluster, on_cluster) -> None:
    streams = on_every_node(rc, "metered")
    for stream in streams:

        @bus.on("tick", stream=stream, group="meter", start="0", max_retries=0)
        def tick(event: Event) -> None:
            if event.data == 0:
                raise ValueError("zero")

    for n, stream in enumerate(streams):
        bus.publish_many(stream, [("tick", i) for i in range(n + 3)])
    # A worker of before the cluster naming left one entry in the old shared stream.
    rc.xadd("eventbus:metrics", {"event": "processed", "stream": "legacy", "group": "meter", "type": "tick",
                                 "count": "7", "duration_ms": "7.0", "max_ms": "1.0", "consumer": "old", "ts": "0"})
    with running(bus, metrics_interval=0.05):
        wait_for(lambda: all(rc.xlen(f"{{{s}}}:dlq") == 1 for s in streams), what="each zero dead-lettered")
        wait_for(lambda: all(rc.xpending(s, "meter")["pending"] == 0 for s in streams), what="all acked")
    for stream in streams:
        assert rc.keyslot(f"{{{stream}}}:metrics") == rc.keyslot(stream)

    every = handler_metrics(on_cluster, window_s=300, fresh=True)
    rows = {row.stream: row for row in every.rows}
    assert set(rows) == {s.encode() for s in streams} | {b"legacy"}
    for n, stream in enumerate(streams):
        row = rows[stream.encode()]
        assert (row.processed, row.failed, row.dead_lettered) == (n + 2, 1, 1)
    assert rows[b"legacy"].processed == 7
    assert every.sources == 4 and not every.partial and not every.truncated

    one = handler_metrics(on_cluster, window_s=300, stream=streams[2].encode(), fresh=True)
    [row] = one.for_stream(streams[2].encode())
    assert (row.processed, row.failed) == (4, 1)
    assert {r.stream for r in one.rows} == {streams[2].encode(), b"legacy"}


def test_request_reply_to_streams_on_every_node(bus: Bus, rc: RedisCluster) -> None:
    streams = on_every_node(rc, "quotes")
    for stream in streams:

        @bus.on("quote", stream=stream, group="pricing", start="0", max_retries=0)
        async def quote(event: Event) -> dict[str, object]:
            if event.data["sku"] == "bad":
                raise ValueError("no such sku")
            return {"stream": event.stream, "price": len(event.data["sku"])}

    with running(bus):
        for stream in streams:
            assert bus.request(stream, "quote", {"sku": "abcd"}, timeout=10) == {"stream": stream, "price": 4}
        with pytest.raises(RequestFailed, match="no such sku"):
            bus.request(streams[1], "quote", {"sku": "bad"}, timeout=10)

        async def ask() -> object:
            return await bus.arequest(streams[2], "quote", {"sku": "xy"}, timeout=10)

        assert asyncio.run(ask()) == {"stream": streams[2], "price": 2}
    assert all(rc.xpending(s, "pricing")["pending"] == 0 for s in streams)


def test_leases_heartbeat_and_reclaim_on_a_cluster(bus: Bus, rc: RedisCluster) -> None:
    slow, orphaned = on_every_node(rc, "leases")[:2]
    runs: list[int] = []

    @bus.on("slow", stream=slow, group="g", start="0")
    def work(event: Event) -> None:
        runs.append(event.data)
        time.sleep(1.0)  # five leases long: only heartbeats keep it from being reclaimed

    handled: list[tuple[int, int]] = []

    @bus.on("job", stream=orphaned, group="g", start="0")
    def job(event: Event) -> None:
        handled.append((event.data, event.deliveries))

    bus.ensure_groups()
    bus.publish_many(orphaned, [("job", n) for n in range(3)])
    rc.xreadgroup("g", "ghost", {orphaned: ">"})  # read, never acknowledged
    bus.publish(slow, "slow", 1)
    with running(bus, lease_ms=200), running(bus, lease_ms=200):
        wait_for(lambda: sorted(handled) == [(0, 2), (1, 2), (2, 2)], what="the ghost's entries reclaimed")
        wait_for(lambda: rc.xpending(slow, "g")["pending"] == 0, what="the slow job acked")
    assert runs == [1], "a heartbeated entry is never taken by the other worker"


def test_progress_on_a_cluster_over_sse(bus: Bus, rc: RedisCluster, on_cluster, asgi_server, viewer) -> None:
    task = bus.progress("report-7")
    task.start({"run": 1})
    task.done({"rows": 1})
    task.start({"run": 2})  # a new run replaces the old one, in one step
    task.delta({"step": 1})
    key = b"progress:report-7"
    assert [f[b"event"] for f in fields_of(rc, key)] == [b"start", b"delta"]
    assert 0 < rc.pttl(key) <= 86_400_000
    http = httpx.Client(cookies=session_cookie(viewer), timeout=httpx.Timeout(30.0))
    with http, http.stream("GET", events_url(asgi_server, key, conn=on_cluster)) as response:
        assert response.status_code == 200
        stream = messages(response)
        first = read(stream, 2)
        task.done({"rows": 9})
        rest = list(stream)
    stored = [(i.decode(), f[b"event"].decode(), f[b"data"].decode()) for i, f in rc.xrange(key)]
    assert [(m.id, m.event, m.data) for m in first + rest] == stored
    assert stored[-1][1] == "done" and 0 < rc.pttl(key) <= 3_600_000
    assert [e.event for e in bus.subscribe("report-7")] == ["start", "delta", "done"]


LEGACY_RETRY = """
local fields = {}
for i = 2, #ARGV do fields[#fields + 1] = ARGV[i] end
return redis.call('ZADD', KEYS[1], ARGV[1], cmsgpack.pack(fields))
"""


def test_migrate_moves_old_retries_and_unique_keys_into_the_stream_s_slot(
    bus: Bus, rc: RedisCluster, cluster, capsys
) -> None:
    from eventbus.__main__ import main

    assert rc.keyslot("orders:retry") != rc.keyslot("orders")
    # What a worker before the cluster naming left: a retry due now (as schedule_retry.lua packs one), a held
    # unique key, and a dead letter.
    fields = ["type", "job", "data", "7", "id", "evt-7", "ts", "1", "_retries", "1", "_group", "billing"]
    rc.eval(LEGACY_RETRY, 1, "orders:retry", 1000, *fields)
    expires = int(time.time() * 1000) + 3_600_000
    rc.zadd("orders:unique", {"order-7": expires})
    rc.xadd("orders:dlq", {"type": "job", "data": "8"})

    assert main(["migrate", "--url", cluster.url()]) == 0
    assert "orders: 1 retries and 1 unique keys moved; 1 dead letters left" in capsys.readouterr().out
    assert rc.exists("orders:retry", "orders:unique") == 0
    assert rc.zrange("{orders}:retry", 0, -1, withscores=True)[0][1] == 1000
    assert rc.zscore("{orders}:unique", "order-7") == expires
    with pytest.raises(DuplicateEvent):
        bus.publish("orders", "job", 9, unique_key="order-7")

    seen: list[tuple[object, int]] = []

    @bus.on("job", stream="orders", group="billing", start="$")
    def job(event: Event) -> None:
        seen.append((event.data, event.retries))

    with running(bus):
        wait_for(lambda: seen == [(7, 1)], what="the migrated retry to be pumped and handled")
    assert main(["migrate", "--url", cluster.url()]) == 0  # run again: nothing left to move
    assert "nothing to migrate" in capsys.readouterr().out


def test_a_worker_process_killed_mid_batch_loses_nothing_on_a_cluster(bus: Bus, rc: RedisCluster, cluster) -> None:
    """``python -m eventbus worker`` on the cluster URL (tests/eventbus/apps.py), SIGKILLed, then a survivor."""
    total, args = 200, ("--concurrency", "4", "--prefetch", "8", "--lease-ms", "500", "--block-ms", "100")
    assert rc.get_node_from_key("jobs").port != rc.get_node_from_key(FINISHED).port  # the handler writes across nodes
    bus.publish_many("jobs", [("job", {"n": n}) for n in range(total)])

    def finished() -> list[int]:
        return [int(n) for n in rc.lrange(FINISHED, 0, -1)]

    victim = spawn_worker(cluster.url(), *args, EVENTBUS_TEST_SLEEP="0.01")
    try:
        wait_for(lambda: len(finished()) >= total // 3, timeout=30, what="the first worker to make progress")
    finally:
        victim.kill()
        victim.wait(10)
    pending_at_kill = rc.xpending("jobs", "workers")["pending"]
    assert pending_at_kill > 0, "killed mid-batch: it held entries it had not acknowledged"
    survivor = spawn_worker(cluster.url(), *args, EVENTBUS_TEST_SLEEP="0.001")
    try:
        wait_for(lambda: set(finished()) == set(range(total)) and rc.xpending("jobs", "workers")["pending"] == 0,
                 timeout=30, what="the survivor to finish every job with nothing pending")
    finally:
        survivor.send_signal(signal.SIGTERM)
        assert survivor.wait(20) == 0, survivor.stderr.read().decode() if survivor.stderr else ""
    assert total <= len(finished()) <= total + pending_at_kill
