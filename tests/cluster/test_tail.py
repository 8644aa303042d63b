"""The live tail on a real Redis Cluster: every slot delivered, connections per node, failures said.

Real uvicorn and real 3-primary clusters. Which node holds a key is the cluster's answer
(``get_node_from_key``, ``keyslot``); entry IDs are XADD's replies made through a cluster client;
connection counts are each node's CLIENT LIST. Tests that stop a node or move a slot use a private
cluster of their own, never the shared one.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops.errors import OpsError, RedisRefused
from streams_app.redis_ops.tail import Moved, TailSource
from tests.conftest import session_cookie
from tests.console.live.helpers import entries_until, frame, hub_stats, open_tail, run, until_live, xadd_many
from tests.polling import until
from tests.servers import RedisClusterServers

TAIL_NAMES = ("busconsole-tail-control", "busconsole-tail-reader")


@pytest.fixture
def cookies(viewer) -> dict[str, str]:
    return session_cookie(viewer)


@pytest.fixture(scope="module")
def private_cluster() -> Iterator[RedisClusterServers]:
    """A cluster of this module's own: its tests stop nodes and move slots."""
    servers = RedisClusterServers().start()
    yield servers
    servers.cleanup()


@pytest.fixture
def on_private(settings, private_cluster: RedisClusterServers) -> Iterator[RedisCluster]:
    """The console's ``default`` connection on the private cluster, and a raw client on it."""
    private_cluster.wait_ok()
    settings.BUS_REDIS_URLS = {"default": private_cluster.url()}
    redis_client.reset()
    client = RedisCluster.from_url(private_cluster.url())
    for node in private_cluster.nodes:
        redis.Redis(port=node.port).flushall()
    yield client
    client.close()
    redis_client.reset()


def node_of(rc: RedisCluster, key: bytes) -> str:
    return rc.get_node_from_key(key).name


def keys_on(rc: RedisCluster, node: str, n: int, *, prefix: str) -> list[bytes]:
    """``n`` keys in ``n`` different slots that ``node`` serves (the cluster says which)."""
    out, slots = [], set()
    for i in range(10_000):
        key = f"{prefix}-{i}".encode()
        if node_of(rc, key) == node and rc.keyslot(key) not in slots:
            out.append(key)
            slots.add(rc.keyslot(key))
            if len(out) == n:
                return out
    raise AssertionError(f"no {n} keys on {node}")


def tail_clients(port: int, *, ignore: set[int] = frozenset()) -> list[dict[str, Any]]:
    return [c for c in redis.Redis(port=port).client_list()
            if c["name"].startswith("busconsole-tail") and int(c["id"]) not in ignore]


def as_pairs(raw: list[Any]) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """Raw ``[id, [name, value, ...]]`` entries in the shape redis-py's parsed XRANGE gives."""
    return [(item[0], dict(zip(item[1][0::2], item[1][1::2], strict=True))) for item in raw]


def statuses(frames: list[dict[str, Any]]) -> list[str]:
    return [f["state"] for f in frames if f["type"] == "status"]


def test_tails_of_streams_in_different_slots_and_nodes_receive_every_entry_in_order(
    on_cluster, rc, cluster, asgi_server, cookies
) -> None:
    nodes = [n.name for n in rc.get_primaries()]
    first = keys_on(rc, nodes[0], 2, prefix="a")  # two slots of one node: they cannot share an XREAD
    other = keys_on(rc, nodes[1], 1, prefix="b")
    keys = [*first, *other]
    assert len({rc.keyslot(k) for k in keys}) == 3 and len({node_of(rc, k) for k in keys}) == 2

    async def scenario() -> tuple[dict[bytes, list[str]], dict[bytes, list[str]], list[dict[str, Any]]]:
        async with open_tail(asgi_server, cookies, keys[0]) as t0, open_tail(asgi_server, cookies, keys[1]) as t1, \
                open_tail(asgi_server, cookies, keys[2]) as t2:
            tails = dict(zip(keys, (t0, t1, t2), strict=True))
            for ws in tails.values():
                await until_live(ws)
            sent: dict[bytes, list[str]] = {k: [] for k in keys}
            for i in range(40):  # interleaved, one XADD at a time through the cluster client
                for key in keys:
                    sent[key].append(rc.xadd(key, {"n": str(i)}).decode())
            frames: list[dict[str, Any]] = []
            got = {key: [e["id"] for e in await entries_until(ws, sent[key][-1], frames=frames)]
                   for key, ws in tails.items()}
            return sent, got, frames

    sent, got, frames = run(scenario())
    assert got == sent
    assert statuses(frames) == []  # nothing said "reconnecting" or "stalled" meanwhile


