"""Revealing masked values: only roles in BUSCONSOLE_UNMASKED_ROLES may, per response (``?unmasked=1``),
and each response that shows a value a rule would hide writes one ``payload.reveal`` audit row with the
stream and the IDs. Asking without the role is refused (403) and audited as denied."""

from __future__ import annotations

import json

import pytest
import redis
from django.test import Client

from busconsole.env import parse_mask_rules
from streams_app.audit.models import AuditEvent
from tests.console.helpers import stream_api, stream_url

SECRET = "alice.secret@example.com"


@pytest.fixture
def masked(settings, db) -> None:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(json.dumps([{"stream": "orders", "field": "email"}]))


def test_admins_see_masked_values_by_default(masked, admin_client_: Client, r: redis.Redis) -> None:
    r.xadd("orders", {"email": SECRET})
    body = admin_client_.get(stream_url("orders")).content
    assert SECRET.encode() not in body and "••••".encode() in body
    assert b"?unmasked=1" in body  # the page offers the reveal to this role
    assert not AuditEvent.objects.filter(action="payload.reveal").exists()


def test_a_reveal_shows_the_value_and_writes_one_audit_row(
    masked, admin_client_: Client, r: redis.Redis
) -> None:
    ids = [r.xadd("orders", {"email": SECRET}).decode(), r.xadd("orders", {"other": "x"}).decode()]
    page = admin_client_.get(stream_url("orders") + "?unmasked=1")
    api = admin_client_.get(stream_api("orders", "entries/") + "?unmasked=1")
    assert SECRET.encode() in page.content and SECRET.encode() in api.content
    rows = list(AuditEvent.objects.filter(action="payload.reveal").order_by("pk"))
    assert len(rows) == 2  # one per response
    for row in rows:
        assert row.username == "ada-admin" and row.outcome == "ok" and row.target_display == "orders"
        assert row.target_ids == [ids[0]]  # only the entry that had something masked


def test_a_reveal_with_nothing_masked_writes_no_row(masked, admin_client_: Client, r: redis.Redis) -> None:
    r.xadd("orders", {"other": "x"})
    assert admin_client_.get(stream_url("orders") + "?unmasked=1").status_code == 200
    assert not AuditEvent.objects.filter(action="payload.reveal").exists()


def test_other_roles_are_refused_and_audited(masked, operator_client: Client, r: redis.Redis) -> None:
    entry_id = r.xadd("orders", {"email": SECRET}).decode()
    for url in (
        stream_url("orders"),
        stream_url("orders", f"entries/{entry_id}/"),
        stream_api("orders", "entries/"),
    ):
        response = operator_client.get(url + "?unmasked=1")
        assert response.status_code == 403 and SECRET.encode() not in response.content
    denied = AuditEvent.objects.filter(action="payload.reveal", outcome="denied")
    assert denied.count() == 3


def test_the_roles_are_configurable(masked, settings, operator_client: Client, r: redis.Redis) -> None:
    settings.BUSCONSOLE_UNMASKED_ROLES = ("operator", "admin")
    r.xadd("orders", {"email": SECRET})
    assert SECRET.encode() in operator_client.get(stream_url("orders") + "?unmasked=1").content
    assert AuditEvent.objects.filter(action="payload.reveal", outcome="ok").count() == 1
