"""Rows that tell you what they hold.

A pending row and a dead letter's row carry a short preview of the message's payload, masked, escaped
and cut to ``BUSCONSOLE_PREVIEW_CHARS`` with an ellipsis, on the page and in the API; a pending entry
whose message was deleted says so. Search result rows show the bus's own fields (``_retries``,
``_requeued_from``, ``_group`` ...) in badges before the fold, whatever the length of the payload.

Redis decides what is stored and what the page cost (INFO commandstats); the masked forms are
spelled out with hmac/hashlib (``expected_hash``), never with the console's masker.
"""

from __future__ import annotations

import html
import json
import re

import pytest
import redis
from django.test import Client

from busconsole.env import parse_mask_rules
from streams_app.masking.models import MaskRule
from tests.console.helpers import dlq_url, group_url, seg, stream_api, stream_url
from tests.console.masking.test_masked_paths import expected_hash

SECRET = "row-canary@example.com"
CARD = "4000000000000002"
MASK = "••••"
XSS = "<img src=x onerror=alert('xss')>"
HX = {"HTTP_HX_REQUEST": "true"}


@pytest.fixture
def rules(settings, db) -> None:
    """A JSON path masked by a setting, a whole field hashed by an admin's rule (as the masking tests)."""
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(
        json.dumps([{"stream": "orders*", "field": "data.customer.email", "action": "mask"}])
    )
    MaskRule.objects.create(stream_glob="orders", field_path="card", action="hash")


def _event(n: int = 7, **extra: str) -> dict[str, str]:
    data = {"order_id": n, "customer": {"email": SECRET, "name": "Alice"}}
    return {"type": "order.created", "data": json.dumps(data), "card": CARD, **extra}


def _stuck(r: redis.Redis, *fields: dict[str, str]) -> list[str]:
    ids = [r.xadd("orders", f).decode() for f in fields]
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "w1", {"orders": ">"})
    return ids


def _pending_cells(body: str) -> dict[str, str]:
    return dict(re.findall(r'data-id="([^"]+)".*?<td class="pending-preview"[^>]*>(.*?)</td>', body, re.S))


def _text(fragment: str) -> str:
    return html.unescape(re.sub(r"<[^>]+>", " ", fragment))


# ------------------------------------------------------------------------------------------ pending


def test_a_pending_row_previews_its_payload_masked(rules, settings, viewer_client: Client, r: redis.Redis) -> None:
    settings.BUSCONSOLE_PREVIEW_CHARS = 200  # the whole of this payload
    [entry_id] = _stuck(r, _event())
    body = viewer_client.get(group_url("orders", "billing")).content.decode()
    cell = _pending_cells(body)[entry_id]
    assert SECRET not in body and CARD not in body
    # the type as before, and now the payload beside it: the rule's path masked, the card hashed
    assert ">order.created</code>" in cell
    text = _text(cell)
    assert '"email":"••••"' in text and '"order_id":7' in text, text
    assert f"card={expected_hash(CARD)}" in text, text


def test_the_pending_api_carries_the_preview(rules, settings, viewer_client: Client, r: redis.Redis) -> None:
    settings.BUSCONSOLE_PREVIEW_CHARS = 200
    ids = _stuck(r, _event(), {"blob": "z" * 500})
    r.xdel("orders", ids[1])
    reply = viewer_client.get(stream_api("orders", "groups/billing/pending/"))
    assert reply.status_code == 200
    assert SECRET.encode() not in reply.content and CARD.encode() not in reply.content
    rows = {row["id"]: row for row in reply.json()["entries"]}
    preview = rows[ids[0]]["preview"]
    assert preview["type"] == "order.created"
    assert '"email":"••••"' in preview["text"] and f"card={expected_hash(CARD)}" in preview["text"]
    # deleted from the stream, still pending: it says so, and has nothing to preview
    assert rows[ids[1]]["exists"] is False and rows[ids[1]]["preview"] is None


def test_a_deleted_pending_message_says_so(viewer_client: Client, r: redis.Redis) -> None:
    ids = _stuck(r, {"type": "a"}, {"type": "b"})
    r.xdel("orders", ids[0])
    cells = _pending_cells(viewer_client.get(group_url("orders", "billing")).content.decode())
    assert "deleted" in _text(cells[ids[0]]) and ">b</code>" in cells[ids[1]]


def test_the_preview_is_escaped_and_cut_to_the_configured_length(
    settings, viewer_client: Client, r: redis.Redis
) -> None:
    settings.BUSCONSOLE_PREVIEW_CHARS = 40
    [entry_id] = _stuck(r, {"type": XSS, "note": XSS + "y" * 200})
    body = viewer_client.get(group_url("orders", "billing")).content.decode()
    assert XSS not in body and "<img src=x" not in body
    cell = _pending_cells(body)[entry_id]
    assert html.escape(XSS, quote=False) in cell or html.escape(XSS) in cell
    payload = html.unescape(re.search(r'<span class="preview-text[^"]*"[^>]*>(.*?)</span>', cell, re.S).group(1))
    assert payload.startswith("note=<img") and payload.endswith("…") and len(payload) == 40, payload
    api = viewer_client.get(stream_api("orders", "groups/billing/pending/")).json()
    assert api["entries"][0]["preview"]["text"] == payload


