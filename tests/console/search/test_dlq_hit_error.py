"""A DLQ search hit shows the dead letter's error, which is what a search of a DLQ is usually about.
The dead letters come from the real event bus; the expected error is the entry's own
``dlq_error`` field, read back with XRANGE."""

from __future__ import annotations

import html
import re
from urllib.parse import quote

import redis
from django.test import Client

from eventbus import Bus, Event, Reject
from tests.console.helpers import dlq_url
from tests.eventbus.conftest import running
from tests.polling import wait_for

DLQ = "{orders}:dlq"


def test_dlq_search_hits_show_the_error(redis_server, r: redis.Redis, viewer_client: Client) -> None:
    bus = Bus.from_url(redis_server.url(0), maxlen=None)

    @bus.on("order.created", stream="orders", group="billing", start="0")
    def charge(event: Event) -> None:
        reason = "timeout talking to the bank" if event.data["order_id"] == 2 else "card declined"
        raise Reject(f"{reason} for order {event.data['order_id']}")

    try:
        for order_id in (1, 2, 3):
            bus.publish("orders", "order.created", {"order_id": order_id, "note": "x" * 200})
        with running(bus):
            wait_for(lambda: r.xlen(DLQ) == 3, what="three dead letters")
    finally:
        bus.close()
    [(dead_id, dead)] = [(i, f) for i, f in r.xrange(DLQ) if b"bank" in f[b"dlq_error"]]
    body = viewer_client.get(
        dlq_url(DLQ) + "search/?q=" + quote('error.contains("bank")'), HTTP_HX_REQUEST="true"
    ).content.decode()
    hits = re.findall(r'<div class="search-hit">(.*?)</div>', body, re.S)
    assert len(hits) == 1 and dead_id.decode() in hits[0]
    shown = hits[0].split("<details>", 1)[0]  # what is on screen before the payload is opened
    error = re.search(r'class="search-hit-error[^"]*"[^>]*>(.*?)</', shown, re.S)
    assert error and html.unescape(error.group(1)).strip() == dead[b"dlq_error"].decode()
