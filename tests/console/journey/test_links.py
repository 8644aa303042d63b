"""A Journey link on every entry, dead letter, pending row and search result, and a box on the overview;
a dead letter's link opens the journey of its event in the stream it came from."""

from __future__ import annotations

import html
import json
import re
from urllib.parse import parse_qs, urlsplit

import redis
from django.test import Client

from tests.console.helpers import dlq_url, group_url, stream_url

DLQ = "{orders}:dlq"


def journey_links(body: str) -> list[dict[str, list[str]]]:
    """The query strings of the journey links on a page."""
    return [parse_qs(urlsplit(html.unescape(href)).query)
            for href in re.findall(r'href="(/c/default/journey/\?[^"]*)"', body)]  # fmt: skip


def test_every_page_links_to_the_journey(r: redis.Redis, viewer_client: Client) -> None:
    first = r.xadd("orders", {"type": "order.created", "data": json.dumps({"order_id": 7}), "id": "e" * 32}).decode()
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "w1", {"orders": ">"}, count=1)  # pending
    dead = r.xadd(DLQ, {"type": "order.created", "data": json.dumps({"order_id": 7}), "id": "e" * 32,
                        "dlq_original_stream": "orders", "dlq_original_id": first, "dlq_group": "billing",
                        "dlq_error": "ValueError: no", "dlq_retries": "0"}).decode()  # fmt: skip
    entry = {"q": [first], "stream": ["orders"]}
    letter = {"q": [dead], "stream": [DLQ]}
    pages = {
        stream_url("orders"): entry,
        stream_url("orders", f"entries/{first}/"): entry,
        group_url("orders", "billing"): entry,
        dlq_url(DLQ): letter,
        dlq_url(DLQ) + f"entries/{dead}/": letter,
        stream_url("orders", "search/") + "?q=order": entry,
    }
    for page, wanted in pages.items():
        response = viewer_client.get(page)
        assert response.status_code == 200, page
        assert wanted in journey_links(response.content.decode()), page
    overview = viewer_client.get("/").content.decode()
    assert 'id="journey-box"' in overview and 'action="/c/default/journey/"' in overview

    # the dead letter's link: the journey of its event, in orders, with the dead letter on it
    doc = viewer_client.get("/api/v1/c/default/journey/", {"q": dead, "stream": DLQ}).json()
    assert doc["stream"] == "orders" and doc["first_id"] == first and doc["event_id"] == "e" * 32
    kinds = [(s["kind"], s["entry_id"], s.get("state")) for s in doc["steps"]]
    assert ("publish", first, None) in kinds and ("dead_letter", dead, "present") in kinds
    assert ("delivery", first, "pending") in kinds
