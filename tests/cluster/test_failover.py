"""Redis Cluster with replicas: a primary is killed (SIGKILL), the cluster promotes its replica, and the
console carries on: the live tail, the listings and the actions, on the keys the dead primary served.

A cluster of the test's own: three primaries with one replica each (``--cluster-replicas 1``) and a short
``cluster-node-timeout``. Which node serves a key and which replica follows which primary are the
cluster's own answers (``CLUSTER NODES``, ``INFO replication``); entry IDs are XADD's replies; what the
actions did is read back from the promoted node with a plain client. Writes made before the kill are
waited for until the replica's replication offset reaches its primary's (asynchronous replication would
otherwise lose the last of them with the primary, and the test would measure that, not the console).
"""

from __future__ import annotations

from collections.abc import Iterator
from typing import Any

import pytest
import redis
from django.test import Client
from redis.cluster import RedisCluster

from streams_app.redis_ops import client as redis_client
from tests.conftest import session_cookie
from tests.console.helpers import api, dlq_url, group_url, post_json
from tests.console.live.helpers import entries_of, frame, open_tail, run, until_live, xadd_many
from tests.console.services.helpers import eventbus_dead_letter
from tests.polling import until, wait_for
from tests.servers import RedisClusterServers, RedisServer, kill

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def replicated_cluster(settings) -> Iterator[RedisClusterServers]:
    """Three primaries, a replica each, a 1 s node timeout; the console's ``default`` connection on it."""
    servers = RedisClusterServers(replicas=1, node_timeout_ms=1000).start()
    settings.BUS_REDIS_URLS = {"default": servers.url()}
    redis_client.reset()
    try:
        yield servers
    finally:
        redis_client.reset()
        servers.cleanup()


def replication(port: int) -> dict[str, Any]:
    client = redis.Redis(port=port)
    try:
        return client.info("replication")
    finally:
        client.close()


def replica_of(servers: RedisClusterServers, primary: RedisServer) -> RedisServer:
    """The node replicating ``primary``, as the replicas say."""
    return next(node for node in servers.nodes
                if replication(node.port).get("role") == "slave" and replication(node.port).get("master_port") == primary.port)


def synced(primary: RedisServer, replica: RedisServer) -> bool:
    """Whether the replica has everything the primary wrote (replication offsets equal)."""
    return replication(replica.port).get("slave_repl_offset") == replication(primary.port)["master_repl_offset"]


def test_a_killed_primary_s_replica_takes_over_and_the_tail_listings_and_actions_carry_on(
    replicated_cluster: RedisClusterServers, viewer, operator, api_token, asgi_server
) -> None:
    servers = replicated_cluster
    rc = RedisCluster.from_url(servers.url())
    victim_name = rc.get_node_from_key(b"orders").name
    victim = next(node for node in servers.nodes if f"127.0.0.1:{node.port}" == victim_name)
    heir = replica_of(servers, victim)
    streams = [f"stream-{i}" for i in range(12)] + ["orders", "{orders}:dlq"]
    for key in streams[:12]:
        rc.xadd(key, {"n": "1"})
    assert {rc.get_node_from_key(key).name for key in streams} == {n.name for n in rc.get_primaries()}
    ids = xadd_many(rc, b"orders", 6)
    rc.xgroup_create("orders", "billing", id="0")
    rc.xreadgroup("billing", "worker-1", {"orders": ">"}, count=4)
    dlq_id = rc.xadd("{orders}:dlq", eventbus_dead_letter(0, ids[0])).decode()
    cookies = session_cookie(viewer)
    token = api_token(operator)
    web = Client()
    web.force_login(viewer)
    assert web.get(api("/c/default/streams/?count=100")).json()["complete"] is True  # the console saw it whole

    async def scenario() -> tuple[list[str], list[str], list[dict[str, Any]]]:
        async with open_tail(asgi_server, cookies, b"orders") as ws:
            await until_live(ws)
            before = xadd_many(rc, b"orders", 5)
            await until(lambda: synced(victim, heir), what="the replica to have every write", timeout=20)
            kill(victim)
            await until(lambda: replication(heir.port).get("role") == "master", what="the replica's promotion",
                        timeout=60, step=0.05)
            await until(lambda: _cluster_ok(servers), what="the cluster to be ok again", timeout=60)
            fresh = RedisCluster(host="127.0.0.1", port=heir.port)  # the test's own, met through a live node
            try:
                after = xadd_many(fresh, b"orders", 5)
            finally:
                fresh.close()
            frames: list[dict[str, Any]] = []
            got: list[str] = []
            while after[-1] not in got:
                frames.append(await frame(ws))
                got += [e["id"] for e in entries_of(frames[-1:])]
            return before + after, got, frames

    sent, got, frames = run(scenario())
    assert got == sent, "the tail lost or repeated an entry across the promotion"
    assert {f["state"] for f in frames if f["type"] == "status"} <= {"reconnecting", "stalled", "live"}

    listed = wait_for(lambda: (lambda r: r if r["complete"] else None)(
        web.get(api("/c/default/streams/?count=100")).json()), what="a complete listing", timeout=30)
    assert sorted(s["key"] for s in listed["streams"]) == sorted(streams)
    assert listed["missed"] == []

    promoted = redis.Redis(port=heir.port)
    pending = [p["message_id"].decode() for p in promoted.xpending_range("orders", "billing", "-", "+", 10)]
    assert pending == ids[:4]
    claim = post_json(api(group_url("orders", "billing") + "claim"),
                      {"ids": pending[:2], "consumer": "worker-2", "min_idle_ms": 0}, token)
    assert claim.status_code == 200, claim.content
    assert claim.json()["claimed"] == pending[:2]
    ack = post_json(api(group_url("orders", "billing") + "ack"), {"ids": pending[:3]}, token)
    assert ack.status_code == 200 and ack.json()["acked"] == 3, ack.content
    assert [(p["message_id"].decode(), p["consumer"].decode())
            for p in promoted.xpending_range("orders", "billing", "-", "+", 10)] == [(ids[3], "worker-1")]
    requeue = post_json(api(dlq_url("{orders}:dlq") + "requeue"), {"ids": [dlq_id]}, token)
    assert requeue.status_code == 200, requeue.content
    [moved] = requeue.json()["requeued"]
    assert promoted.xrange("orders", moved["new_id"], moved["new_id"])[0][1][b"_requeued_from"] == dlq_id.encode()
    assert promoted.xlen("{orders}:dlq") == 0
    rc.close()


