"""A waiting retry's last error is masked as the dead letter's error would be (every output of
entry bytes is masked, docs/api.md#masking): the retries page and API read it from the bus's metric events, where no rule of the DLQ
reached it. The rule here names the DLQ by its cluster-safe name or its old one: both hide it.

Redis holds the clear error (written as the worker writes it); the secret is the test's own constant.
"""

from __future__ import annotations

import json

import msgpack
import pytest
import redis
from django.test import Client

from busconsole.env import parse_mask_rules
from tests.console.helpers import seg

SECRET = "ann.secret@example.com"
ERROR = f"ValueError: no card for {SECRET}"


def a_failed_retry(r: redis.Redis) -> None:
    """A retry waiting in ``{orders}:retry`` and its failure in the metric events, as the worker writes them."""
    entry_id = r.xadd("orders", {"type": "t", "data": "{}"}).decode()
    member = msgpack.packb([b"type", b"t", b"data", b"{}", b"id", b"ev-1", b"_retries", b"1", b"_group", b"g"])
    r.zadd("{orders}:retry", {member: 4_102_444_800_000})
    r.xadd("{orders}:metrics", {"event": "failed", "stream": "orders", "group": "g", "type": "t",
                                "event_id": "ev-1", "entry_id": entry_id, "error": ERROR, "count": "1"})  # fmt: skip


@pytest.mark.parametrize("dlq", ["{orders}:dlq", "orders:dlq"])
def test_the_retries_api_and_page_mask_the_last_error(dlq, settings, viewer_client: Client, r: redis.Redis) -> None:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(json.dumps([{"stream": dlq, "field": "dlq_error"}]))
    a_failed_retry(r)
    api = viewer_client.get(f"/api/v1/c/default/streams/{seg('orders')}/retries/")
    assert api.status_code == 200
    assert [row["error"] for row in api.json()["retries"]] == ["••••"]
    page = viewer_client.get(f"/c/default/streams/{seg('orders')}/retries/")
    assert page.status_code == 200 and SECRET not in page.content.decode()
    assert "••••" in page.content.decode()


def test_without_a_rule_the_error_shows(settings, viewer_client: Client, r: redis.Redis) -> None:
    settings.BUSCONSOLE_MASK_RULES = []
    a_failed_retry(r)
    api = viewer_client.get(f"/api/v1/c/default/streams/{seg('orders')}/retries/")
    assert [row["error"] for row in api.json()["retries"]] == [ERROR]


@pytest.mark.parametrize("key", ["{orders}:metrics", "eventbus:metrics"])
def test_the_metric_events_show_the_error_masked(key, settings, viewer_client: Client, r: redis.Redis) -> None:
    """The same error in the metric events' own pages (the stream's {S}:metrics, the old shared one)."""
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(json.dumps([{"stream": "*:dlq", "field": "dlq_error"}]))
    r.xadd(key, {"event": "failed", "stream": "orders", "group": "g", "error": ERROR, "count": "1"})
    r.xadd(key, {"event": "processed", "stream": "orders", "group": "g", "count": "3"})
    api = viewer_client.get(f"/api/v1/c/default/streams/{seg(key)}/entries/?order=asc")
    assert api.status_code == 200 and SECRET not in api.content.decode()
    failed, processed = (e["fields"] for e in api.json()["entries"])
    assert failed["error"] == "••••" and failed["group"] == "g" and processed["count"] == "3"
    page = viewer_client.get(f"/c/default/streams/{seg(key)}/")
    assert SECRET not in page.content.decode()
