"""Personal API tokens (stored hashed)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """A personal API token, sent as ``Authorization: Bearer <token>``.

    Only the SHA-256 digest of the token is stored, so a database leak yields no usable token; the
    first characters (``prefix``) are kept in clear so a user can tell tokens apart when revoking one.
    Tokens are created and looked up through :mod:`streams_app.accounts.tokens`.
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
