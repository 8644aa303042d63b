"""Alert rules as admins edit them: the form, and create / update / delete with their audit rows.

Only admins change rules, and nobody while the console is read-only (SPEC section 2:
``BUSCONSOLE_READ_ONLY`` blocks every mutating action). Each change writes one AuditEvent
(``alert_rule.create``, ``alert_rule.update`` with ``[old, new]`` per changed field, ``alert_rule.delete``);
a refused attempt writes one ``denied`` row, as every other action of the console does. Webhook URLs
appear in audit rows and pages by scheme and host only (their paths are often secrets).
"""

from __future__ import annotations

import re
import time
from typing import TYPE_CHECKING, Any

from django import forms
from django.core.exceptions import PermissionDenied
from django.db import transaction

from streams_app.accounts import auth
from streams_app.alerts.models import AlertRule
from streams_app.alerts.webhooks import webhook_display
from streams_app.audit.models import AuditEvent
from streams_app.metrics.charts import format_value
from streams_app.redis_ops import client

if TYPE_CHECKING:
    from streams_app.accounts.auth import UserLike

#: T is at most a day: group rules look back over raw samples, which are kept 48 hours.
MAX_FOR_SECONDS = 86400
MIN_FOR_SECONDS = 10
_DURATION = re.compile(r"^\s*(?:(\d+)\s*d)?\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m)?\s*(?:(\d+)\s*s?)?\s*$", re.I)

#: What N and T mean for each kind, shown next to the form.
KIND_HELP: dict[str, tuple[str, str]] = {
    AlertRule.Kind.GROUP_LAG_ABOVE: ("entries of lag", "how long the lag must stay above N"),
    AlertRule.Kind.OLDEST_PENDING_ABOVE: ("not used", "idle time of the oldest pending entry"),
    AlertRule.Kind.DLQ_GROWTH: ("new dead letters (at least 1)", "the window the growth is measured over"),
    AlertRule.Kind.CONSUMER_INACTIVE: ("not used", "idle time of the consumer"),
    AlertRule.Kind.STREAM_SILENT: (
        "entries it usually receives in the hour (or T) before going silent (at least 1)",
        "how long without a new entry",
    ),
}


def parse_duration(text: str) -> int:
    """``"90"``, ``"90s"``, ``"5m"``, ``"1h 30m"``, ``"1d"`` -> seconds; ValueError otherwise."""
    match = _DURATION.match(text or "")
    if not match or not any(match.groups()):
        raise ValueError(text)
    days, hours, minutes, seconds = (int(g or 0) for g in match.groups())
    return days * 86400 + hours * 3600 + minutes * 60 + seconds


def duration_text(seconds: int) -> str:
    """Seconds as the form shows them back (``"1h 30m"``)."""
    return format_value(seconds * 1000, "ms") if seconds >= 1 else "0s"


class AlertRuleForm(forms.Form):
    """A rule's fields. On edit, a blank webhook keeps the current one (it is never sent back to the
    browser, since its path may hold a secret); ``remove_webhook`` clears it."""

    name = forms.CharField(max_length=100)
    kind = forms.ChoiceField(choices=AlertRule.Kind.choices)
    connection = forms.ChoiceField(required=False)
    stream_glob = forms.CharField(max_length=255, initial="*", help_text="e.g. orders:* (glob, case-sensitive)")
    group_glob = forms.CharField(max_length=255, required=False, initial="*")
    threshold = forms.FloatField(min_value=0, initial=0, required=False, label="N (threshold)")
    for_duration = forms.CharField(max_length=32, initial="5m", label="T (duration)", help_text="e.g. 90s, 5m, 1h 30m")
    enabled = forms.BooleanField(required=False, initial=True)
    webhook_url = forms.URLField(max_length=500, required=False, assume_scheme="https")
    remove_webhook = forms.BooleanField(required=False)

    def __init__(self, *args: Any, rule: AlertRule | None = None, **kwargs: Any) -> None:
        self.rule = rule
        if rule is not None and "initial" not in kwargs:
            kwargs["initial"] = {
                "name": rule.name, "kind": rule.kind, "connection": rule.connection,
                "stream_glob": rule.stream_glob, "group_glob": rule.group_glob, "threshold": rule.threshold,
                "for_duration": duration_text(rule.for_seconds), "enabled": rule.enabled,
            }
        super().__init__(*args, **kwargs)
        names = [c.name for c in client.connections()]
        if rule is not None and rule.connection and rule.connection not in names:
            names.append(rule.connection)  # a connection since removed from settings stays selectable
        self.fields["connection"].choices = [("", "all connections"), *((n, n) for n in names)]

    def clean_webhook_url(self) -> str:
        url = self.cleaned_data.get("webhook_url") or ""
        if url and not url.lower().startswith(("http://", "https://")):
            raise forms.ValidationError("The webhook must be an http:// or https:// URL.")
        return url

    def clean_for_duration(self) -> int:
        try:
            seconds = parse_duration(self.cleaned_data["for_duration"])
        except ValueError:
            raise forms.ValidationError("Give T as seconds or like 90s, 5m, 1h 30m.") from None
        if not MIN_FOR_SECONDS <= seconds <= MAX_FOR_SECONDS:
            raise forms.ValidationError(f"T must be between {MIN_FOR_SECONDS} seconds and 24 hours.")
        return seconds

    def clean(self) -> dict[str, Any]:
        data = super().clean()
        data["threshold"] = data.get("threshold") or 0.0
        data["group_glob"] = data.get("group_glob") or "*"
        if data.get("for_duration") is not None:
            data["for_seconds"] = data["for_duration"]
        kind = data.get("kind")
        if kind in (AlertRule.Kind.DLQ_GROWTH, AlertRule.Kind.STREAM_SILENT) and data["threshold"] < 1:
            data["threshold"] = 1.0
        if self.rule is None:
            pass  # a new rule: webhook_url as given (blank: none)
        elif data.get("remove_webhook"):
            data["webhook_url"] = ""
        elif not data.get("webhook_url"):
            data.pop("webhook_url", None)  # keep the current one
        return data


