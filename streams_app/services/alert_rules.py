"""Alert rules: create, update and delete them, on the same role-and-audit path as every other action.

Rules are the console's own settings rather than Redis state, but a change to one is still an
action: who may make it comes from :data:`~streams_app.services.audit.ACTION_ROLES` (admins,
docs/api.md#roles-and-the-audit-trail), read-only mode refuses it (``BUSCONSOLE_READ_ONLY`` blocks every mutating
action), and each attempt leaves exactly one AuditEvent (``alert_rule.create``, ``alert_rule.update``
with ``[old, new]`` per changed field, ``alert_rule.delete``; ``denied`` when refused). Webhook URLs
appear in audit rows by scheme and host only (their paths are often secrets).
"""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from django.core.exceptions import PermissionDenied

from streams_app.alerts.models import AlertRule
from streams_app.alerts.rules import RULE_FIELDS
from streams_app.alerts.webhooks import webhook_display
from streams_app.services.audit import action_audit, action_authorize, action_check, action_role_require

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike


def alert_rule_params(rule: AlertRule) -> dict[str, Any]:
    """A rule as its audit rows record it: the webhook by host only (its path is often a secret)."""
    params: dict[str, Any] = {"rule_id": rule.pk, **{f: getattr(rule, f) for f in RULE_FIELDS}}
    params["webhook"] = webhook_display(rule.webhook_url) or None
    return params


def alert_rules_editable(*, user: UserLike | None) -> bool:
    """Whether the alerts page offers the edit buttons: a courtesy only, each change is checked again."""
    try:
        action_authorize(user=user, action="alert_rule.update")
    except PermissionDenied:
        return False
    return True


def alert_rule_form_require(*, user: UserLike | None, action: str) -> None:
    """Raise PermissionDenied unless ``user`` holds the role of ``action``, before showing its form.

    Showing a form changes nothing, so it is not audited, and read-only mode does not hide it: the
    save is what gets refused, with the reason.
    """
    action_role_require(user=user, action=action)


def alert_rule_authorize(*, user: UserLike | None, action: str, rule: AlertRule | None = None) -> None:
    """Raise PermissionDenied unless ``user`` may run ``action`` now; only a refusal is audited.

    Views call this before validating the posted form, so a viewer gets a 403 whatever they sent and
    the refusal leaves its row, while an admin's invalid form is shown back without one (nothing was
    attempted); the ``alert_rule_<verb>`` function then writes the row of the attempt itself.
    """
    action_check(user=user, conn=_conn(rule), action=action, params=_params(rule), target=_target(rule))


def alert_rule_create(*, user: UserLike | None, data: dict[str, Any]) -> AlertRule:
    """Create a rule from validated form data (``webhook_url`` included)."""
    with action_audit(user=user, conn="", action="alert_rule.create") as record:
        rule = AlertRule.objects.create(
            **{f: data[f] for f in RULE_FIELDS},
            webhook_url=data.get("webhook_url") or "",
            created_by=user if user is not None and user.is_authenticated else None,
        )
        record.conn, record.params, record.target = rule.connection, alert_rule_params(rule), _target(rule)
    return rule


def alert_rule_update(*, user: UserLike | None, rule: AlertRule, data: dict[str, Any]) -> AlertRule:
    """Change a rule; the audit row lists each changed field as ``[old, new]``.

    ``data`` holds ``webhook_url`` only when the webhook is to change (a new URL, or "" to remove
    it). Open alerts are left alone: the next evaluation resolves those the new condition no longer
    holds for (all of them when the rule was disabled).
    """
    before = alert_rule_params(rule)
    with action_audit(
        user=user, conn=rule.connection, action="alert_rule.update", params=before, target=_target(rule)
    ) as record:
        old_url = rule.webhook_url
        for f in RULE_FIELDS:
            setattr(rule, f, data[f])
        if "webhook_url" in data:
            rule.webhook_url = data["webhook_url"] or ""
        rule.save()
        after = alert_rule_params(rule)
        changes = {k: [before[k], v] for k, v in after.items() if before.get(k) != v}
        if rule.webhook_url != old_url and "webhook" not in changes:
            changes["webhook"] = [before["webhook"], f"{after['webhook']} (new URL)"]
        record.conn, record.params, record.target = rule.connection, {**after, "changes": changes}, _target(rule)
    return rule


def alert_rule_delete(*, user: UserLike | None, rule: AlertRule) -> None:
    """Delete a rule and its alerts (their history goes with it; disable a rule to keep it)."""
    params = alert_rule_params(rule)
    with action_audit(
        user=user, conn=rule.connection, action="alert_rule.delete", params=params, target=_target(rule)
    ) as record:
        record.params["alerts_deleted"] = rule.alerts.count()
        rule.delete()


def _conn(rule: AlertRule | None) -> str:
    return rule.connection if rule is not None else ""


def _params(rule: AlertRule | None) -> dict[str, Any]:
    return alert_rule_params(rule) if rule is not None else {}


def _target(rule: AlertRule | None) -> str:
    """How the audit page names the rule (its parameters hold the rest)."""
    return f"alert rule {rule.name}" if rule is not None and rule.name else ""
