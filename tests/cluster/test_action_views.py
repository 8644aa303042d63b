"""Every operator and admin action, through the pages and the JSON API, on streams on each node of a cluster.

The same small bus is written three times, once per primary (``orders``, ``payments`` and ``invoices``
hash to slots of three different nodes, checked with ``CLUSTER KEYSLOT`` through ``rc``), each with
an old-style DLQ (``<stream>:dlq``) on another node. Each action is posted by the least role allowed
to run it and must answer its success status, write one ``ok`` audit row naming the stream, and change
Redis as read back through ``rc``: never CROSSSLOT, never a MOVED error, whatever node holds the key.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
from django.test import Client
from redis.cluster import RedisCluster

from streams_app.audit.models import AuditEvent
from tests.console.helpers import api, consumer_url, dlq_url, group_url, post_json, stream_url
from tests.console.services.helpers import eventbus_dead_letter

pytestmark = pytest.mark.django_db

STREAMS = ("orders", "payments", "invoices")


def bus_on(rc: RedisCluster, stream: str) -> SimpleNamespace:
    """``stream`` with group ``billing`` (worker-1 owns 4 entries idle 100 s, idle-1 none) and a 3-entry DLQ."""
    ids = [rc.xadd(stream, {"data": json.dumps({"n": i})}).decode() for i in range(10)]
    rc.xgroup_create(stream, "billing", id="0")
    rc.xreadgroup("billing", "worker-1", {stream: ">"}, count=4)
    rc.xclaim(stream, "billing", "worker-1", 0, ids[:4], idle=100_000, justid=True)
    rc.xgroup_createconsumer(stream, "billing", "idle-1")
    dlq = f"{stream}:dlq"
    dlq_ids = [rc.xadd(dlq, eventbus_dead_letter(i, ids[i], stream=stream)).decode() for i in range(3)]
    return SimpleNamespace(rc=rc, s=stream, dlq=dlq, ids=ids, dlq_ids=dlq_ids)


def pending_of(b: SimpleNamespace) -> dict[str, str]:
    return {p["message_id"].decode(): p["consumer"].decode()
            for p in b.rc.xpending_range(b.s, "billing", "-", "+", 100)}


@dataclass(frozen=True)
class Act:
    name: str
    html: Callable[[SimpleNamespace], tuple[str, dict]]
    api: Callable[[SimpleNamespace], tuple[str, dict]]
    done: Callable[[SimpleNamespace], bool]  # what Redis must show afterwards
    role: str = "operator"
    on_dlq: bool = False
    html_ok: int = 302
    api_ok: int = 200


ACTS = [
    Act("claim",
        lambda b: (group_url(b.s, "billing") + "claim/", {"ids": [b.ids[0]], "consumer": "worker-2", "min_idle_ms": 0}),
        lambda b: (api(group_url(b.s, "billing") + "claim"), {"ids": [b.ids[0]], "consumer": "worker-2", "min_idle_ms": 0}),
        lambda b: pending_of(b)[b.ids[0]] == "worker-2"),
    Act("autoclaim",
        lambda b: (group_url(b.s, "billing") + "autoclaim/", {"consumer": "worker-2", "min_idle_ms": 0, "count": 10}),
        lambda b: (api(group_url(b.s, "billing") + "autoclaim"), {"consumer": "worker-2", "min_idle_ms": 0, "count": 10}),
        lambda b: set(pending_of(b).values()) == {"worker-2"}),
    Act("ack",
        lambda b: (group_url(b.s, "billing") + "ack/", {"ids": [b.ids[1]], "confirm": "1"}),
        lambda b: (api(group_url(b.s, "billing") + "ack"), {"ids": [b.ids[1]]}),
        lambda b: sorted(pending_of(b)) == sorted(b.ids[i] for i in (0, 2, 3))),
    Act("rewind",
        lambda b: (group_url(b.s, "billing") + "rewind/", {"to": b.ids[5]}),
        lambda b: (api(group_url(b.s, "billing") + "rewind"), {"to": b.ids[5]}),
        lambda b: b.rc.xinfo_groups(b.s)[0]["last-delivered-id"].decode() == b.ids[5]),
    Act("consumer.delete",
        lambda b: (consumer_url(b.s, "billing", "worker-1") + "delete/", {"force": "1"}),
        lambda b: (api(consumer_url(b.s, "billing", "worker-1") + "delete"), {"force": True}),
        lambda b: [c["name"] for c in b.rc.xinfo_consumers(b.s, "billing")] == [b"idle-1"], role="admin_user"),
    Act("group.delete",
        lambda b: (group_url(b.s, "billing") + "delete/", {"confirm": "billing"}),
        lambda b: (api(group_url(b.s, "billing") + "delete"), {"confirm": "billing"}),
        lambda b: b.rc.xinfo_groups(b.s) == [], role="admin_user"),
    Act("stream.trim",
        lambda b: (stream_url(b.s) + "trim/", {"minid": b.ids[3]}),
        lambda b: (api(stream_url(b.s) + "trim"), {"minid": b.ids[3]}),
        lambda b: b.rc.xlen(b.s) == 7, role="admin_user"),
    Act("stream.delete",
        lambda b: (stream_url(b.s) + "delete/", {"ids": [b.ids[0], b.ids[1]]}),
        lambda b: (api(stream_url(b.s) + "delete"), {"ids": [b.ids[0], b.ids[1]]}),
        lambda b: b.rc.xlen(b.s) == 8, role="admin_user"),
    Act("dlq.requeue",
        lambda b: (dlq_url(b.dlq) + "requeue/", {"ids": [b.dlq_ids[0]]}),
        lambda b: (api(dlq_url(b.dlq) + "requeue"), {"ids": [b.dlq_ids[0]]}),
        lambda b: b.rc.xlen(b.dlq) == 2 and b.rc.xrevrange(b.s, count=1)[0][1][b"_requeued_from"].decode()
        == b.dlq_ids[0] and b.rc.xlen(b.s) == 11, on_dlq=True),
    Act("dlq.delete",
        lambda b: (dlq_url(b.dlq) + "delete/", {"ids": [b.dlq_ids[1]]}),
        lambda b: (api(dlq_url(b.dlq) + "delete"), {"ids": [b.dlq_ids[1]]}),
        lambda b: b.rc.xlen(b.dlq) == 2, role="admin_user", on_dlq=True),
    Act("dlq.purge",
        lambda b: (dlq_url(b.dlq) + "purge/", {"up_to": b.dlq_ids[-1], "confirm": b.dlq}),
        lambda b: (api(dlq_url(b.dlq) + "purge"), {"up_to": b.dlq_ids[-1], "confirm": b.dlq}),
        lambda b: b.rc.xlen(b.dlq) == 0, role="admin_user", on_dlq=True),
]


def test_the_streams_sit_on_three_nodes_and_their_old_dlqs_elsewhere(cluster, rc):
    nodes = {rc.get_node_from_key(s).name for s in STREAMS}
    assert len(nodes) == 3
    for stream in STREAMS:
        assert rc.get_node_from_key(stream).name != rc.get_node_from_key(f"{stream}:dlq").name


def check(b: SimpleNamespace, act: Act, response, body: bytes) -> None:
    event = AuditEvent.objects.get()
    assert (event.action, event.outcome) == (act.name, "ok"), (event.error, body[:300])
    assert bytes(event.target_stream) == (b.dlq if act.on_dlq else b.s).encode()
    assert act.done(b), body[:300]


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("act", ACTS, ids=lambda a: a.name)
def test_html_action_on_each_node(request, on_cluster, rc, stream, act):
    b = bus_on(rc, stream)
    web = Client(enforce_csrf_checks=False)
    web.force_login(request.getfixturevalue(act.role))
    url, data = act.html(b)
    response = web.post(url, data)
    assert response.status_code == act.html_ok, response.content[:300]
    check(b, act, response, response.content)


@pytest.mark.parametrize("stream", STREAMS)
@pytest.mark.parametrize("act", ACTS, ids=lambda a: a.name)
def test_api_action_on_each_node(request, on_cluster, rc, api_token, stream, act):
    b = bus_on(rc, stream)
    url, body = act.api(b)
    response = post_json(url, body, api_token(request.getfixturevalue(act.role)))
    assert response.status_code == act.api_ok, response.content[:300]
    check(b, act, response, response.content)


def test_a_post_without_csrf_token_or_by_a_viewer_changes_nothing(on_cluster, rc, operator, viewer):
    b = bus_on(rc, "payments")
    url, data = ACTS[0].html(b)
    before = pending_of(b)
    forged = Client(enforce_csrf_checks=True)
    forged.force_login(operator)
    assert forged.post(url, data).status_code == 403
    web = Client()
    web.force_login(viewer)
    refused = web.post(url, data)
    assert refused.status_code == 403 and "operator role" in refused.content.decode()
    assert AuditEvent.objects.get().outcome == "denied"
    assert pending_of(b) == before
