"""The connection layer on a real cluster: detection, declaration, per-node and per-slot clients."""

from __future__ import annotations

import pytest
import redis
from redis.cluster import RedisCluster

from eventbus.connection import split_mode
from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops.errors import Unreachable


def test_a_cluster_is_detected_and_routes_every_key(on_cluster, rc):
    keys = [f"stream-{i}".encode() for i in range(30)]
    for key in keys:
        rc.xadd(key, {"n": key})
    client = redis_client.get_client(on_cluster)
    assert isinstance(client, RedisCluster)
    # every key answers through the one client, raw replies included, whatever its node
    for key in keys:
        [(entry_id, fields)] = client.xrange(key)
        assert fields == [b"n", key]
    # the keys are really spread: more than one primary holds some
    holders = {rc.get_node_from_key(key).name for key in keys}
    assert len(holders) > 1


def test_primaries_are_every_node_once_each_counting_its_own_keys(on_cluster, rc, cluster):
    for i in range(50):
        rc.xadd(f"k{i}", {"f": "v"})
    nodes = redis_client.primaries(on_cluster)
    assert sorted(node.port for node in nodes) == sorted(cluster.ports)
    assert sum(node.client.dbsize() for node in nodes) == 50
    # slot order: the node serving slot 0 comes first
    assert rc.get_node_from_key("{06S}").port == nodes[0].port  # "06S" hashes to slot 0


def test_key_client_runs_multi_and_scripts_on_the_key_s_node(on_cluster, rc):
    stream, dlq = b"{orders}", b"{orders}:dlq"
    assert redis_client.same_slot(on_cluster, stream, dlq)
    assert not redis_client.same_slot(on_cluster, b"orders", b"payments")
    node = redis_client.key_client(on_cluster, stream)
    pipe = node.pipeline(transaction=True)
    pipe.xadd(stream, {"a": "1"})
    pipe.xadd(dlq, {"b": "2"})
    pipe.execute()
    assert rc.xlen(stream) == 1 and rc.xlen(dlq) == 1
    assert node.eval("return redis.call('XLEN', KEYS[1]) + redis.call('XLEN', KEYS[2])", 2, stream, dlq) == 2


def test_declared_standalone_on_a_cluster_node_is_taken_at_its_word(settings, cluster):
    settings.BUS_REDIS_URLS = {"default": cluster.url(cluster="no")}
    redis_client.reset()
    assert isinstance(redis_client.get_client("default"), redis.Redis)
    assert redis_client.connection("default").declared == "standalone"


def test_an_unknown_cluster_value_is_a_configuration_error():
    with pytest.raises(ValueError, match="cluster="):
        split_mode("redis://127.0.0.1:1/0?cluster=maybe")  # the one reading, the console's client uses it


def test_a_declared_cluster_that_is_down_is_unreachable_not_a_crash(settings):
    from tests.servers import free_port

    settings.BUS_REDIS_URLS = {"default": f"redis://127.0.0.1:{free_port()}/0?cluster=yes"}
    redis_client.reset()
    with pytest.raises(Unreachable):
        redis_client.get_client("default")


def test_health_answers_from_a_primary(on_cluster):
    health = redis_client.health(on_cluster, fresh=True)
    assert health.ok and health.redis_version.startswith("7.")


def test_the_settings_refuse_an_unknown_cluster_value_at_start_up():
    from django.core.exceptions import ImproperlyConfigured

    from busconsole.env import parse_connections

    assert parse_connections("a=redis://h:1/0?cluster=yes,b=redis://h:2/0") == {
        "a": "redis://h:1/0?cluster=yes", "b": "redis://h:2/0"
    }
    with pytest.raises(ImproperlyConfigured, match="cluster='maybe'"):
        parse_connections("a=redis://h:1/0?cluster=maybe")
