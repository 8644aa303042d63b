"""A dead letter names the event's first publish and its last attempt.

The bus re-adds each retry as a new entry, so ``dlq_original_id`` is the last copy. The dead letters here
are made by the real event bus; the expected IDs are the stream's own entries, read back with XRANGE.
"""

from __future__ import annotations

import re

import redis
from django.test import Client

from eventbus import Bus, Event, RetryPolicy
from tests.console.helpers import api, dlq_url, seg
from tests.eventbus.conftest import running
from tests.polling import wait_for

DLQ = "{orders}:dlq"


def fact(body: str, name: str) -> str:
    """The text of one fact of the dead letter's page, tags removed."""
    match = re.search(rf'data-fact="{name}">(.*?)</span></div>', body, re.S)
    assert match, name
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", match.group(1))).strip()


def test_dead_letter_page_names_first_publish_and_last_attempt(
    redis_server, r: redis.Redis, viewer_client: Client
) -> None:
    bus = Bus.from_url(redis_server.url(0), maxlen=None)

    @bus.on("order.created", stream="orders", group="billing", start="0", max_retries=2,
            retry=RetryPolicy(base=0.01))  # fmt: skip
    def charge(event: Event) -> None:
        raise RuntimeError("card declined")

    try:
        bus.publish("orders", "order.created", {"order_id": 1})
        with running(bus):
            wait_for(lambda: r.xlen(DLQ) == 1, what="the dead letter")
    finally:
        bus.close()
    attempts = [entry_id.decode() for entry_id, _ in r.xrange("orders")]
    assert len(attempts) == 3  # the publish and two retries, each a new entry
    [(dead_id, _)] = r.xrange(DLQ)
    body = viewer_client.get(dlq_url(DLQ) + f"entries/{dead_id.decode()}/").content.decode()
    first, last = fact(body, "first-id"), fact(body, "original-id")
    assert first.split()[0] == attempts[0]
    assert last.split()[0] == attempts[-1]
    listing = viewer_client.get(dlq_url(DLQ)).content.decode()
    row = listing.split(f'data-id="{dead_id.decode()}"', 1)[1].split("</tr>", 1)[0]
    assert "first published as" in row and attempts[0] in row and attempts[-1] in row
    [api_row] = viewer_client.get(api(f"/c/default/dlq/{seg(DLQ)}/")).json()["entries"]
    assert (api_row["first_id"], api_row["original_id"]) == (attempts[0], attempts[-1])


def test_dead_letters_without_the_record(r: redis.Redis, viewer_client: Client) -> None:
    """Never retried: the last attempt is the first publish. Retried by a bus that did not record it:
    the page says the first publish is not known rather than showing the last copy as the original."""
    base = {"type": "t", "data": "{}", "id": "e1", "dlq_original_stream": "orders", "dlq_group": "g",
            "dlq_error": "E: x", "dlq_failed_at": "1"}  # fmt: skip
    never = r.xadd(DLQ, {**base, "dlq_original_id": "5-1", "dlq_retries": "0"}).decode()
    older = r.xadd(DLQ, {**base, "_retries": "3", "dlq_original_id": "9-1", "dlq_retries": "3"}).decode()
    body = viewer_client.get(dlq_url(DLQ) + f"entries/{never}/").content.decode()
    assert fact(body, "first-id").split()[0] == "5-1" and fact(body, "original-id").split()[0] == "5-1"
    body = viewer_client.get(dlq_url(DLQ) + f"entries/{older}/").content.decode()
    assert "not recorded" in fact(body, "first-id")
    assert fact(body, "original-id").split()[0] == "9-1"