def test_hub_connections_are_bounded_by_nodes_not_clients(settings, on_cluster, rc, cluster, asgi_server,
                                                          cookies) -> None:
    settings.BUSCONSOLE_TAIL_SLOT_READERS_PER_NODE = 0  # every slot polled (tests/cluster/test_tail_slot_readers.py)
    keys = [f"many-{i}".encode() for i in range(20)]
    holders = {node_of(rc, k) for k in keys}
    assert holders == {n.name for n in rc.get_primaries()}  # every node serves some of them
    assert len({rc.keyslot(k) for k in keys}) == 20
    before = {port: {int(c["id"]) for c in tail_clients(port)} for port in cluster.ports}

    async def scenario() -> tuple[dict[int, list[dict[str, Any]]], dict[bytes, list[str]], dict[bytes, list[str]]]:
        opened = [open_tail(asgi_server, cookies, key) for key in keys]
        clients = [await c.__aenter__() for c in opened]
        try:
            for ws in clients:
                await until_live(ws)

            def settled() -> dict[int, list[dict[str, Any]]] | None:
                found = {port: tail_clients(port, ignore=before[port]) for port in cluster.ports}
                readers = [c for conns in found.values() for c in conns if c["name"] == "busconsole-tail-reader"]
                return found if len(readers) >= len(cluster.ports) else None

            found = await until(settled, what="a reader on every node", timeout=20)
            sent = {key: xadd_many(rc, key, 3) for key in keys}
            got = {key: [e["id"] for e in await entries_until(ws, sent[key][-1])]
                   for key, ws in zip(keys, clients, strict=True)}
            found_after = {port: tail_clients(port, ignore=before[port]) for port in cluster.ports}
            for port in cluster.ports:
                found[port] += [c for c in found_after[port] if c["id"] not in {x["id"] for x in found[port]}]
        finally:
            for c in opened:
                await c.__aexit__(None, None, None)
        return found, sent, got

    found, sent, got = run(scenario())
    assert got == sent
    # Per node one blocked reader and one control connection, for 20 clients of 20 streams.
    for port, conns in found.items():
        assert sorted(c["name"] for c in conns) == sorted(TAIL_NAMES), port
    assert sum(len(conns) for conns in found.values()) == 2 * len(cluster.ports) < len(keys)


def test_a_tail_whose_node_stops_says_stalled_then_live_again(on_private, private_cluster, asgi_server,
                                                             cookies) -> None:
    rc = on_private
    key = b"orders"
    port = rc.get_node_from_key(key).port
    node = next(n for n in private_cluster.nodes if n.port == port)

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]], list[str], list[str]]:
        async with open_tail(asgi_server, cookies, key) as ws:
            await until_live(ws)
            first = rc.xadd(key, {"n": "0"}).decode()
            await entries_until(ws, first)
            node.stop()
            down = []
            for _ in range(10):
                down.append(await frame(ws))
                if down[-1].get("state") == "stalled":
                    break
            node.start()  # same port and nodes.conf: it serves its slots again, empty
            await asyncio.to_thread(private_cluster.wait_ok)
            up = [await frame(ws)]
            fresh = RedisCluster.from_url(private_cluster.url())
            try:
                sent = [fresh.xadd(key, {"n": str(i)}).decode() for i in range(1, 4)]
            finally:
                fresh.close()
            got = [e["id"] for e in await entries_until(ws, sent[-1])]
            return down, up, sent, got

    down, up, sent, got = run(scenario())
    assert statuses(down) == ["reconnecting", "stalled"]
    stalled = down[-1]
    assert str(port) in stalled["reason"] and stalled["node"].endswith(f":{port}")
    assert statuses(up) == ["live"]
    assert got == sent


