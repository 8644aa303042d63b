"""The masking rules an admin keeps on the admin page (the settings' rules are read from the environment)."""

from __future__ import annotations

from django.core.exceptions import ValidationError
from django.db import models
from django.utils import timezone

from busconsole.env import mask_path_split

__all__ = ["MaskRule"]


def _validate_path(value: str) -> None:
    try:
        mask_path_split(value)
    except ValueError as exc:
        raise ValidationError(str(exc)) from None


class MaskRule(models.Model):
    """Hide one field (or one path inside a field's JSON) of the entries of the streams a glob selects."""

    class Action(models.TextChoices):
        MASK = "mask", "mask (shown as ••••)"
        HASH = "hash", "hash (keyed HMAC-SHA256, shown as hash:<12 hex>; equal values stay comparable)"
        REMOVE = "remove", "remove (the field or key is left out)"

    stream_glob = models.CharField(
        max_length=255, default="*", help_text="Stream keys the rule applies to (Redis glob, e.g. orders*)."
    )
    field_path = models.CharField(
        max_length=255,
        validators=[_validate_path],
        help_text="A top-level field (email), or a path into its JSON (data.customer.email); * is any one segment.",
    )
    action = models.CharField(max_length=8, choices=Action.choices, default=Action.MASK)
    enabled = models.BooleanField(default=True)
    note = models.CharField(
        max_length=200, blank=True, help_text="Why the rule exists (shown to admins only)."
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["stream_glob", "field_path", "pk"]

    def __str__(self) -> str:
        return f"{self.stream_glob} {self.field_path} -> {self.action}"