RULE_FIELDS = ("name", "kind", "connection", "stream_glob", "group_glob", "threshold", "for_seconds", "enabled")


def rule_params(rule: AlertRule) -> dict[str, Any]:
    """A rule as its audit rows record it: the webhook by host only (its path is often a secret)."""
    params: dict[str, Any] = {"rule_id": rule.pk, **{f: getattr(rule, f) for f in RULE_FIELDS}}
    params["webhook"] = webhook_display(rule.webhook_url) or None
    return params


def _audit(
    *, user: UserLike | None, action: str, rule: AlertRule | None, params: dict[str, Any], outcome: str,
    error: str = "", started: float,
) -> None:
    authenticated = user is not None and user.is_authenticated
    AuditEvent.objects.create(
        who=user if authenticated else None,
        username=user.get_username() if authenticated else "",
        connection=rule.connection if rule is not None else "",
        action=action,
        target_display=f"alert rule {rule.name}" if rule is not None and rule.name else "",
        parameters=params,
        outcome=outcome,
        error=error[:2000],
        duration_ms=round((time.monotonic() - started) * 1000),
    )


def alert_rule_authorize(*, user: UserLike | None, action: str, rule: AlertRule | None = None) -> None:
    """Raise PermissionDenied unless ``user`` may change alert rules; a refusal is audited.

    Admins only (SPEC section 3: admins manage the console), and nobody while the console is
    read-only (SPEC section 2: ``BUSCONSOLE_READ_ONLY`` blocks every mutating action).
    """
    started = time.monotonic()
    try:
        auth.require_writable()
        auth.require_role(user, auth.Role.ADMIN)
    except PermissionDenied as exc:
        params = rule_params(rule) if rule is not None else {}
        _audit(user=user, action=action, rule=rule, params=params, outcome=AuditEvent.Outcome.DENIED,
               error=str(exc), started=started)
        raise


def alert_rule_create(*, user: UserLike | None, data: dict[str, Any]) -> AlertRule:
    """Create a rule from validated form data (``webhook_url`` included)."""
    alert_rule_authorize(user=user, action="alert_rule.create")
    started = time.monotonic()
    with transaction.atomic():
        rule = AlertRule.objects.create(
            **{f: data[f] for f in RULE_FIELDS},
            webhook_url=data.get("webhook_url") or "",
            created_by=user if user is not None and user.is_authenticated else None,
        )
        _audit(user=user, action="alert_rule.create", rule=rule, params=rule_params(rule),
               outcome=AuditEvent.Outcome.OK, started=started)
    return rule


def alert_rule_update(*, user: UserLike | None, rule: AlertRule, data: dict[str, Any]) -> AlertRule:
    """Change a rule; the audit row lists each changed field as ``[old, new]``.

    ``data`` holds ``webhook_url`` only when the webhook is to change (a new URL, or "" to remove
    it). Open alerts are left alone: the next evaluation resolves those the new condition no longer
    holds for (all of them when the rule was disabled).
    """
    alert_rule_authorize(user=user, action="alert_rule.update", rule=rule)
    started = time.monotonic()
    before = rule_params(rule)
    old_url = rule.webhook_url
    for f in RULE_FIELDS:
        setattr(rule, f, data[f])
    if "webhook_url" in data:
        rule.webhook_url = data["webhook_url"] or ""
    with transaction.atomic():
        rule.save()
        after = rule_params(rule)
        changes = {k: [before[k], v] for k, v in after.items() if before.get(k) != v}
        if rule.webhook_url != old_url and "webhook" not in changes:
            changes["webhook"] = [before["webhook"], f"{after['webhook']} (new URL)"]
        _audit(user=user, action="alert_rule.update", rule=rule, params={**after, "changes": changes},
               outcome=AuditEvent.Outcome.OK, started=started)
    return rule


def alert_rule_delete(*, user: UserLike | None, rule: AlertRule) -> None:
    """Delete a rule and its alerts (their history goes with it; disable a rule to keep it)."""
    alert_rule_authorize(user=user, action="alert_rule.delete", rule=rule)
    started = time.monotonic()
    params = rule_params(rule)
    params["alerts_deleted"] = rule.alerts.count()
    with transaction.atomic():
        rule.delete()
        _audit(user=user, action="alert_rule.delete", rule=rule, params=params,
               outcome=AuditEvent.Outcome.OK, started=started)