def _cluster_ok(servers: RedisClusterServers) -> bool:
    for node in servers.nodes:
        if node.process is not None and redis.Redis(port=node.port).cluster("info").get("cluster_state") != "ok":
            return False
    return True



def test_listings_name_every_stream_as_soon_as_the_replica_is_promoted(
    replicated_cluster: RedisClusterServers, viewer_client: Client
) -> None:
    servers = replicated_cluster
    rc = RedisCluster.from_url(servers.url())
    keys = sorted(f"stream-{i}" for i in range(12))
    for key in keys:
        rc.xadd(key, {"n": "1"})
    victim_name = rc.get_node_from_key(b"stream-0").name
    victim = next(node for node in servers.nodes if f"127.0.0.1:{node.port}" == victim_name)
    heir = replica_of(servers, victim)
    rc.close()
    assert viewer_client.get(api("/c/default/streams/?count=100")).json()["complete"] is True
    wait_for(lambda: synced(victim, heir), what="the replica to have every write", timeout=20)
    kill(victim)
    wait_for(lambda: replication(heir.port).get("role") == "master", what="the replica's promotion", timeout=60,
             step=0.05)
    wait_for(lambda: _cluster_ok(servers), what="the cluster to be ok again", timeout=60)

    # Nothing else has used the console's client since the kill: the first listing finds the new primary.
    listed = viewer_client.get(api("/c/default/streams/?count=100")).json()
    assert (listed["complete"], listed["missed"]) == (True, [])
    assert sorted(s["key"] for s in listed["streams"]) == keys
    page = viewer_client.get("/c/default/streams/?live=1").content.decode()
    assert "Partial:" not in page and all(key in page for key in keys)


def test_an_action_on_the_promoted_node_s_keys_works_at_once(
    replicated_cluster: RedisClusterServers, operator, api_token
) -> None:
    servers = replicated_cluster
    rc = RedisCluster.from_url(servers.url())
    ids = xadd_many(rc, b"orders", 6)
    rc.xgroup_create("orders", "billing", id="0")
    rc.xreadgroup("billing", "worker-1", {"orders": ">"}, count=4)
    victim_name = rc.get_node_from_key(b"orders").name
    victim = next(node for node in servers.nodes if f"127.0.0.1:{node.port}" == victim_name)
    heir = replica_of(servers, victim)
    rc.close()
    token = api_token(operator)
    ack_url = api(group_url("orders", "billing") + "ack")
    assert post_json(ack_url, {"ids": [ids[5]]}, token).json() == {"acked": 0}  # the console met the node
    wait_for(lambda: synced(victim, heir), what="the replica to have every write", timeout=20)
    kill(victim)
    wait_for(lambda: replication(heir.port).get("role") == "master", what="the replica's promotion", timeout=60,
             step=0.05)
    wait_for(lambda: _cluster_ok(servers), what="the cluster to be ok again", timeout=60)

    # The first request after the promotion is a MULTI on the key's primary (no page was read before).
    claim = post_json(api(group_url("orders", "billing") + "claim"),
                      {"ids": ids[:2], "consumer": "worker-2", "min_idle_ms": 0}, token)
    assert claim.status_code == 200, claim.content
    assert claim.json()["claimed"] == ids[:2]
    promoted = redis.Redis(port=heir.port)
    assert [(p["message_id"].decode(), p["consumer"].decode())
            for p in promoted.xpending_range("orders", "billing", "-", "+", 10)] == [
        (ids[0], "worker-2"), (ids[1], "worker-2"), (ids[2], "worker-1"), (ids[3], "worker-1")]
