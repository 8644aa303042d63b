"""Masking on the search paths (a hole kafka-ui #4115 shows is possible): a user who sees a value masked
cannot find the entry by searching for that value, through the API, the page's search steps or the count
of "requeue the dead letters matching this"; and the matches shown are masked.

Redis holds the unmasked entries; the secret and its masked form are the test's own constants.
"""

from __future__ import annotations

import json

import redis
from django.test import Client

from tests.console.helpers import dlq_url, seg, stream_url
from tests.console.masking.test_masked_paths import CARD, SECRET, assert_masked, payload, rules  # noqa: F401
from tests.console.search.test_search_pages import HX, _first_step_url, _run

API = f"/api/v1/c/default/streams/{seg(b'orders')}/search/"


def test_the_search_api_cannot_find_a_masked_value(rules, admin_client_: Client, r: redis.Redis) -> None:  # noqa: F811
    kept = r.xadd("orders", payload()).decode()
    for q in (SECRET, f'data.customer.email == "{SECRET}"', f'card == "{CARD}"', "alice.secret"):
        body = admin_client_.get(API, {"q": q})
        assert body.status_code == 200, body.content
        assert body.json()["matches"] == [], q  # even an admin's search runs on masked values
    found = admin_client_.get(API, {"q": 'data.customer.name == "Alice"'})  # a field no rule hides
    assert [m["id"] for m in found.json()["matches"]] == [kept]
    assert_masked(found.content)  # and what it shows is masked


def test_the_page_search_cannot_find_a_masked_value(rules, viewer_client: Client, r: redis.Redis) -> None:  # noqa: F811
    kept = r.xadd("orders", payload()).decode()
    page = viewer_client.get(stream_url("orders"), {"q": SECRET}).content.decode()
    assert _run(viewer_client, page)[0] == []
    page = viewer_client.get(stream_url("orders"), {"q": "Alice"}).content.decode()
    assert _run(viewer_client, page)[0] == [kept]
    step = viewer_client.get(_first_step_url(page), **HX)
    assert_masked(step.content)


def test_requeue_matching_counts_no_masked_value(rules, operator_client: Client, r: redis.Redis) -> None:  # noqa: F811
    r.xadd("orders:dlq", {**payload(), "dlq_original_stream": "orders", "dlq_error": "boom"})
    r.xadd("orders:dlq", {"data": json.dumps({"customer": {"name": "Bob"}}), "dlq_original_stream": "orders"})
    confirm = dlq_url("orders:dlq") + "search/requeue/confirm/"
    secret = operator_client.get(confirm, {"q": SECRET}).content.decode()
    bob = operator_client.get(confirm, {"q": "Bob"}).content.decode()
    assert 'id="requeue-count">0<' in secret.replace(" ", ""), secret[:2000]
    assert 'id="requeue-count">1<' in bob.replace(" ", ""), bob[:2000]
