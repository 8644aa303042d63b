"""Personal API tokens (stored hashed)."""

from __future__ import annotations

from django.conf import settings
from django.db import models
from django.utils import timezone


class ApiToken(models.Model):
    """A personal API token, sent as ``Authorization: Bearer <token>`` to ``/api/v1/`` and ``/metrics``.

    Only the SHA-256 digest of the token is stored, so a database leak yields no usable token; the
    first characters (``prefix``) are kept in clear so a user can tell tokens apart when revoking one.
    Tokens are created and looked up through :mod:`streams_app.accounts.tokens`.

    A token acts as its owner, capped at ``role_ceiling`` when one is set (a dashboard's token can be a
    viewer's while its owner operates), and stops working at ``expires_at`` when one is set. The cap is
    a ceiling, not a grant: the owner's current role still applies, so demoting the owner demotes the
    token.
    """

    class Ceiling(models.TextChoices):
        NONE = "", "owner's role"
        VIEWER = "viewer", "viewer"
        OPERATOR = "operator", "operator"
        ADMIN = "admin", "admin"

    user = models.ForeignKey(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="api_tokens")
    name = models.CharField(max_length=100, help_text="What the token is for, e.g. 'deploy script'.")
    prefix = models.CharField(max_length=8, help_text="The token's first characters, to recognise it.")
    digest = models.CharField(
        max_length=64, unique=True, editable=False, help_text="SHA-256 hex of the token."
    )
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_used_at = models.DateTimeField(null=True, blank=True, editable=False)
    expires_at = models.DateTimeField(
        null=True, blank=True, editable=False, help_text="When the token stops working; never if empty."
    )
    role_ceiling = models.CharField(
        max_length=16, blank=True, default=Ceiling.NONE, choices=Ceiling.choices, editable=False,
        help_text="The highest role the token acts with; its owner's role if empty.",
    )

    class Meta:
        ordering = ["-created_at"]
        verbose_name = "API token"

    def __str__(self) -> str:
        return f"{self.name} ({self.prefix}…)"


class OidcIdentity(models.Model):
    """The account an OpenID provider's user signs in to: the provider's ``(issuer, subject)`` pair.

    The subject is the provider's stable id for a person (an email or a username can be reused or
    changed), so it alone links a login to an account; the account is created at the first login and
    never linked by name or email to an account made otherwise, which would let whoever the provider
    calls "admin" take over the local break-glass admin. Audit rows copy the pair
    (:mod:`streams_app.audit.records`).
    """

    user = models.OneToOneField(settings.AUTH_USER_MODEL, on_delete=models.CASCADE, related_name="oidc_identity")
    issuer = models.CharField(max_length=255)
    subject = models.CharField(max_length=255)
    groups = models.JSONField(default=list, blank=True, help_text="The provider's groups at the last login.")
    created_at = models.DateTimeField(default=timezone.now, editable=False)
    last_login_at = models.DateTimeField(default=timezone.now)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["issuer", "subject"], name="oidc_identity_issuer_subject")]
        verbose_name = "single sign-on identity"

    def __str__(self) -> str:
        return f"{self.subject} at {self.issuer}"
