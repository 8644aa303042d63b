"""Entry pages on a 3-primary cluster: the entry page's pending groups, a dead letter's
page whose origin lives on another node, and adding an entry, for streams on every node."""

from __future__ import annotations

import json

import pytest
from django.test import Client
from redis.cluster import RedisCluster

from streams_app.audit.models import AuditEvent
from tests.console.helpers import dlq_url, stream_url

pytestmark = pytest.mark.django_db

STREAMS = ("orders", "payments", "invoices")  # three slots of three different primaries


@pytest.mark.parametrize("stream", STREAMS)
def test_pending_groups_and_add_on_every_node(
    on_cluster, rc: RedisCluster, operator_client: Client, stream
) -> None:
    ids = [rc.xadd(stream, {"n": str(i)}).decode() for i in range(3)]
    for group in ("billing", "shipping"):
        rc.xgroup_create(stream, group, id="0")
    rc.xreadgroup("billing", "worker-1", {stream: ">"}, count=2)
    body = operator_client.get(stream_url(stream, f"entries/{ids[1]}/")).content.decode()
    expected = {
        g for g in ("billing", "shipping") if rc.xpending_range(stream, g, min=ids[1], max=ids[1], count=1)
    }
    assert expected == {"billing"}
    assert 'data-group="billing"' in body and 'data-group="shipping"' not in body

    response = operator_client.post(stream_url(stream, "add/"), {"mode": "json", "json": '{"a": "1"}'})
    assert response.status_code == 302
    [(new_id, fields)] = rc.xrevrange(stream, count=1)
    assert fields == {b"a": b"1"}
    assert AuditEvent.objects.get(action="entry.add").target_ids == [new_id.decode()]


def test_a_dead_letter_whose_origin_is_on_another_node(
    on_cluster, rc: RedisCluster, viewer_client: Client
) -> None:
    original = rc.xadd("payments", {"n": "1"}).decode()
    dead = rc.xadd(
        "orders:dlq",
        {
            "data": json.dumps({"n": 1}),
            "dlq_original_stream": "payments",
            "dlq_original_id": original,
            "dlq_error": "boom",
        },
    ).decode()
    body = viewer_client.get(f"{dlq_url('orders:dlq')}entries/{dead}/").content.decode()
    assert f'href="{stream_url("payments", f"entries/{original}/")}"' in body
