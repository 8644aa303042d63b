"""The audit trail of actions: one row per action saying who, what, where and how much, the audit page and API.

A claim's row is compared with the PEL that XPENDING then reports; failed and invalid actions leave an
``error`` row; the page and ``/api/v1/audit/`` filter the rows the test's own posts wrote (by outcome,
user, action prefix and time). Audit rows and jobs are read-only in Django's admin, even to superusers.
"""

from __future__ import annotations

import pytest
from django.contrib import admin
from django.contrib.admin.sites import site
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from streams_app.audit.models import AuditEvent
from streams_app.jobs.models import Job
from tests.console.conftest import PASSWORD
from tests.console.helpers import CONN, api, bearer, dlq_url, group_url, post_json

# ------------------------------------------------------------------------------------- audit rows


def test_claim_audit_row_says_who_what_where_and_how_much(operator_client: Client, operator, bus) -> None:
    ids = bus.ids[:3]
    operator_client.post(group_url("orders", "billing") + "claim/", {"ids": ids, "consumer": "worker-2", "min_idle_ms": 5000})
    event = AuditEvent.objects.get()
    assert event.who == operator
    assert event.username == operator.username
    assert event.connection == CONN
    assert event.action == "claim"
    assert bytes(event.target_stream) == b"orders"
    assert event.target_display == "orders"
    assert event.target_group == "billing"
    assert event.target_ids == ids
    assert event.parameters == {"consumer": "worker-2", "min_idle_ms": 5000}
    assert event.outcome == "ok"
    owners = {p["message_id"].decode(): p["consumer"].decode() for p in bus.r.xpending_range("orders", "billing", "-", "+", 10)}
    assert event.affected == sum(owners[i] == "worker-2" for i in ids) == 3
    assert event.duration_ms >= 0


def test_a_failing_action_is_audited_as_an_error(operator, api_token, bus) -> None:
    reply = post_json(api(group_url("orders", "nope") + "ack"), {"ids": [bus.ids[0]]}, api_token(operator))
    assert reply.status_code == 404
    assert reply.json()["error"]["code"] == "not_found"
    event = AuditEvent.objects.get()
    assert (event.action, event.outcome, event.target_group) == ("ack", "error", "nope")
    assert "group" in event.error


def test_invalid_input_is_a_400_and_is_audited(operator, api_token, bus) -> None:
    url = api(group_url("orders", "billing") + "claim")
    bad = post_json(url, {"ids": ["not-an-id"], "consumer": "w", "min_idle_ms": 0}, api_token(operator))
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "bad_request"
    assert "ids" in bad.json()["error"]["message"]
    event = AuditEvent.objects.get()
    assert (event.action, event.outcome) == ("claim", "error")


# ----------------------------------------------------------------------------- audit page and API


def test_audit_page_and_api_filter_events(operator_client, admin_client_, viewer_client, api_token, viewer, bus) -> None:
    operator_client.post(group_url("orders", "billing") + "claim/", {"ids": [bus.ids[0]], "consumer": "w2", "min_idle_ms": 0})
    admin_client_.post(dlq_url("orders:dlq") + "delete/", {"ids": [bus.dlq_ids[0]]})
    viewer_client.post(dlq_url("orders:dlq") + "delete/", {"ids": [bus.dlq_ids[1]]})
    page = viewer_client.get("/audit/")
    assert page.status_code == 200
    body = page.content.decode()
    assert body.count('<td class="mono">claim</td>') == 1
    assert body.count('<td class="mono">dlq.delete</td>') == 2
    filtered = viewer_client.get("/audit/?outcome=denied").content.decode()
    assert "vera-viewer" in filtered and "otto-operator" not in filtered

    headers = bearer(api_token(viewer))
    everything = Client().get("/api/v1/audit/", **headers).json()["events"]
    assert [e["action"] for e in everything] == ["dlq.delete", "dlq.delete", "claim"]  # newest first
    assert set(everything[0]) >= {"id", "at", "user", "connection", "action", "stream", "group", "ids",
                                  "parameters", "outcome", "error", "affected", "duration_ms"}
    mine = Client().get("/api/v1/audit/?user=ada-admin&action=dlq.", **headers).json()["events"]
    assert [(e["user"], e["outcome"], e["affected"], e["ids"]) for e in mine] == [
        ("ada-admin", "ok", 1, [bus.dlq_ids[0]])
    ]
    since = Client().get("/api/v1/audit/?since=2999-01-01T00:00:00Z", **headers).json()["events"]
    assert since == []
    assert Client().get("/api/v1/audit/?since=yesterday", **headers).status_code == 400


# ----------------------------------------------------------------------------------- Django admin


def test_audit_events_cannot_be_changed_in_the_admin(bus, db) -> None:
    admin = site._registry[AuditEvent]
    assert not admin.has_add_permission(None)
    assert not admin.has_change_permission(None)
    assert not admin.has_delete_permission(None)


@pytest.mark.parametrize("model", [AuditEvent, Job])
def test_audit_events_and_jobs_cannot_be_edited_even_by_superusers(rf, db, model) -> None:
    model_admin = admin.site._registry[model]
    request = rf.get("/")
    request.user = User.objects.create_superuser("root", password=PASSWORD)
    assert model_admin.has_view_permission(request)
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)


def test_audit_admin_filters(db) -> None:
    assert set(admin.site._registry[AuditEvent].list_filter) == {"action", "outcome", "connection"}


def test_admin_site_lists_audit_events(db) -> None:
    root = User.objects.create_superuser("root", password=PASSWORD)
    AuditEvent.objects.create(
        who=root,
        username="root",
        connection="default",
        action="dlq.purge",
        target_stream=b"orders:\xff",
        target_display="orders:\\xff",
        outcome=AuditEvent.Outcome.OK,
        affected=3,
    )
    client = Client()
    client.force_login(root)
    response = client.get(reverse("admin:streams_app_auditevent_changelist"))
    assert response.status_code == 200
    assert "dlq.purge" in response.content.decode()
