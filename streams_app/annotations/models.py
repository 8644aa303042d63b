"""The :class:`Annotation` model: a moment or a span of time with a note, as Grafana's annotations are.

An annotation is written through the API (``POST /api/v1/annotations``, a deploy script's marker) or the
incident timeline's form, by :func:`streams_app.services.annotation_create`, and shown on every chart
whose window it falls in and on the timeline. Its scope says where: every connection (``connection``
blank), one connection (``stream`` null), or one stream of a connection, whose stream, group and DLQ
charts show it. Keys are bytes, found by their SHA-256 (``key_hash``) like the metrics mirror's.

Text and tags are the writer's words, shown through autoescaped templates and ``textContent`` only.
"""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from django.conf import settings
from django.db import models
from django.utils import timezone

from streams_app.metrics.models import name_hash

#: Sizes an annotation may have: the text of a note, its tags, and the longest span it may cover.
TEXT_MAX = 2000
TAG_MAX = 50
TAGS_MAX = 10
KEY_TEXT_MAX = 1000


class AnnotationQuerySet(models.QuerySet["Annotation"]):
    def shown_on(
        self, *, conn: str | None = None, keys: Sequence[bytes] = (), every_stream: bool = False
    ) -> AnnotationQuerySet:
        """The annotations a chart of ``conn`` (about the streams ``keys``) shows: those of every
        connection, of ``conn`` as a whole, and of each of ``keys`` (of each stream of ``conn`` with
        ``every_stream``: the connection's own timeline). No ``conn``: every annotation."""
        if conn is None:
            return self.all()
        if every_stream:
            return self.filter(models.Q(connection="") | models.Q(connection=conn))
        scope = models.Q(connection="") | models.Q(connection=conn, key_hash="")
        if keys:
            scope |= models.Q(connection=conn, key_hash__in=[name_hash(k) for k in keys])
        return self.filter(scope)

    def overlapping(self, start: datetime, end: datetime) -> AnnotationQuerySet:
        """Those whose moment or span meets ``[start, end]``: a moment inside it, or a span across it."""
        return self.filter(at__lte=end, end_at__gte=start)


class Annotation(models.Model):
    """A note at ``at``, or over ``at`` to ``end_at`` (equal for a moment: one overlap query serves both)."""

    at = models.DateTimeField(help_text="When it happened, or when the span begins.")
    end_at = models.DateTimeField(help_text="When the span ends; equal to 'at' for a moment.")
    text = models.TextField(max_length=TEXT_MAX)
    tags = models.JSONField(default=list, blank=True, help_text="Short labels, e.g. deploy, incident.")
    connection = models.CharField(max_length=100, blank=True, help_text="Blank: every connection.")
    key = models.BinaryField(null=True, blank=True, editable=False, help_text="The stream key's raw bytes.")
    key_hash = models.CharField(max_length=64, blank=True, editable=False, help_text="SHA-256 hex of the key.")
    key_text = models.CharField(max_length=KEY_TEXT_MAX, blank=True, help_text="The key as text.")
    created_by = models.ForeignKey(
        settings.AUTH_USER_MODEL, null=True, blank=True, on_delete=models.SET_NULL, related_name="annotations"
    )
    username = models.CharField(max_length=150, blank=True, help_text="Who wrote it, kept if the account goes.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)

    objects = AnnotationQuerySet.as_manager()

    class Meta:
        ordering = ["at", "pk"]
        indexes = [
            models.Index(fields=["at"], name="annotation_at"),
            models.Index(fields=["connection", "key_hash", "at"], name="annotation_scope_at"),
        ]

    def __str__(self) -> str:
        return f"{self.at:%Y-%m-%d %H:%M:%S} {self.text[:60]}"

    @property
    def is_span(self) -> bool:
        return self.end_at > self.at

    @property
    def scope_text(self) -> str:
        """Where it shows, as a person reads it."""
        if not self.connection:
            return "every connection"
        return f"{self.connection} · {self.key_text}" if self.key_hash else self.connection