def test_a_resharded_slot_is_followed_without_gap_or_duplicate(on_private, private_cluster, asgi_server,
                                                               cookies) -> None:
    rc = on_private
    key = b"moving"
    slot = rc.keyslot(key)
    source = rc.get_node_from_key(key)
    target = next(n for n in rc.get_primaries() if n.name != source.name)
    src, dst = redis.Redis(port=source.port), redis.Redis(port=target.port)
    src_id, dst_id = src.execute_command("CLUSTER", "MYID").decode(), dst.execute_command("CLUSTER", "MYID").decode()

    def move_slot() -> None:
        """The slot with its key to ``target``, as ``redis-cli --cluster reshard`` does it."""
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", key)
        for node in (dst, src, *(redis.Redis(port=p) for p in private_cluster.ports)):
            node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)

    async def scenario() -> tuple[list[str], list[str], list[dict[str, Any]], dict[str, Any]]:
        async with open_tail(asgi_server, cookies, key) as ws:
            await until_live(ws)
            sent = xadd_many(rc, key, 5)
            frames: list[dict[str, Any]] = []
            got = [e["id"] for e in await entries_until(ws, sent[-1], frames=frames)]
            await asyncio.to_thread(move_slot)
            fresh = RedisCluster.from_url(private_cluster.url())
            try:
                assert fresh.get_node_from_key(key).name == target.name
                sent += xadd_many(fresh, key, 5)
            finally:
                fresh.close()
            got += [e["id"] for e in await entries_until(ws, sent[-1], frames=frames)]
            return sent, got, frames, hub_stats()["default"]

    sent, got, frames, stats = run(scenario())
    assert got == sent
    assert "stalled" not in statuses(frames)
    # The hub followed MOVED: the key is read on the node that owns its slot now (Redis cannot say so).
    assert stats["moves"] >= 1 and stats["nodes"][target.name]["keys"] == 1


def test_a_node_reader_reads_one_xread_per_slot_and_names_where_a_foreign_key_lives(on_cluster, rc) -> None:
    nodes = [n.name for n in rc.get_primaries()]
    a, b = keys_on(rc, nodes[0], 2, prefix="slot")
    [foreign] = keys_on(rc, nodes[1], 1, prefix="far")
    for key in (a, b, foreign):
        for i in range(3):
            rc.xadd(key, {"n": str(i)})

    async def scenario() -> tuple[Any, ...]:
        source = TailSource(on_cluster)
        try:
            layout = await source.layout()
            reader = source.reader(nodes[0])
            try:  # what Redis says of one XREAD over two slots of the same node
                await reader.read([a, b], ["0-0", "0-0"], count=10, block_ms=10)
                together: OpsError | None = None
            except OpsError as exc:
                together = exc
            replies = await reader.read_slots([([a], ["0-0"]), ([b], ["0-0"]), ([foreign], ["0-0"])],
                                              count=10, block_ms=10, blocking=None)
            newest = await source.newest_id(foreign)  # routed to its own node
            return layout, together, replies, newest
        finally:
            await source.aclose()

    layout, together, replies, newest = run(scenario())
    assert all(layout.node_of(k) == node_of(rc, k) for k in (a, b, foreign))
    assert type(together) is RedisRefused and "CROSSSLOT" in together.message
    for key, reply in zip((a, b), replies[:2], strict=True):
        [(got_key, entries)] = reply
        assert got_key == key and as_pairs(entries) == rc.xrange(key)
    moved = replies[2]
    assert isinstance(moved, Moved)
    assert (moved.slot, moved.node) == (rc.keyslot(foreign), node_of(rc, foreign))
    assert newest == rc.xrevrange(foreign, count=1)[0][0].decode()
