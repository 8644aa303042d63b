"""Background jobs: the row a Celery task resumes from."""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.db import models
from django.utils import timezone


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
        """The job as ``GET /api/v1/jobs/<id>`` returns it."""
        return {
            "id": self.pk,
            "kind": self.kind,
            "state": self.state,
            "done": self.done,
            "total": self.total,
            "error": self.error or None,
        }

