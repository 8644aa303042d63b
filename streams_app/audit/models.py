"""The audit trail: one row per mutation, never edited."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class AuditEvent(models.Model):
    """One mutation attempted through the console: who, when, on what, with which result.

    Written once per mutating request (docs/api.md#roles-and-the-audit-trail) and never edited. The user is linked while it
    exists, and its username is copied so the trail still reads correctly after the account is deleted.
    Stream keys are arbitrary bytes, so the key is kept raw in ``target_stream`` and as display text
    (non-UTF-8 bytes escaped as ``\\xNN``) in ``target_display`` for listing and searching.
    """

    class Outcome(models.TextChoices):
        OK = "ok", "ok"
        ERROR = "error", "error"
        DENIED = "denied", "denied"

    who = models.ForeignKey(
        settings.AUTH_USER_MODEL,
        null=True,
        blank=True,
        on_delete=models.SET_NULL,
        related_name="audit_events",
    )
    username = models.CharField(max_length=150, blank=True, db_index=True)
    # Who the user is at their OpenID provider, for users who signed in through it: the provider's own
    # names for them, which its logs and the team's directory use (empty for local accounts).
    oidc_issuer = models.CharField(max_length=255, blank=True, db_default="", help_text="The OpenID provider's issuer.")
    oidc_subject = models.CharField(max_length=255, blank=True, db_default="", help_text="The user's subject at that provider.")
    at = models.DateTimeField(default=timezone.now, db_index=True)
    connection = models.CharField(max_length=100, blank=True)
    action = models.CharField(max_length=64, db_index=True, help_text="e.g. 'claim', 'dlq.requeue'.")
    target_stream = models.BinaryField(null=True, blank=True, help_text="The stream key's raw bytes.")
    target_display = models.TextField(blank=True, help_text="The stream key as text.")
    target_group = models.TextField(blank=True)
    target_ids = models.JSONField(default=list, blank=True, help_text="Entry IDs the action named.")
    parameters = models.JSONField(default=dict, blank=True)
    outcome = models.CharField(max_length=8, choices=Outcome.choices)
    error = models.TextField(blank=True)
    affected = models.IntegerField(default=0, help_text="How many entries the action changed.")
    duration_ms = models.IntegerField(default=0)

    class Meta:
        ordering = ["-at"]

    def __str__(self) -> str:
        target = f" {self.target_display}" if self.target_display else ""
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.username or '-'} {self.action}{target}: {self.outcome}"
