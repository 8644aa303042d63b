"""Alert rules and the alerts they raise.

A rule names a condition over the metadata mirror and the metric snapshots (see
:mod:`streams_app.alerts.evaluation` for how each kind is evaluated), which connections, streams and groups it
watches (globs), or for a ``family_*`` kind which stream family (its glob, as the families page shows it),
and optionally a webhook to tell. An alert is one rule firing for one target (a stream, a group, a
consumer or a family): it is ``open`` while the condition holds and ``resolved`` after, and
is never reopened; the next breach opens a new row, so the table is the history of incidents.

Targets are kept by value (connection, key bytes, group and consumer names) rather than by foreign
key to the mirror: an alert about a stream that has since been deleted must still read correctly.
"""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone

__all__ = ["FAMILY_KINDS", "Alert", "AlertRule"]


class AlertRule(models.Model):
    """A condition the console checks after every metric snapshot. Edited by admins, audited."""

    class Kind(models.TextChoices):
        GROUP_LAG_ABOVE = "group_lag_above", "group lag above N for T"
        # The value keeps its first name; the rule reads the longest idle over the PEL, not the lowest ID's.
        OLDEST_PENDING_ABOVE = "oldest_pending_above", "a pending entry idle longer than T (longest pending idle)"
        DLQ_GROWTH = "dlq_growth", "DLQ depth grew by N within T"
        CONSUMER_INACTIVE = "consumer_inactive", "consumer inactive for T"
        STREAM_SILENT = "stream_silent", "stream that usually receives entries silent for T"
        # Stream families (docs/operations.md#stream-families), read from their newest family rows.
        FAMILY_KEYS_ABOVE = "family_keys_above", "family: keys above N for T"
        FAMILY_ENTRIES_ABOVE = "family_entries_above", "family: entries above N for T"
        FAMILY_PENDING_ABOVE = "family_pending_above", "family: pending entries above N for T"
        FAMILY_DLQ_DEPTH_ABOVE = "family_dlq_depth_above", "family: DLQ depth above N for T"
        FAMILY_DLQ_GROWTH = "family_dlq_growth", "family: DLQ depth grew by N within T"
        FAMILY_RATE_ABOVE = "family_rate_above", "family: entries per second above N for T"

    name = models.CharField(max_length=100)
    kind = models.CharField(max_length=32, choices=Kind.choices)
    connection = models.CharField(max_length=100, blank=True, help_text="Blank: every connection.")
    stream_glob = models.CharField(max_length=255, default="*", help_text="Stream keys to watch (glob).")
    group_glob = models.CharField(
        max_length=255, default="*", blank=True, help_text="Groups to watch (glob; group and consumer rules)."
    )
    family = models.CharField(
        max_length=255, default="", blank=True,
        help_text="Family rules: the family's glob as the families page shows it (blank or *: every family).",
    )
    threshold = models.FloatField(default=0, help_text="N: entries of lag, or entries of DLQ growth.")
    for_seconds = models.PositiveIntegerField(default=300, help_text="T, in seconds.")
    enabled = models.BooleanField(default=True)
    webhook_url = models.URLField(max_length=500, blank=True, help_text="POSTed as JSON on open and resolve.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="alert_rules"
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["name", "pk"]

    def __str__(self) -> str:
        return f"{self.name} ({self.kind})"

    @property
    def watches_family(self) -> bool:
        return self.kind in FAMILY_KINDS


#: The kinds whose target is a stream family rather than a stream, group or consumer.
FAMILY_KINDS = frozenset(k for k in AlertRule.Kind if k.startswith("family_"))


class Alert(models.Model):
    """One rule firing for one target, from the tick it opened to the tick it resolved."""

    class State(models.TextChoices):
        OPEN = "open", "open"
        RESOLVED = "resolved", "resolved"

    rule = models.ForeignKey(AlertRule, on_delete=models.CASCADE, related_name="alerts")
    connection = models.CharField(max_length=100)
    target_key = models.BinaryField(help_text="The stream key's raw bytes.")
    key_hash = models.CharField(max_length=64, help_text="SHA-256 hex of the key: finds a page's alerts.")
    target_text = models.TextField(help_text="The stream key as text (non-UTF-8 bytes as \\xNN).")
    target_group = models.TextField(blank=True, help_text="The group name as text.")
    target_group_name = models.BinaryField(null=True, blank=True, help_text="The group name's raw bytes.")
    target_consumer = models.TextField(blank=True)
    target_hash = models.CharField(
        max_length=64, editable=False, help_text="SHA-256 of the target, for the one-open-alert constraint."
    )
    state = models.CharField(max_length=16, choices=State.choices, default=State.OPEN, db_index=True)
    since = models.DateTimeField(null=True, blank=True, help_text="When the condition began to hold.")
    opened_at = models.DateTimeField(default=timezone.now, db_index=True)
    resolved_at = models.DateTimeField(null=True, blank=True)
    last_value = models.FloatField(null=True, blank=True)
    message = models.TextField(blank=True)
    notified_at = models.DateTimeField(null=True, blank=True)
    notified_state = models.CharField(max_length=16, blank=True, help_text="The state last delivered.")
    notify_attempts = models.PositiveIntegerField(default=0)
    notify_error = models.TextField(blank=True)

    class Meta:
        ordering = ["-opened_at", "-pk"]
        constraints = [
            models.UniqueConstraint(
                fields=["rule", "target_hash"],
                condition=models.Q(state="open"),
                name="alert_one_open_per_rule_target",
            )
        ]
        indexes = [models.Index(fields=["connection", "key_hash", "state"], name="alert_page_state")]

    def __str__(self) -> str:
        return f"{self.rule.name}: {self.target_text} ({self.state})"

    @property
    def is_open(self) -> bool:
        return self.state == self.State.OPEN
