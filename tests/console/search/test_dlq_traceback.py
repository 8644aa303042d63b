"""``traceback`` on a DLQ search: the parsed dead letter's traceback, for each convention, masked as
``error`` is.

The dead letters are written as their producers write them: ours by a real worker of the bus whose
handlers raise (so the tracebacks are Python's own), the seed ``streams`` module's by plain XADD with
``_retries``, OmniDaemon's as its one JSON ``data`` field, and a configured convention's with its own
traceback field. The expected matches are computed here over XRANGE (redis-py), never by the search.
"""

from __future__ import annotations

import json

import redis
from django.test import Client

from busconsole.env import parse_mask_rules
from eventbus import Bus, Event
from tests.console.helpers import stream_api
from tests.console.redis_ops.helpers import OMNI_DATA, OMNI_KEY
from tests.eventbus.conftest import running
from tests.polling import wait_for

DLQ = "{orders}:dlq"


def _search(client: Client, key: str, q: str) -> list[str]:
    response = client.get(stream_api(key, "search/"), {"q": q, "limit": 1000})
    assert response.status_code == 200, response.content[:500]
    body = response.json()
    assert body["complete"] and body["scanned"] == body["total"]
    return [m["id"] for m in body["matches"]]


def _dead_letters_from_a_real_worker(url: str, r: redis.Redis) -> dict[str, dict[bytes, bytes]]:
    """Four orders dead-lettered by our worker: two fail in ``charge``, two in ``reserve_stock``."""
    bus = Bus.from_url(url, maxlen=None)

    def reserve_stock(order_id: int) -> None:
        raise LookupError(f"no stock for order {order_id}")

    @bus.on("order.created", stream="orders", group="billing", start="0", max_retries=0)
    def charge(event: Event) -> None:
        if event.data["order_id"] % 2:
            reserve_stock(event.data["order_id"])
        raise RuntimeError(f"card declined for order {event.data['order_id']}")

    try:
        for order_id in range(4):
            bus.publish("orders", "order.created", {"order_id": order_id})
        with running(bus):
            wait_for(lambda: r.xlen(DLQ) == 4, what="the orders to be dead-lettered")
    finally:
        bus.close()
    return {i.decode(): f for i, f in r.xrange(DLQ)}


def test_traceback_of_our_dead_letters_and_the_seed_modules(
    url: str, r: redis.Redis, viewer_client: Client
) -> None:
    dead = _dead_letters_from_a_real_worker(url, r)
    # the seed module's dead letters in the same key (after an upgrade): no traceback, or a field so named
    seed = r.xadd(DLQ, {"type": "order.created", "data": '{"order_id": 9}', "_retries": "3"}).decode()
    named = r.xadd(DLQ, {"data": "{}", "_retries": "1", "traceback": "File x.py in reserve_stock"}).decode()
    raw = {i.decode(): f for i, f in r.xrange(DLQ)}

    def where(test) -> list[str]:
        return [i for i, f in raw.items() if test(f.get(b"dlq_traceback", f.get(b"traceback")))]

    in_stock = where(lambda tb: tb is not None and b"in reserve_stock" in tb)
    assert len(in_stock) == 3 and named in in_stock  # two of ours and the seed entry's own field
    assert _search(viewer_client, DLQ, 'traceback.contains("in reserve_stock")') == in_stock
    assert _search(viewer_client, DLQ, 'traceback.contains("in charge") && error.contains("order 2")') == [
        i for i, f in dead.items() if f[b"dlq_error"] == b"RuntimeError: card declined for order 2"
    ]
    assert _search(viewer_client, DLQ, "traceback == null") == [seed]
    assert _search(viewer_client, DLQ, 'traceback.startsWith("Traceback (most recent call last)")') == [
        i
        for i, f in raw.items()
        if f.get(b"dlq_traceback", b"").startswith(b"Traceback (most recent call last)")
    ]
    assert len(_search(viewer_client, DLQ, 'traceback.contains("LookupError: no stock")')) == 2
    assert _search(viewer_client, "orders", "traceback == null") == []  # not a DLQ: no such variable


def test_traceback_of_omnidaemon_and_of_a_configured_convention(
    settings, r: redis.Redis, viewer_client: Client
) -> None:
    omni = r.xadd(OMNI_KEY, {"data": OMNI_DATA}).decode()  # OmniDaemon's document has no traceback
    assert _search(viewer_client, OMNI_KEY.decode(), "traceback == null && retries == 3") == [omni]
    settings.BUSCONSOLE_DLQ_PATTERNS = json.dumps(
        [
            {
                "name": "jobs-dead",
                "match": "jobs:*:dead",
                "target": "strip_suffix::dead",
                "error_field": "reason",
                "traceback_field": "tb",
            }
        ]  # fmt: skip
    )
    key = "jobs:mail:dead"
    r.xadd(key, {"job": "send", "reason": "SMTP 550", "tb": 'File "mail.py", line 3, in send\nSMTPError'})
    r.xadd(key, {"job": "render", "reason": "KeyError", "tb": 'File "tpl.py", line 9, in render'})
    r.xadd(key, {"job": "noop"})
    raw = {i.decode(): f for i, f in r.xrange(key)}
    assert _search(viewer_client, key, 'traceback.contains("in send")') == [
        i for i, f in raw.items() if b"in send" in f.get(b"tb", b"")
    ]
    assert _search(viewer_client, key, "traceback == null") == [i for i, f in raw.items() if b"tb" not in f]
    assert _search(viewer_client, key, 'has(fields.tb) && !traceback.endsWith("render")') == [
        i for i, f in raw.items() if b"tb" in f and not f[b"tb"].endswith(b"render")
    ]


def test_a_masked_traceback_is_searched_masked(settings, r: redis.Redis, viewer_client: Client) -> None:
    """A rule on ``dlq_traceback`` hides it from the search as from the page, like one on ``dlq_error``."""
    r.xadd(DLQ, {"data": "{}", "dlq_original_stream": "orders", "dlq_error": "ValueError: secret-42",
                 "dlq_traceback": "File app.py, in charge\nValueError: secret-42"})  # fmt: skip
    assert len(_search(viewer_client, DLQ, 'traceback.contains("secret-42")')) == 1
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(
        json.dumps(
            [
                {"stream": "*", "field": "dlq_traceback", "action": "mask"},
                {"stream": "*", "field": "dlq_error", "action": "mask"},
            ]
        )  # fmt: skip
    )
    assert _search(viewer_client, DLQ, 'traceback.contains("secret-42")') == []
    assert _search(viewer_client, DLQ, 'error.contains("secret-42")') == []
    assert _search(viewer_client, DLQ, 'traceback.contains("in charge") || error.contains("Value")') == []
    assert len(_search(viewer_client, DLQ, "traceback != null && error != null")) == 1  # masked, not gone
