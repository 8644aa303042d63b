"""Masking fails closed (docs/api.md#masking): a payload whose shape the masker cannot walk with certainty is
masked whole for the fields its rules name, on every output (the raw download, the entry page, the NDJSON
export) and for search.

Two shapes leaked before: a JSON object repeating a key (a parser keeping the last copy finds nothing to
mask, while the bytes still hold the first), and JSON encoded twice (a JSON string whose text is JSON).
The secret is the test's own constant; Redis holds the unmasked entries.
"""

from __future__ import annotations

import json

import pytest
import redis
from django.test import Client

from busconsole.env import parse_mask_rules
from tests.console.helpers import seg, stream_url

LEAK = "x@leak.example"
MASK = "••••"
RULE = [{"stream": "shapes", "field": "data.customer.email", "action": "mask"}]

SHAPES = {
    # the first copy of "customer" holds the email; json.loads keeps the second
    "duplicate keys": '{"customer":{"email":"' + LEAK + '"},"customer":{"id":3}}',
    # a duplicate deeper down, beside the path
    "duplicate inside": '{"customer":{"email":"' + LEAK + '","email":"ok@example.com"}}',
    # the document as a JSON string: json.loads gives a str, which the rule's path cannot enter
    "encoded twice": json.dumps(json.dumps({"customer": {"email": LEAK}})),
    # the nested object encoded again inside the document
    "inner object encoded": json.dumps({"customer": json.dumps({"email": LEAK})}),
    "encoded three times": json.dumps(json.dumps(json.dumps({"customer": {"email": LEAK}}))),
}


@pytest.fixture
def rule(settings, db) -> None:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(json.dumps(RULE))


def add(r: redis.Redis, data: str) -> str:
    return r.xadd("shapes", {"type": "t", "data": data, "note": "kept"}).decode()


@pytest.mark.parametrize("shape", SHAPES)
def test_the_raw_download_masks_the_whole_field(shape, rule, viewer_client: Client, r: redis.Redis) -> None:
    entry_id = add(r, SHAPES[shape])
    response = viewer_client.get(stream_url("shapes", f"entries/{entry_id}/raw/?field=1"))
    assert response.status_code == 200
    assert LEAK.encode() not in response.content
    assert response.content.decode() == MASK  # the whole field: its shape could not be walked


@pytest.mark.parametrize("shape", SHAPES)
def test_the_entry_page_and_api_mask_the_whole_field(shape, rule, viewer_client: Client, r: redis.Redis) -> None:
    entry_id = add(r, SHAPES[shape])
    page = viewer_client.get(stream_url("shapes", f"entries/{entry_id}/"))
    assert page.status_code == 200 and LEAK.encode() not in page.content
    api = viewer_client.get(f"/api/v1/c/default/streams/{seg('shapes')}/entries/")
    assert api.status_code == 200 and LEAK.encode() not in api.content
    fields = api.json()["entries"][0]["fields"]
    assert fields["data"] == MASK and fields["note"] == "kept"


@pytest.mark.parametrize("shape", SHAPES)
def test_the_ndjson_export_masks_the_whole_field(shape, rule, viewer_client: Client, r: redis.Redis) -> None:
    add(r, SHAPES[shape])
    response = viewer_client.get(f"/api/v1/c/default/streams/{seg('shapes')}/export?format=ndjson")
    assert response.status_code == 200
    exported = b"".join(response.streaming_content)  # type: ignore[attr-defined]  # a streaming response: django-stubs type the test client's answer without streaming_content
    assert LEAK.encode() not in exported
    assert json.loads(exported.splitlines()[0])["fields"]["data"] == MASK


@pytest.mark.parametrize("shape", SHAPES)
def test_search_cannot_find_the_value(shape, rule, admin_client_: Client, r: redis.Redis) -> None:
    add(r, SHAPES[shape])
    api = f"/api/v1/c/default/streams/{seg('shapes')}/search/"
    for q in (LEAK, "leak.example", 'note == "kept" && data.contains("leak")'):
        response = admin_client_.get(api, {"q": q})
        assert response.status_code == 200, response.content[:300]
        assert response.json()["matches"] == [], (shape, q)
    found = admin_client_.get(api, {"q": "kept"})  # the entry itself is there to be found
    assert len(found.json()["matches"]) == 1 and LEAK.encode() not in found.content


def test_a_certain_shape_still_masks_only_the_path(rule, viewer_client: Client, r: redis.Redis) -> None:
    """The fallback is for uncertainty only: a plain document keeps everything but the rule's value,
    and a string on the path that is not JSON is certainly not hiding the value."""
    add(r, json.dumps({"customer": {"email": LEAK, "name": "Ann"}, "memo": "{not json"}))
    add(r, json.dumps({"customer": "plain text, no JSON"}))
    api = viewer_client.get(f"/api/v1/c/default/streams/{seg('shapes')}/entries/?order=asc")
    first, second = (json.loads(e["fields"]["data"]) for e in api.json()["entries"])
    assert first == {"customer": {"email": MASK, "name": "Ann"}, "memo": "{not json"}
    assert second == {"customer": "plain text, no JSON"}
