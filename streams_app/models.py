"""The console's own records: API tokens, the audit trail and background jobs.

Redis holds the bus; the database holds only what must outlive a Redis flush or be queried by the
console's users (who did what, which job is where, which tokens exist).
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """A personal API token, sent as ``Authorization: Bearer <token>``.

    Only the SHA-256 digest of the token is stored, so a database leak yields no usable token; the
    first characters (``prefix``) are kept in clear so a user can tell tokens apart when revoking one.
    Tokens are created and looked up through :mod:`streams_app.auth`.
    """

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'deploy script'.")
    prefix = models.CharField(max_length=8, help_text="The token's first characters, to recognise it.")
    digest = models.CharField(
        max_length=64, unique=True, editable=False, help_text="SHA-256 hex of the token."
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class AuditEvent(models.Model):
    """One mutation attempted through the console: who, when, on what, with which result.

    Written once per mutating request (SPEC section 3) and never edited. The user is linked while it
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


class Job(models.Model):
    """A long-running action (bulk requeue, replay) carried out by a Celery task.

    The Redis broker may deliver a task again after a worker dies, so a job keeps in ``progress`` the
    cursor it has reached (e.g. the last DLQ ID requeued): a re-run resumes from there instead of
    starting over. ``done``/``total`` are what the progress bar and ``GET /api/v1/jobs/<id>`` show.
    """

    class State(models.TextChoices):
        QUEUED = "queued", "queued"
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"
        CANCELLED = "cancelled", "cancelled"

    FINISHED_STATES = frozenset({State.DONE, State.FAILED, State.CANCELLED})

    kind = models.CharField(max_length=64, help_text="e.g. 'dlq.requeue_all', 'replay'.")
    connection = models.CharField(max_length=100, blank=True)
    parameters = models.JSONField(default=dict, blank=True)
    state = models.CharField(max_length=16, choices=State.choices, default=State.QUEUED, db_index=True)
    done = models.BigIntegerField(default=0)
    total = models.BigIntegerField(null=True, blank=True, help_text="Unknown until the job has counted.")
    error = models.TextField(blank=True)
    progress = models.JSONField(default=dict, blank=True, help_text="Resumable cursor, owned by the task.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="jobs"
    )
    created_at = models.DateTimeField(default=timezone.now, db_index=True)
    started_at = models.DateTimeField(null=True, blank=True)
    finished_at = models.DateTimeField(null=True, blank=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]

    def __str__(self) -> str:
        return f"Job {self.pk} {self.kind} ({self.state})"

    @property
    def is_finished(self) -> bool:
        return self.state in self.FINISHED_STATES

    def to_api(self) -> dict[str, Any]:
        """The job as ``GET /api/v1/jobs/<id>`` returns it (SPEC section 4)."""
        return {
            "id": self.pk,
            "kind": self.kind,
            "state": self.state,
            "done": self.done,
            "total": self.total,
            "error": self.error or None,
        }


from streams_app.models_alerts import *  # noqa: E402,F403 - alert rules and alerts (issue 6)
from streams_app.models_metrics import *  # noqa: E402,F403 - metrics models (issue 6)
from streams_app.models_pipeline import *  # noqa: E402,F403 - export checkpoints and rollups (issue 7)
