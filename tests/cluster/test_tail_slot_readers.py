"""The cluster tail's slot readers: one blocked connection per tailed slot, up to a bound per node.

Real uvicorn, real 3-primary clusters. Which node and slot hold a key is the cluster's answer
(``get_node_from_key``, ``keyslot``); entry IDs are XADD's replies through a cluster client; the
connections are each node's CLIENT LIST, counted by the names the console gives them. A slot is moved
as ``redis-cli --cluster reshard`` moves it (SETSLOT IMPORTING/MIGRATING, MIGRATE, SETSLOT NODE), on a
cluster of this module's own, while a writer keeps adding entries.
"""

from __future__ import annotations

import asyncio
import threading
from collections.abc import Iterator
from typing import Any

import pytest
import redis
from redis.cluster import RedisCluster

from streams_app.redis_ops import client as redis_client
from tests.cluster.test_tail import keys_on, node_of, statuses, tail_clients
from tests.conftest import session_cookie
from tests.console.live.helpers import entries_until, hub_stats, open_tail, run, until_live
from tests.polling import until
from tests.servers import RedisClusterServers

SLOT = "busconsole-tail-slot"
CONTROL = "busconsole-tail-control"
POLLER = "busconsole-tail-reader"


@pytest.fixture
def cookies(viewer) -> dict[str, str]:
    return session_cookie(viewer)


@pytest.fixture(scope="module")
def moving_cluster() -> Iterator[RedisClusterServers]:
    """A cluster of this module's own: its test moves a slot."""
    servers = RedisClusterServers().start()
    yield servers
    servers.cleanup()


class ConnectionWatch:
    """Samples every node's CLIENT LIST in a thread and keeps, per port, the most tail connections seen."""

    def __init__(self, ports: list[int], ignore: dict[int, set[int]]) -> None:
        self.ports, self.ignore = ports, ignore
        self.most_slots = dict.fromkeys(ports, 0)
        self.most_total = dict.fromkeys(ports, 0)
        self.samples = 0
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._run, daemon=True)

    def _run(self) -> None:
        clients = {port: redis.Redis(port=port) for port in self.ports}
        try:
            while not self._stop.wait(0.005):
                for port, client in clients.items():
                    conns = [c for c in client.client_list() if c["name"].startswith("busconsole-tail")
                             and int(c["id"]) not in self.ignore[port]]
                    self.most_slots[port] = max(self.most_slots[port], sum(c["name"] == SLOT for c in conns))
                    self.most_total[port] = max(self.most_total[port], len(conns))
                self.samples += 1
        finally:
            for client in clients.values():
                client.close()

    def __enter__(self) -> ConnectionWatch:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join(10)


def writer(rc: RedisCluster, keys: list[bytes], rounds: int, sent: dict[bytes, list[str]], tag: str) -> threading.Thread:
    """A thread adding ``rounds`` entries to each key, interleaved, one XADD at a time (IDs recorded)."""

    def write() -> None:
        for i in range(rounds):
            for key in keys:
                sent[key].append(rc.xadd(key, {"n": f"{tag}{i}"}).decode())

    thread = threading.Thread(target=write, daemon=True)
    thread.start()
    return thread


