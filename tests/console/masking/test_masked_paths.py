"""Masking (docs/api.md#masking): a masked value leaves the server through none of the payload paths.

One test per path: the stream page, the entry page, the raw download, a DLQ's entries, a dead letter's
page, the pending preview, the entries API, the DLQ API and the live tail's frame. Each asserts the secret's
bytes are absent from the response and the masked form present. The expected hash is computed here with
``hmac``/``hashlib`` from ``SECRET_KEY`` (not with the console's helper). Redis decides what is stored.
"""

from __future__ import annotations

import hashlib
import hmac
import json

import msgpack
import pytest
import redis
from django.conf import settings as django_settings
from django.test import Client

from busconsole.env import parse_mask_rules
from streams_app.masking.models import MaskRule
from tests.console.helpers import dlq_url, group_url, seg, stream_api, stream_url

SECRET = "alice.secret@example.com"
CARD = "4111111111111111"
MASK = "••••"


def expected_hash(value: str) -> str:
    """Django's salted_hmac spelled out: key = sha256(salt + SECRET_KEY), then HMAC-SHA256."""
    key = hashlib.sha256(("streams_app.masking.hash" + django_settings.SECRET_KEY).encode()).digest()
    return "hash:" + hmac.new(key, value.encode(), hashlib.sha256).hexdigest()[:12]


def payload() -> dict[str, str]:
    return {
        "data": json.dumps({"order_id": 7, "customer": {"email": SECRET, "name": "Alice"}}),
        "card": CARD,
    }


@pytest.fixture
def rules(settings, db) -> None:
    """One rule from settings (the JSON path), one from the admin page (the whole field, hashed)."""
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(
        json.dumps([{"stream": "orders*", "field": "data.customer.email", "action": "mask"}])
    )
    MaskRule.objects.create(stream_glob="orders", field_path="card", action="hash")


def assert_masked(body: bytes) -> None:
    assert SECRET.encode() not in body and CARD.encode() not in body
    text = body.decode()
    assert MASK in text or "\\u2022\\u2022\\u2022\\u2022" in text
    assert expected_hash(CARD) in text


def test_stream_page(rules, viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("orders", payload())
    body = viewer_client.get(stream_url("orders")).content
    assert_masked(body)
    assert b"Alice" in body  # only the rule's path is hidden


def test_entry_page(rules, viewer_client: Client, r: redis.Redis) -> None:
    entry_id = r.xadd("orders", payload()).decode()
    response = viewer_client.get(stream_url("orders", f"entries/{entry_id}/"))
    assert response.status_code == 200
    assert_masked(response.content)


def test_raw_download(rules, viewer_client: Client, r: redis.Redis) -> None:
    entry_id = r.xadd("orders", payload()).decode()
    fields = list(r.xrange("orders")[0][1])  # the field order Redis keeps
    data = viewer_client.get(stream_url("orders", f"entries/{entry_id}/raw/?field={fields.index(b'data')}"))
    card = viewer_client.get(stream_url("orders", f"entries/{entry_id}/raw/?field={fields.index(b'card')}"))
    assert data.status_code == card.status_code == 200
    assert SECRET.encode() not in data.content
    assert json.loads(data.content)["customer"] == {"email": MASK, "name": "Alice"}
    assert card.content == expected_hash(CARD).encode()


def dead_letter(r: redis.Redis) -> str:
    """An event bus dead letter of ``orders`` (docs/architecture.md#conventions-of-other-buses): the DLQ key matches no rule, its origin does."""
    return r.xadd(
        "bus:dlq",
        {**payload(), "dlq_original_stream": "orders", "dlq_original_id": "5-0", "dlq_error": "boom"},
    ).decode()


def test_dlq_entries_page(rules, viewer_client: Client, r: redis.Redis) -> None:
    dead_letter(r)
    response = viewer_client.get(dlq_url("bus:dlq"))
    assert response.status_code == 200
    assert_masked(response.content)


def test_dead_letter_page(rules, viewer_client: Client, r: redis.Redis) -> None:
    entry_id = dead_letter(r)
    response = viewer_client.get(f"{dlq_url('bus:dlq')}entries/{entry_id}/")
    assert response.status_code == 200
    assert_masked(response.content)


def test_raw_dead_letter_on_its_stream_page_follows_its_origin(
    rules, viewer_client: Client, r: redis.Redis
) -> None:
    dead_letter(r)
    assert_masked(viewer_client.get(stream_url("bus:dlq")).content)


def test_pending_preview(settings, db, viewer_client: Client, r: redis.Redis) -> None:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(json.dumps([{"stream": "orders", "field": "email"}]))
    r.xadd("orders", {"email": SECRET, "n": "1"})  # no type field: the preview shows the payload
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "w1", {"orders": ">"})
    body = viewer_client.get(group_url("orders", "billing")).content
    assert SECRET.encode() not in body and f"email={MASK}".encode() in body


