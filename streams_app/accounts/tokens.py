"""Personal API tokens: created once, stored as a digest, looked up from a bearer header.

The request plumbing (reading the ``Authorization`` header, and only on the paths tokens open) lives in
``streams_app.middleware``; issuing and revoking a token as a user's audited action in
:mod:`streams_app.services.tokens`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import UTC, datetime, timedelta
from typing import TYPE_CHECKING

from django.utils import timezone

from streams_app.accounts.models import ApiToken
from streams_app.accounts.roles import ROLE_GROUPS, role_ceiling_set

if TYPE_CHECKING:
    from django.contrib.auth.models import User

TOKEN_PREFIX = "bct_"
# 30 random bytes are 40 URL-safe base64 characters: 240 bits, far beyond guessing.
_TOKEN_RE = re.compile(r"bct_[A-Za-z0-9_-]{40}")
_LAST_USED_RESOLUTION = timedelta(minutes=1)
#: The longest life a token can be given, in days; without an expiry it lives until revoked.
TOKEN_MAX_DAYS = 3650
_INVALID = "Invalid or revoked API token."


class TokenRefused(Exception):
    """A bearer token that opens nothing: ``code`` and ``message`` are what the 401 answer says."""

    def __init__(self, code: str, message: str) -> None:
        super().__init__(message)
        self.code = code
        self.message = message


def token_digest(raw: str) -> str:
    """SHA-256 hex of a raw token: what is stored and looked up.

    A plain hash (no salt, no slow KDF) is right here: tokens are 240-bit random strings, so there
    is nothing to brute-force, and a deterministic digest allows an indexed lookup.
    """
    return hashlib.sha256(raw.encode()).hexdigest()


def token_expiry(days: int | None) -> datetime | None:
    """When a token given ``days`` of life from now expires (None: never); ValueError outside 1..TOKEN_MAX_DAYS."""
    if days is None:
        return None
    if not 1 <= days <= TOKEN_MAX_DAYS:
        raise ValueError(f"A token lives between 1 and {TOKEN_MAX_DAYS} days; {days} is outside.")
    return timezone.now() + timedelta(days=days)


def token_create(
    *, user: User, name: str, expires_at: datetime | None = None, role_ceiling: str = ""
) -> tuple[ApiToken, str]:
    """Create a token for ``user``; returns the row and the raw token, which is never stored.

    ``role_ceiling`` is "" (the owner's role) or a role name; anything else is a ValueError.
    """
    if role_ceiling not in ApiToken.Ceiling.values:
        raise ValueError(f"{role_ceiling!r} is not a role; use one of {', '.join(ROLE_GROUPS)}.")
    raw = TOKEN_PREFIX + secrets.token_urlsafe(30)
    token = ApiToken.objects.create(
        user=user, name=name, prefix=raw[:8], digest=token_digest(raw), expires_at=expires_at,
        role_ceiling=role_ceiling,
    )
    return token, raw


def token_authenticate(header_value: str) -> User:
    """The active user owning the token in an ``Authorization: Bearer <token>`` value, capped at its ceiling.

    Raises :class:`TokenRefused`: anything malformed, unknown or belonging to an inactive account gets
    one message that does not say which; an expired token says so and when, since its holder had it
    legitimately and needs to know to make a new one. ``last_used_at`` is written at most once a
    minute per token, so a busy script does not turn every API read into a database write.
    """
    parts = (header_value or "").split()
    if len(parts) != 2 or parts[0].lower() != "bearer" or not _TOKEN_RE.fullmatch(parts[1]):
        raise TokenRefused("unauthorized", _INVALID)
    digest = token_digest(parts[1])
    token = ApiToken.objects.select_related("user").filter(digest=digest).first()
    # The lookup is by a hash of the secret, so its timing reveals nothing useful; the comparison
    # below is constant-time anyway, as a second line should the lookup ever become fuzzy.
    if token is None or not hmac.compare_digest(token.digest, digest) or not token.user.is_active:
        raise TokenRefused("unauthorized", _INVALID)
    now = timezone.now()
    if token.expires_at is not None and token.expires_at <= now:
        when = token.expires_at.astimezone(UTC).strftime("%Y-%m-%d %H:%M UTC")
        raise TokenRefused(
            "token_expired", f"This API token ({token.prefix}…) expired at {when}; create a new one at /tokens/."
        )
    if token.last_used_at is None or now - token.last_used_at >= _LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    user = token.user
    if token.role_ceiling:
        role_ceiling_set(user, ROLE_GROUPS[token.role_ceiling])
    return user


def user_for_bearer(header_value: str) -> User | None:
    """:func:`token_authenticate`, with None for any refused token."""
    try:
        return token_authenticate(header_value)
    except TokenRefused:
        return None