def test_previews_cost_no_command_beyond_the_existence_check(viewer_client: Client, r: redis.Redis) -> None:
    """One XRANGE per pending row on the page (it tells a deleted message apart), none more for the
    preview: read from Redis's own counters."""
    _stuck(r, *({"type": f"t{i}", "n": str(i)} for i in range(30)))
    url = group_url("orders", "billing") + "?count=30"
    viewer_client.get(url)  # warm: cached health, connections
    r.config_resetstat()
    assert viewer_client.get(url).status_code == 200
    calls = {name: row["calls"] for name, row in r.info("commandstats").items()}
    assert calls.get("cmdstat_xrange", 0) == 30, calls


# ------------------------------------------------------------------------------------------ DLQ


def _dead_letter(r: redis.Redis, fields: dict[str, str]) -> str:
    return r.xadd(
        "bus:dlq", {**fields, "dlq_original_stream": "orders", "dlq_original_id": "5-0", "dlq_error": "boom"}
    ).decode()


def _dlq_summaries(body: str) -> dict[str, str]:
    return dict(re.findall(r'<tr id="dlq-[^"]+" data-id="([^"]+)".*?<summary[^>]*>(.*?)</summary>', body, re.S))


def test_a_dead_letter_row_previews_its_payload_masked_and_cut(
    rules, settings, viewer_client: Client, r: redis.Redis
) -> None:
    settings.BUSCONSOLE_PREVIEW_CHARS = 60
    entry_id = _dead_letter(r, _event())
    body = viewer_client.get(dlq_url("bus:dlq")).content.decode()
    assert SECRET not in body and CARD not in body
    summary = _dlq_summaries(body)[entry_id]
    assert ">order.created</code>" in summary
    text = html.unescape(re.search(r'<span class="preview-text[^"]*"[^>]*>(.*?)</span>', summary, re.S).group(1))
    assert text.startswith('data={"order_id":7,"customer":{"email":"••••"') and text.endswith("…") and len(text) == 60


def test_a_dead_letter_preview_is_escaped(viewer_client: Client, r: redis.Redis) -> None:
    entry_id = _dead_letter(r, {"type": "x", "data": json.dumps({"note": XSS})})
    body = viewer_client.get(dlq_url("bus:dlq")).content.decode()
    assert XSS not in body and "<img src=x" not in body
    assert "&lt;img src=x" in _dlq_summaries(body)[entry_id]


def test_the_dlq_api_carries_the_preview(rules, settings, viewer_client: Client, r: redis.Redis) -> None:
    settings.BUSCONSOLE_PREVIEW_CHARS = 200
    entry_id = _dead_letter(r, _event())
    reply = viewer_client.get(f"/api/v1/c/default/dlq/{seg('bus:dlq')}/")
    assert reply.status_code == 200 and SECRET.encode() not in reply.content
    [row] = reply.json()["entries"]
    assert row["id"] == entry_id and row["preview"]["type"] == "order.created"
    assert '"email":"••••"' in row["preview"]["text"] and f"card={expected_hash(CARD)}" in row["preview"]["text"]
    assert "dlq_error" not in row["preview"]["text"]  # the payload a requeue writes back, not the DLQ's fields


# ------------------------------------------------------------------------------------------ search rows

BUS_FIELDS = {"_retries": "3", "_group": "fraud-check", "_requeued_from": "1700000000000-4", "_first_id": "1700000000000-1"}


@pytest.mark.parametrize("where", ["stream", "dlq"])
def test_search_rows_show_the_bus_fields_whatever_the_payload_length(
    where: str, viewer_client: Client, r: redis.Redis
) -> None:
    # A payload long enough to push the bus's fields past any one-line summary.
    fields = {"type": "order.created", "data": json.dumps({"order_id": 7, "note": "n" * 400}), **BUS_FIELDS}
    if where == "dlq":
        key, page = "orders:dlq", dlq_url("orders:dlq")
        fields |= {"dlq_original_stream": "orders", "dlq_original_id": "5-0", "dlq_error": "boom"}
    else:
        key, page = "orders", stream_url("orders")
    r.xadd(key, {"type": "other", "data": "{}"})
    hit_id = r.xadd(key, fields).decode()
    body = viewer_client.get(page + "search/", {"q": "data.order_id == 7"}, **HX).content.decode()
    [hit] = re.findall(r'<div class="search-hit"[^>]*>(.*?)<details', body, re.S)  # before the fold
    assert hit_id in hit
    badges = dict(re.findall(r'data-bus-field="([^"]+)"[^>]*>.*?<span class="badge-value[^"]*">([^<]*)</span>', hit, re.S))
    stored = {k.decode(): v.decode() for k, v in r.xrange(key, hit_id, hit_id)[0][1].items() if k.startswith(b"_")}
    assert badges == stored == BUS_FIELDS