def test_entries_api(rules, viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("orders", payload())
    response = viewer_client.get(stream_api("orders", "entries/"))
    assert response.status_code == 200
    assert_masked(response.content)
    (entry,) = response.json()["entries"]
    assert json.loads(entry["fields"]["data"])["customer"]["email"] == MASK
    assert entry["fields"]["card"] == expected_hash(CARD)


def test_dlq_api(rules, viewer_client: Client, r: redis.Redis) -> None:
    dead_letter(r)
    response = viewer_client.get(f"/api/v1/c/default/dlq/{seg('bus:dlq')}/")
    assert response.status_code == 200, response.content[:300]
    assert_masked(response.content)


def test_remove_and_wildcards(settings, db, viewer_client: Client, r: redis.Redis) -> None:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(
        json.dumps(
            [
                {"stream": "orders", "field": "card", "action": "remove"},
                {"stream": "orders", "field": "data.items.*.email", "action": "remove"},
                {"stream": "orders", "field": "blob.x"},  # not JSON: the whole field is masked (fail closed)
            ]
        )
    )
    items = [{"email": SECRET, "sku": "a"}, {"email": "bob@example.com", "sku": "b"}]
    r.xadd("orders", {"data": json.dumps({"items": items}), "card": CARD, "blob": b"\x93" + SECRET.encode()})
    response = viewer_client.get(stream_api("orders", "entries/"))
    (entry,) = response.json()["entries"]
    assert SECRET.encode() not in response.content and b"bob@example.com" not in response.content
    assert "card" not in entry["fields"]
    assert json.loads(entry["fields"]["data"]) == {"items": [{"sku": "a"}, {"sku": "b"}]}
    assert entry["fields"]["blob"] == MASK


def test_other_streams_are_untouched(rules, viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("payments", payload())
    body = viewer_client.get(stream_api("payments", "entries/")).content
    assert SECRET.encode() in body and CARD.encode() in body


def test_retries_page_and_api(rules, viewer_client: Client, r: redis.Redis) -> None:
    """A delayed retry (the bus's msgpack member in ``{orders}:retry``) carries the payload too."""
    member = msgpack.packb([k.encode() if isinstance(k, str) else k for kv in payload().items() for k in kv])
    r.zadd("{orders}:retry", {member: 1_700_000_000_000})
    page = viewer_client.get(stream_url("orders", "retries/"))
    api = viewer_client.get(stream_api("orders", "retries/"))
    assert page.status_code == api.status_code == 200, api.content[:300]
    assert_masked(page.content)
    assert_masked(api.content)


def test_add_entry_form_prefill(rules, operator_client: Client, r: redis.Redis) -> None:
    """The add-entry form copies the newest entry's fields: masked values stay masked there."""
    r.xadd("orders", payload())
    response = operator_client.get(stream_url("orders", "add/"))
    assert response.status_code == 200
    assert_masked(response.content)
