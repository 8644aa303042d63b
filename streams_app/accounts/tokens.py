"""Personal API tokens: created once, stored as a digest, looked up from a bearer header.

The request plumbing (reading the ``Authorization`` header) lives in ``streams_app.middleware``;
issuing and revoking a token as a user's audited action in :mod:`streams_app.services.tokens`.
"""

from __future__ import annotations

import hashlib
import hmac
import re
import secrets
from datetime import timedelta
from typing import TYPE_CHECKING

from django.utils import timezone

from streams_app.accounts.models import ApiToken

if TYPE_CHECKING:
    from django.contrib.auth.base_user import AbstractBaseUser

TOKEN_PREFIX = "bct_"
# 30 random bytes are 40 URL-safe base64 characters: 240 bits, far beyond guessing.
_TOKEN_RE = re.compile(r"bct_[A-Za-z0-9_-]{40}")
_LAST_USED_RESOLUTION = timedelta(minutes=1)


def token_digest(raw: str) -> str:
    """SHA-256 hex of a raw token: what is stored and looked up.

    A plain hash (no salt, no slow KDF) is right here: tokens are 240-bit random strings, so there
    is nothing to brute-force, and a deterministic digest allows an indexed lookup.
    """
    return hashlib.sha256(raw.encode()).hexdigest()


def token_create(*, user: AbstractBaseUser, name: str) -> tuple[ApiToken, str]:
    """Create a token for ``user``; returns the row and the raw token, which is never stored."""
    raw = TOKEN_PREFIX + secrets.token_urlsafe(30)
    token = ApiToken.objects.create(user=user, name=name, prefix=raw[:8], digest=token_digest(raw))
    return token, raw


def user_for_bearer(header_value: str) -> AbstractBaseUser | None:
    """The active user owning the token in an ``Authorization: Bearer <token>`` value, else None.

    Anything malformed, unknown or belonging to an inactive account gives None; the caller answers
    401 without saying which. ``last_used_at`` is written at most once a minute per token, so a busy
    script does not turn every API read into a database write.
    """
    parts = (header_value or "").split()
    if len(parts) != 2 or parts[0].lower() != "bearer" or not _TOKEN_RE.fullmatch(parts[1]):
        return None
    digest = token_digest(parts[1])
    token = ApiToken.objects.select_related("user").filter(digest=digest).first()
    # The lookup is by a hash of the secret, so its timing reveals nothing useful; the comparison
    # below is constant-time anyway, as a second line should the lookup ever become fuzzy.
    if token is None or not hmac.compare_digest(token.digest, digest):
        return None
    user = token.user
    if not user.is_active:
        return None
    now = timezone.now()
    if token.last_used_at is None or now - token.last_used_at >= _LAST_USED_RESOLUTION:
        ApiToken.objects.filter(pk=token.pk).update(last_used_at=now)
    return user
