"""The retries page and its actions on a real 3-primary Redis Cluster: ``{S}:retry``, ``S`` and ``{S}:dlq``
share a slot, so retry now and move to DLQ run as one script there; a pre-cluster ``S:retry`` lives in
another slot and is refused with the way out (``python -m eventbus migrate``), except for delete."""

from __future__ import annotations

import hashlib

import msgpack
from django.test import Client
from redis.cluster import RedisCluster

from tests.console.helpers import stream_url
from tests.console.retries.conftest import DLQ, RETRY_SET, STREAM, make_retries, scheduled

PAGE = stream_url(STREAM, "retries/")


def _ref(member: bytes, due: int) -> str:
    return f"{due}-{hashlib.sha1(member).hexdigest()}"


def test_retry_now_and_dead_letter_on_a_cluster(
    on_cluster, cluster, rc: RedisCluster, operator_client: Client
) -> None:
    make_retries(cluster.url(), rc, 3)
    members = scheduled(rc)
    page = operator_client.get(PAGE).content.decode()
    assert [c.split('"', 1)[0] for c in page.split('data-ref="')[1:]] == [_ref(m, d) for m, d in members]
    before = rc.xlen(STREAM)
    (first, due1), (second, due2), _ = members
    assert operator_client.post(PAGE + "retry/", {"refs": [_ref(first, due1)]}).status_code == 302
    assert rc.xlen(STREAM) == before + 1
    assert operator_client.post(PAGE + "dead-letter/", {"refs": [_ref(second, due2)]}).status_code == 302
    assert rc.xlen(DLQ) == 1
    assert rc.zcard(RETRY_SET) == 1


def test_an_old_named_set_is_refused_but_deletable(
    on_cluster, rc: RedisCluster, operator_client: Client, admin_client_: Client
) -> None:
    member = msgpack.packb(
        [b"type", b"order.created", b"id", b"evt-1", b"_retries", b"1", b"_group", b"billing"]
    )
    rc.zadd("orders:retry", {member: 1_700_000_000_000})
    ref = _ref(member, 1_700_000_000_000)
    page = operator_client.get(PAGE + "?legacy=1").content.decode()
    assert f'data-ref="{ref}"' in page
    response = operator_client.post(PAGE + "retry/", {"refs": [ref], "legacy": "1"}, follow=True)
    assert "python -m eventbus migrate orders" in response.content.decode()
    assert rc.zcard("orders:retry") == 1 and not rc.exists(STREAM)
    assert admin_client_.post(PAGE + "delete/", {"refs": [ref], "legacy": "1"}).status_code == 302
    assert rc.zcard("orders:retry") == 0
    listing = operator_client.get("/c/default/retries/")
    assert listing.status_code == 200
