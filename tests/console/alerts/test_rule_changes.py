"""Alert rule changes: admin-only, CSRF-protected, blocked in read-only mode, validated, and audited with
the webhook's secret left out; and the default rules the management command creates once.

Expected values are the posted form, the standing users' names and the audit rows the action must write.
"""

from __future__ import annotations

import json
from io import StringIO

from django.core.management import call_command
from django.test import Client

from streams_app.alerts.models import AlertRule
from streams_app.audit.models import AuditEvent
from tests.console.alerts.helpers import RULE_POST


def test_only_admins_create_rules_and_every_attempt_is_audited(viewer_client: Client, operator_client: Client, admin_client_: Client) -> None:
    for client in (viewer_client, operator_client):
        assert client.get("/alerts/rules/new/").status_code == 403
        assert client.post("/alerts/rules/new/", RULE_POST).status_code == 403
    assert not AlertRule.objects.exists()
    denied = AuditEvent.objects.filter(action="alert_rule.create", outcome="denied")
    assert sorted(denied.values_list("username", flat=True)) == ["otto-operator", "vera-viewer"]

    assert admin_client_.get("/alerts/rules/new/").status_code == 200
    response = admin_client_.post("/alerts/rules/new/", RULE_POST)
    assert response.status_code == 302 and response["Location"] == "/alerts/"
    rule = AlertRule.objects.get()
    assert (rule.name, rule.for_seconds, rule.threshold, rule.created_by.username) == ("billing lag", 300, 100.0, "ada-admin")
    event = AuditEvent.objects.get(action="alert_rule.create", outcome="ok")
    assert event.username == "ada-admin" and event.parameters["rule_id"] == rule.pk
    assert event.parameters["webhook"] == "https://hooks.example.com/…"
    assert "very-secret" not in json.dumps(event.parameters)


def test_update_keeps_a_blank_webhook_records_changes_and_never_shows_the_secret(admin_client_: Client, admin_user) -> None:
    admin_client_.post("/alerts/rules/new/", RULE_POST)
    rule = AlertRule.objects.get()
    form = admin_client_.get(f"/alerts/rules/{rule.pk}/").content.decode()
    assert "very-secret" not in form and "https://hooks.example.com/…" in form

    response = admin_client_.post(f"/alerts/rules/{rule.pk}/", {**RULE_POST, "threshold": "250", "webhook_url": ""})
    assert response.status_code == 302
    rule.refresh_from_db()
    assert rule.threshold == 250 and rule.webhook_url == RULE_POST["webhook_url"]
    event = AuditEvent.objects.get(action="alert_rule.update")
    assert event.parameters["changes"] == {"threshold": [100.0, 250.0]}

    admin_client_.post(f"/alerts/rules/{rule.pk}/", {**RULE_POST, "webhook_url": "", "remove_webhook": "on"})
    rule.refresh_from_db()
    assert rule.webhook_url == ""
    assert AuditEvent.objects.filter(action="alert_rule.update").count() == 2


def test_delete_is_post_only_and_audited(admin_client_: Client, viewer_client: Client) -> None:
    admin_client_.post("/alerts/rules/new/", RULE_POST)
    rule = AlertRule.objects.get()
    assert admin_client_.get(f"/alerts/rules/{rule.pk}/delete/").status_code == 405
    assert viewer_client.post(f"/alerts/rules/{rule.pk}/delete/").status_code == 403
    assert admin_client_.post(f"/alerts/rules/{rule.pk}/delete/").status_code == 302
    assert not AlertRule.objects.exists()
    assert list(AuditEvent.objects.filter(action="alert_rule.delete").values_list("outcome", flat=True).order_by("pk")) == ["denied", "ok"]


def test_rule_changes_need_the_csrf_token(admin_user) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.post("/alerts/rules/new/", RULE_POST).status_code == 403
    assert not AlertRule.objects.exists()


def test_read_only_mode_blocks_rule_changes(admin_client_: Client, settings) -> None:
    settings.BUSCONSOLE_READ_ONLY = True
    assert admin_client_.post("/alerts/rules/new/", RULE_POST).status_code == 403
    assert AuditEvent.objects.get().outcome == "denied"


def test_invalid_input_is_shown_back_and_changes_nothing(admin_client_: Client) -> None:
    response = admin_client_.post("/alerts/rules/new/", {**RULE_POST, "for_duration": "forever", "webhook_url": "ftp://example.com/hook"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "Give T as seconds" in html and "http:// or https://" in html
    assert not AlertRule.objects.exists() and not AuditEvent.objects.exists()


def test_ensure_alert_rules_creates_defaults_once(db) -> None:
    call_command("ensure_alert_rules", stdout=StringIO())
    kinds = sorted(AlertRule.objects.values_list("kind", flat=True))
    assert kinds == ["dlq_growth", "group_lag_above", "oldest_pending_above"]
    AlertRule.objects.filter(kind="group_lag_above").delete()
    call_command("ensure_alert_rules", stdout=StringIO())  # rules exist: an admin's choice stands
    assert AlertRule.objects.count() == 2