def test_each_tailed_slot_gets_its_own_blocked_reader_and_every_entry_comes_once_in_order(
    settings, on_cluster, rc, cluster, asgi_server, cookies
) -> None:
    settings.BUSCONSOLE_TAIL_SLOT_READERS_PER_NODE = 8
    nodes = [n.name for n in rc.get_primaries()]
    keys = [k for i, node in enumerate(nodes) for k in keys_on(rc, node, 4, prefix=f"own{i}")]
    assert len({rc.keyslot(k) for k in keys}) == 12
    ports = {n.name: n.port for n in rc.get_primaries()}
    before = {port: {int(c["id"]) for c in tail_clients(port)} for port in cluster.ports}

    async def scenario() -> tuple[dict[int, list[dict[str, Any]]], dict[bytes, list[str]], dict[bytes, list[str]]]:
        opened = [open_tail(asgi_server, cookies, key) for key in keys]
        clients = [await c.__aenter__() for c in opened]
        try:
            for ws in clients:
                await until_live(ws)

            def blocked() -> dict[int, list[dict[str, Any]]] | None:
                found = {port: tail_clients(port, ignore=before[port]) for port in cluster.ports}
                waiting = [c for conns in found.values() for c in conns if c["name"] == SLOT and c["cmd"] == "xread"]
                return found if len(waiting) == len(keys) else None

            found = await until(blocked, what="a slot reader blocked on every tailed slot", timeout=20)
            sent: dict[bytes, list[str]] = {k: [] for k in keys}
            await asyncio.to_thread(writer(rc, keys, 30, sent, "a").join)
            got = {key: [e["id"] for e in await entries_until(ws, sent[key][-1])]
                   for key, ws in zip(keys, clients, strict=True)}
        finally:
            for c in opened:
                await c.__aexit__(None, None, None)
        return found, sent, got

    found, sent, got = run(scenario())
    assert got == sent
    # Per node: one control connection and one blocked reader per tailed slot, and no polling reader.
    for node in nodes:
        names = sorted(c["name"] for c in found[ports[node]])
        tailed = sum(node_of(rc, k) == node for k in keys)
        assert names == sorted([CONTROL] + [SLOT] * tailed), node


def test_beyond_the_bound_slots_are_polled_and_connections_stay_bounded_as_clients_come_and_go(
    settings, on_cluster, rc, cluster, asgi_server, cookies
) -> None:
    bound = 2
    settings.BUSCONSOLE_TAIL_SLOT_READERS_PER_NODE = bound
    nodes = [n.name for n in rc.get_primaries()]
    per_node = {node: keys_on(rc, node, 5, prefix=f"bound{i}") for i, node in enumerate(nodes)}
    # Opened node by node in this order: the first `bound` keys of a node get its slot readers.
    leaving = [k for keys in per_node.values() for k in keys[:bound]]
    staying = [k for keys in per_node.values() for k in keys[bound:]]
    keys = leaving + staying
    before = {port: {int(c["id"]) for c in tail_clients(port)} for port in cluster.ports}

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], dict[bytes, list[str]], dict[bytes, list[str]],
                                  ConnectionWatch]:
        opened = {key: open_tail(asgi_server, cookies, key) for key in keys}
        clients = {}
        with ConnectionWatch(cluster.ports, before) as watch:
            try:
                for key in keys:
                    clients[key] = await opened[key].__aenter__()
                    await until_live(clients[key])
                first = hub_stats()["default"]["nodes"]
                sent: dict[bytes, list[str]] = {k: [] for k in keys}
                await asyncio.to_thread(writer(rc, keys, 10, sent, "a").join)
                got = {key: [e["id"] for e in await entries_until(ws, sent[key][-1])] for key, ws in clients.items()}
                # The slot readers' clients leave while entries keep coming to the others: their slots take the room.
                more = writer(rc, staying, 40, sent, "b")
                for key in leaving:
                    await opened[key].__aexit__(None, None, None)
                    del opened[key]
                await asyncio.to_thread(more.join)

                def promoted() -> dict[str, Any] | None:
                    now = hub_stats()["default"]["nodes"]
                    done = all((now[n]["keys"], now[n]["slot_readers"], now[n]["polled_keys"]) == (3, bound, 3 - bound)
                               for n in nodes)
                    return now if done else None

                then = await until(promoted, what="polled slots to take the room left", timeout=20)
                await asyncio.to_thread(writer(rc, staying, 10, sent, "c").join)
                for key in staying:
                    got[key] += [e["id"] for e in await entries_until(clients[key], sent[key][-1])]
            finally:
                for c in opened.values():
                    await c.__aexit__(None, None, None)
        return first, then, sent, got, watch

    first, then, sent, got, watch = run(scenario())
    assert got == {key: sent[key] for key in keys}  # every entry once, in order, across the hand-offs
    for node in nodes:
        assert (first[node]["slot_readers"], first[node]["polled_keys"]) == (bound, 5 - bound), node
        assert (then[node]["slot_readers"], then[node]["polled_keys"]) == (bound, 3 - bound), node
    assert watch.samples > 0
    for port in cluster.ports:  # slot readers, the control connection and the polling reader
        assert watch.most_slots[port] == bound, port
        assert watch.most_total[port] <= bound + 2, port


