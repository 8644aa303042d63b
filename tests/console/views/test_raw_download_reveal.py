"""The "Download the whole value" link of a value too big to show follows the page's reveal: on a page
revealing masked values (``?unmasked=1``) it asks for them too, so the file holds what the page shows;
on a masked page it does not. The download still decides for itself: a role that may not reveal is
refused (403, audited as denied), and a reveal is audited as ``payload.reveal``.

The expected file contents are the payload as the test wrote it (revealed) or with the masked key
replaced (masked), computed here; the links are read from the page's HTML as a browser would follow them.
"""

from __future__ import annotations

import html
import json
import re

import pytest
import redis
from django.test import Client

from busconsole.env import parse_mask_rules
from streams_app.audit.models import AuditEvent
from tests.console.helpers import stream_url

SECRET = "alice.secret@example.com"
PAYLOAD = {"customer": {"email": SECRET, "name": "Alice"}, "notes": "n" * 70_000}  # past the 64 KiB preview


@pytest.fixture
def entry_id(settings, db, r: redis.Redis) -> str:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(
        json.dumps([{"stream": "orders", "field": "data.customer.email"}])
    )
    return r.xadd("orders", {"type": "order.created", "data": json.dumps(PAYLOAD)}).decode()


def download_links(body: str) -> list[str]:
    return [html.unescape(href) for href in re.findall(r'<a href="([^"]+)" download>', body)]


@pytest.mark.parametrize("page", ["entry", "stream"])
def test_a_revealing_page_links_the_revealed_value(page, entry_id, admin_client_: Client) -> None:
    url = stream_url("orders", f"entries/{entry_id}/") if page == "entry" else stream_url("orders")
    body = admin_client_.get(url + "?unmasked=1").content.decode()
    assert SECRET in body
    [link] = download_links(body)
    assert link == stream_url("orders", f"entries/{entry_id}/raw/?field=1&unmasked=1")
    before = AuditEvent.objects.filter(action="payload.reveal", outcome="ok").count()
    response = admin_client_.get(link)
    assert response.status_code == 200 and json.loads(response.content) == PAYLOAD
    row = AuditEvent.objects.filter(action="payload.reveal").order_by("pk").last()
    assert AuditEvent.objects.filter(action="payload.reveal", outcome="ok").count() == before + 1
    assert (row.username, row.target_display, row.target_ids) == ("ada-admin", "orders", [entry_id])


def test_a_masked_page_links_the_masked_value(entry_id, admin_client_: Client) -> None:
    body = admin_client_.get(stream_url("orders", f"entries/{entry_id}/")).content.decode()
    assert SECRET not in body
    [link] = download_links(body)
    assert link == stream_url("orders", f"entries/{entry_id}/raw/?field=1")
    downloaded = json.loads(admin_client_.get(link).content)
    assert downloaded["customer"]["email"] != SECRET
    assert {**downloaded, "customer": {**downloaded["customer"], "email": SECRET}} == PAYLOAD
    assert not AuditEvent.objects.filter(action="payload.reveal").exists()


def test_the_download_still_checks_the_role(entry_id, operator_client: Client) -> None:
    """The link a revealing page gave an admin, followed by an operator: refused and audited."""
    response = operator_client.get(stream_url("orders", f"entries/{entry_id}/raw/?field=1&unmasked=1"))
    assert response.status_code == 403 and SECRET.encode() not in response.content
    denied = AuditEvent.objects.get(action="payload.reveal")
    assert (denied.outcome, denied.username) == ("denied", "otto-operator")
