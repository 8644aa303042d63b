"""Alert rules as admins edit them: the form and its durations (N and T of each kind).

Creating, changing and deleting a rule are actions like any other, checked and audited in
:mod:`streams_app.services.alert_rules`.
"""

from __future__ import annotations

import re
from typing import Any, cast

from django import forms
from django.conf import settings

from streams_app.alerts import egress
from streams_app.alerts.models import FAMILY_KINDS, AlertRule
from streams_app.metrics.charts import format_value
from streams_app.redis_ops import client

#: T is at most a day: group rules look back over raw samples, which are kept 48 hours.
MAX_FOR_SECONDS = 86400
MIN_FOR_SECONDS = 10
_DURATION = re.compile(r"^\s*(?:(\d+)\s*d)?\s*(?:(\d+)\s*h)?\s*(?:(\d+)\s*m)?\s*(?:(\d+)\s*s?)?\s*$", re.I)

#: What N and T mean for each kind, shown next to the form.
KIND_HELP: dict[str, tuple[str, str]] = {
    AlertRule.Kind.GROUP_LAG_ABOVE: ("entries of lag", "how long the lag must stay above N"),
    AlertRule.Kind.OLDEST_PENDING_ABOVE: (
        "not used",
        "longest idle time among the group's pending entries (the maximum over the PEL, whatever their IDs)",
    ),
    AlertRule.Kind.DLQ_GROWTH: ("new dead letters (at least 1)", "the window the growth is measured over"),
    AlertRule.Kind.CONSUMER_INACTIVE: ("not used", "idle time of the consumer"),
    AlertRule.Kind.STREAM_SILENT: (
        "entries it usually receives in the hour (or T) before going silent (at least 1)",
        "how long without a new entry",
    ),
    AlertRule.Kind.FAMILY_KEYS_ABOVE: ("keys in the family", "how long the family's rows must stay above N"),
    AlertRule.Kind.FAMILY_ENTRIES_ABOVE: ("entries in the family", "how long the family's rows must stay above N"),
    AlertRule.Kind.FAMILY_PENDING_ABOVE: ("pending entries, all its groups", "how long the rows must stay above N"),
    AlertRule.Kind.FAMILY_DLQ_DEPTH_ABOVE: ("dead letters feeding back into the family", "how long above N"),
    AlertRule.Kind.FAMILY_DLQ_GROWTH: ("new dead letters (at least 1)", "the window the growth is measured over"),
    AlertRule.Kind.FAMILY_RATE_ABOVE: ("entries added per second", "how long the rows must stay above N"),
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
    family = forms.CharField(
        max_length=255, required=False, strip=False,
        help_text="Family conditions only: the family's glob as the families page shows it, e.g. progress:* "
        "(blank: every family)",
    )
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
                "stream_glob": rule.stream_glob, "group_glob": rule.group_glob, "family": rule.family,
                "threshold": rule.threshold,
                "for_duration": duration_text(rule.for_seconds), "enabled": rule.enabled,
            }
        super().__init__(*args, **kwargs)
        names = [c.name for c in client.connections()]
        if rule is not None and rule.connection and rule.connection not in names:
            names.append(rule.connection)  # a connection since removed from settings stays selectable
        cast(forms.ChoiceField, self.fields["connection"]).choices = [("", "all connections"), *((n, n) for n in names)]

    def clean_webhook_url(self) -> str:
        """Refuse credentials, odd schemes and ports, and internal addresses written in the URL.

        A first line only, for a clear message while the admin is here: the addresses are checked
        again before every send (:mod:`streams_app.alerts.egress`), since DNS answers change.
        """
        url = self.cleaned_data.get("webhook_url") or ""
        if url:
            problem = egress.url_refusal_at_save(url, settings.BUSCONSOLE_WEBHOOK_ALLOW)
            if problem:
                raise forms.ValidationError(problem)
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
        assert data is not None  # Form.clean returns cleaned_data; django-stubs allow an override None
        data["threshold"] = data.get("threshold") or 0.0
        data["group_glob"] = data.get("group_glob") or "*"
        if data.get("for_duration") is not None:
            data["for_seconds"] = data["for_duration"]
        kind = data.get("kind")
        data["family"] = data.get("family") or ""
        if kind in (AlertRule.Kind.DLQ_GROWTH, AlertRule.Kind.STREAM_SILENT, AlertRule.Kind.FAMILY_DLQ_GROWTH) and (
            data["threshold"] < 1
        ):
            data["threshold"] = 1.0
        if kind is not None and kind not in FAMILY_KINDS and data["family"]:
            self.add_error("family", "Only the family conditions watch a family: clear this, or pick a family condition.")
        if self.rule is None:
            pass  # a new rule: webhook_url as given (blank: none)
        elif data.get("remove_webhook"):
            data["webhook_url"] = ""
        elif not data.get("webhook_url"):
            data.pop("webhook_url", None)  # keep the current one
        return data


#: The fields a rule form edits (the webhook apart: it is never sent back to the browser).
RULE_FIELDS = (
    "name", "kind", "connection", "stream_glob", "group_glob", "family", "threshold", "for_seconds", "enabled",
)