def test_a_slot_moved_while_entries_keep_coming_loses_and_repeats_nothing(
    settings, moving_cluster, asgi_server, cookies
) -> None:
    settings.BUSCONSOLE_TAIL_SLOT_READERS_PER_NODE = 8
    moving_cluster.wait_ok()
    settings.BUS_REDIS_URLS = {"default": moving_cluster.url()}
    redis_client.reset()
    rc = RedisCluster.from_url(moving_cluster.url())
    keys = [b"{mv}a", b"{mv}b"]  # one slot, two streams
    slot = rc.keyslot(keys[0])
    source = rc.get_node_from_key(keys[0])
    target = next(n for n in rc.get_primaries() if n.name != source.name)
    src, dst = redis.Redis(port=source.port), redis.Redis(port=target.port)
    src_id, dst_id = src.execute_command("CLUSTER", "MYID").decode(), dst.execute_command("CLUSTER", "MYID").decode()
    for key in keys:
        rc.xadd(key, {"n": "before"})

    def move_slot() -> None:
        """The slot with its keys to ``target``, as ``redis-cli --cluster reshard`` does it."""
        dst.execute_command("CLUSTER", "SETSLOT", slot, "IMPORTING", src_id)
        src.execute_command("CLUSTER", "SETSLOT", slot, "MIGRATING", dst_id)
        for key in keys:
            src.execute_command("MIGRATE", "127.0.0.1", target.port, "", 0, 5000, "KEYS", key)
        for node in (dst, src, *(redis.Redis(port=p) for p in moving_cluster.ports)):
            node.execute_command("CLUSTER", "SETSLOT", slot, "NODE", dst_id)

    async def scenario() -> tuple[dict[bytes, list[str]], dict[bytes, list[str]], list[dict[str, Any]],
                                  dict[str, Any], list[dict[str, Any]], list[dict[str, Any]]]:
        async with open_tail(asgi_server, cookies, keys[0]) as t0, open_tail(asgi_server, cookies, keys[1]) as t1:
            tails = dict(zip(keys, (t0, t1), strict=True))
            for ws in tails.values():
                await until_live(ws)
            sent: dict[bytes, list[str]] = {k: [] for k in keys}
            own = RedisCluster.from_url(moving_cluster.url())  # the writer's: it follows ASK and MOVED
            try:
                writing = writer(own, keys, 60, sent, "m")
                await asyncio.to_thread(move_slot)
                await asyncio.to_thread(writing.join)
            finally:
                own.close()
            frames: list[dict[str, Any]] = []
            got = {key: [e["id"] for e in await entries_until(ws, sent[key][-1], frames=frames)]
                   for key, ws in tails.items()}
            stats = hub_stats()["default"]
            await until(lambda: not any(c["name"] == SLOT for c in tail_clients(source.port)),
                        what="the old node's slot reader to go", timeout=20)
            return sent, got, frames, stats, tail_clients(source.port), tail_clients(target.port)

    try:
        sent, got, frames, stats, on_source, on_target = run(scenario())
    finally:
        rc.close()
        redis_client.reset()
    assert rc.keyslot(keys[1]) == slot and len(sent[keys[0]]) == 60
    assert got == sent  # every entry written before, during and after the move, once, in order
    assert "stalled" not in statuses(frames)
    assert stats["moves"] >= 2 and stats["nodes"][target.name]["keys"] == 2
    assert stats["nodes"][target.name]["slot_readers"] == 1
    assert [c["name"] for c in on_target].count(SLOT) == 1
    assert not [c for c in on_source if c["name"] == SLOT]
