"""Alert-rule changes on the one role-and-audit path: ACTION_ROLES decides, read-only mode refuses, and
every attempt leaves exactly one audit row, with the rule named as its target.

Expected rows are written out by hand from the data each test passes in, not read back from the code.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import pytest
from django.contrib.auth.models import AnonymousUser, User
from django.core.exceptions import PermissionDenied

from streams_app import services
from streams_app.alerts.models import AlertRule
from streams_app.audit.models import AuditEvent

DATA: dict[str, Any] = {
    "name": "billing lag", "kind": "group_lag_above", "connection": "default", "stream_glob": "orders*",
    "group_glob": "billing", "family": "", "threshold": 100.0, "for_seconds": 300, "enabled": True,
    "webhook_url": "https://hooks.example.com/services/T00/very-secret",
}
#: DATA as an audit row records it: the webhook by scheme and host only.
DATA_PARAMS: dict[str, Any] = {
    "name": "billing lag", "kind": "group_lag_above", "connection": "default", "stream_glob": "orders*",
    "group_glob": "billing", "family": "", "threshold": 100.0, "for_seconds": 300, "enabled": True,
    "webhook": "https://hooks.example.com/…",
}


@pytest.fixture(autouse=True)
def _writable(settings) -> None:
    settings.BUSCONSOLE_READ_ONLY = False


@pytest.fixture
def rule(db) -> AlertRule:
    return AlertRule.objects.create(**DATA)


def _create(user: Any, rule: AlertRule | None) -> Any:
    return services.alert_rule_create(user=user, data={**DATA, "name": "new rule"})


def _update(user: Any, rule: AlertRule | None) -> Any:
    assert rule is not None
    return services.alert_rule_update(user=user, rule=rule, data={**DATA, "threshold": 250.0})


def _delete(user: Any, rule: AlertRule | None) -> Any:
    assert rule is not None
    return services.alert_rule_delete(user=user, rule=rule)


VERBS: dict[str, Callable[[Any, AlertRule | None], Any]] = {
    "alert_rule.create": _create, "alert_rule.update": _update, "alert_rule.delete": _delete,
}


def _rows() -> list[tuple[str, str, str, str, str]]:
    return list(AuditEvent.objects.order_by("pk").values_list("action", "outcome", "username", "connection", "target_display"))


@pytest.mark.parametrize("action", sorted(VERBS))
@pytest.mark.parametrize("who", ["viewer", "operator", "outsider", "anonymous"])
def test_everyone_but_admins_is_refused_with_one_denied_row(request, rule: AlertRule, who: str, action: str) -> None:
    user = AnonymousUser() if who == "anonymous" else request.getfixturevalue(who)
    username = "" if who == "anonymous" else user.username
    with pytest.raises(PermissionDenied):
        VERBS[action](user, rule)
    # Refused before anything was created: a create's row names no rule yet.
    target = ("", "") if action == "alert_rule.create" else ("default", "alert rule billing lag")
    assert _rows() == [(action, "denied", username, *target)]
    assert list(AlertRule.objects.values_list("name", "threshold")) == [("billing lag", 100.0)]


def test_an_admin_creates_with_one_ok_row(admin_user: User) -> None:
    created = services.alert_rule_create(user=admin_user, data=DATA)
    assert (created.name, created.created_by, created.webhook_url) == ("billing lag", admin_user, DATA["webhook_url"])
    assert _rows() == [("alert_rule.create", "ok", "ada-admin", "default", "alert rule billing lag")]
    assert AuditEvent.objects.get().parameters == {"rule_id": created.pk, **DATA_PARAMS}


def test_an_admin_updates_with_one_ok_row_listing_the_changes(admin_user: User, rule: AlertRule) -> None:
    data = {**DATA, "name": "billing lag (eu)", "connection": "eu", "threshold": 250.0}
    del data["webhook_url"]  # a blank webhook on the form keeps the current one
    services.alert_rule_update(user=admin_user, rule=rule, data=data)
    rule.refresh_from_db()
    assert (rule.name, rule.connection, rule.threshold, rule.webhook_url) == (
        "billing lag (eu)", "eu", 250.0, DATA["webhook_url"]
    )
    # The row names the rule as it now is.
    assert _rows() == [("alert_rule.update", "ok", "ada-admin", "eu", "alert rule billing lag (eu)")]
    assert AuditEvent.objects.get().parameters["changes"] == {
        "name": ["billing lag", "billing lag (eu)"], "connection": ["default", "eu"], "threshold": [100.0, 250.0],
    }


def test_a_new_webhook_on_the_same_host_is_recorded_as_a_change(admin_user: User, rule: AlertRule) -> None:
    data = {**DATA, "webhook_url": "https://hooks.example.com/services/T00/other-secret"}
    services.alert_rule_update(user=admin_user, rule=rule, data=data)
    changes = AuditEvent.objects.get().parameters["changes"]
    assert changes == {"webhook": ["https://hooks.example.com/…", "https://hooks.example.com/… (new URL)"]}
    assert "secret" not in str(AuditEvent.objects.get().parameters)


def test_an_admin_deletes_with_one_ok_row_counting_the_alerts(admin_user: User, rule: AlertRule) -> None:
    rule_id = rule.pk
    for n in range(3):
        rule.alerts.create(connection="default", target_key=b"orders", key_hash=f"h{n}", target_text="orders",
                           target_hash=f"t{n}", message="m")
    services.alert_rule_delete(user=admin_user, rule=rule)
    assert not AlertRule.objects.exists()
    assert _rows() == [("alert_rule.delete", "ok", "ada-admin", "default", "alert rule billing lag")]
    assert AuditEvent.objects.get().parameters == {"rule_id": rule_id, **DATA_PARAMS, "alerts_deleted": 3}


@pytest.mark.parametrize("action", sorted(VERBS))
def test_read_only_mode_refuses_admins_too(settings, admin_user: User, rule: AlertRule, action: str) -> None:
    settings.BUSCONSOLE_READ_ONLY = True
    with pytest.raises(PermissionDenied, match="read-only"):
        VERBS[action](admin_user, rule)
    assert [row[:3] for row in _rows()] == [(action, "denied", "ada-admin")]
    assert AlertRule.objects.get().threshold == 100.0


@pytest.mark.parametrize("action", sorted(VERBS))
def test_an_action_missing_from_action_roles_is_refused_to_everyone(
    monkeypatch, admin_user: User, rule: AlertRule, action: str
) -> None:
    monkeypatch.delitem(services.ACTION_ROLES, action)
    with pytest.raises(PermissionDenied, match="not an action the console knows"):
        VERBS[action](admin_user, rule)
    assert [row[:3] for row in _rows()] == [(action, "denied", "ada-admin")]
    assert AlertRule.objects.count() == 1


def test_the_check_before_the_form_writes_a_row_only_when_it_refuses(admin_user: User, operator: User, rule: AlertRule) -> None:
    services.alert_rule_authorize(user=admin_user, action="alert_rule.update", rule=rule)
    assert _rows() == []
    with pytest.raises(PermissionDenied, match="needs the admin role"):
        services.alert_rule_authorize(user=operator, action="alert_rule.update", rule=rule)
    assert _rows() == [("alert_rule.update", "denied", "otto-operator", "default", "alert rule billing lag")]


def test_the_form_page_needs_the_role_but_is_not_audited_and_shows_in_read_only_mode(
    settings, admin_user: User, operator: User
) -> None:
    services.alert_rule_form_require(user=admin_user, action="alert_rule.create")
    with pytest.raises(PermissionDenied):
        services.alert_rule_form_require(user=operator, action="alert_rule.create")
    with pytest.raises(PermissionDenied, match="not an action the console knows"):
        services.alert_rule_form_require(user=admin_user, action="alert_rule.rename")
    settings.BUSCONSOLE_READ_ONLY = True
    services.alert_rule_form_require(user=admin_user, action="alert_rule.update")
    assert _rows() == []


def test_edit_buttons_show_for_admins_on_a_writable_console_only(settings, viewer: User, operator: User, admin_user: User) -> None:
    assert [services.alert_rules_editable(user=u) for u in (viewer, operator, admin_user)] == [False, False, True]
    settings.BUSCONSOLE_READ_ONLY = True
    assert services.alert_rules_editable(user=admin_user) is False
    assert _rows() == []
