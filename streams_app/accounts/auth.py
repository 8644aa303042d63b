"""Who may do what: roles, personal API tokens and login throttling (SPEC section 3).

Logic only; the login page lives in ``streams_app.views.auth`` and the request plumbing (bearer
header, login-required) in ``streams_app.middleware``. Checks here are meant to be called where an
action runs, so hiding a button is never the only thing standing between a viewer and a purge.
"""

from __future__ import annotations

import functools
import hashlib
import hmac
import logging
import math
import re
import secrets
import time
from collections.abc import Callable
from datetime import timedelta
from enum import IntEnum
from typing import TYPE_CHECKING, Any, TypeVar

import redis
from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest
from django.utils import timezone

from streams_app.accounts.models import ApiToken

if TYPE_CHECKING:
    from django.contrib.auth.base_user import AbstractBaseUser
    from django.contrib.auth.models import AnonymousUser

    UserLike = AbstractBaseUser | AnonymousUser

log = logging.getLogger(__name__)

# --------------------------------------------------------------------------------------------- roles


class Role(IntEnum):
    """A user's power in the console, ordered so that ``role_of(user) >= Role.OPERATOR`` reads right.

    ``str(role)`` is the group name ("viewer", ...), which is what templates and messages show.
    """

    NONE = 0
    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        return self.name.lower()


# The Django groups created by migration 0002, highest role wins when a user is in several.
ROLE_GROUPS: dict[str, Role] = {"viewer": Role.VIEWER, "operator": Role.OPERATOR, "admin": Role.ADMIN}

_ROLE_CACHE_ATTR = "_console_role"


def role_of(user: UserLike | None) -> Role:
    """The role of ``user``: superusers are admins, else the highest role group they belong to.

    An active, authenticated user in none of the role groups is a VIEWER: every account on the
    console may read (SPEC: "viewer (read everything)"), and granting an account anything more is an
    explicit act of putting it in the operator or admin group. Anonymous and inactive users have
    Role.NONE. The answer is cached on the user object, which lives for one request, so the several
    checks one page makes cost one query.
    """
    if user is None or not user.is_authenticated or not user.is_active:
        return Role.NONE
    cached = getattr(user, _ROLE_CACHE_ATTR, None)
    if cached is not None:
        return cached
    if getattr(user, "is_superuser", False):
        role = Role.ADMIN
    else:
        names = user.groups.filter(name__in=ROLE_GROUPS).values_list("name", flat=True)
        role = max((ROLE_GROUPS[name] for name in names), default=Role.VIEWER)
    setattr(user, _ROLE_CACHE_ATTR, role)
    return role


def require_role(user: UserLike | None, role: Role) -> None:
    """Raise PermissionDenied unless ``user`` holds at least ``role``."""
    current = role_of(user)
    if current >= role:
        return
    if current is Role.NONE:
        raise PermissionDenied(f"Log in with an active account that has the {role.label} role.")
    raise PermissionDenied(
        f"This action needs the {role.label} role; your account has the {current.label} role."
    )


_View = TypeVar("_View", bound=Callable[..., Any])


def role_required(role: Role) -> Callable[[_View], _View]:
    """Decorate a (sync) view so it runs only for users holding at least ``role``.

    Logging in is the login-required middleware's job; this answers 403 (PermissionDenied) for a
    logged-in user whose role is too low, and for anyone who reached the view unauthenticated.
    """

    def decorator(view: _View) -> _View:
        @functools.wraps(view)
        def wrapper(request: HttpRequest, *args: Any, **kwargs: Any) -> Any:
            require_role(request.user, role)
            return view(request, *args, **kwargs)

        return wrapper  # type: ignore[return-value]

    return decorator


def read_only_blocked() -> bool:
    """True when BUSCONSOLE_READ_ONLY=1: every mutating action is refused, for every role."""
    return bool(settings.BUSCONSOLE_READ_ONLY)


def require_writable() -> None:
    """Raise PermissionDenied when the console runs read-only (call next to ``require_role``)."""
    if read_only_blocked():
        raise PermissionDenied("The console is read-only (BUSCONSOLE_READ_ONLY=1): no changes are allowed.")


# -------------------------------------------------------------------------------------------- tokens

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


# ---------------------------------------------------------------------------------- login throttling

_THROTTLE_NS = "console:login-fail"


def client_ip(request: HttpRequest | None) -> str | None:
    """The address failed logins are counted against.

    REMOTE_ADDR only: X-Forwarded-For is set by the client unless a proxy rewrites it, so trusting it
    would let an attacker pick a fresh address per guess. Behind a reverse proxy, have the server put
    the real client address in REMOTE_ADDR (e.g. ``daphne --proxy-headers``).
    """
    if request is None:
        return None
    return request.META.get("REMOTE_ADDR") or None


def _throttle_keys(*, username: str | None, ip: str | None) -> list[str]:
    """Cache keys of the counters that apply; hashed so any username or address makes a valid key.

    Usernames are case-folded so that "Admin" and "admin" share one counter, whatever the backend's
    idea of case.
    """

    def digest(value: str) -> str:
        return hashlib.sha256(value.encode()).hexdigest()[:32]

    keys = []
    if username and username.strip():
        keys.append(f"{_THROTTLE_NS}:user:{digest(username.strip().casefold())}")
    if ip:
        keys.append(f"{_THROTTLE_NS}:ip:{digest(ip)}")
    return keys


def login_blocked_for(*, username: str | None, ip: str | None) -> int:
    """Seconds until a login for ``username`` from ``ip`` is accepted again; 0 when it is now.

    A login is refused once either counter (the account's or the address's) has reached
    BUSCONSOLE_LOGIN_MAX_FAILURES within the current window. A limit of 0 or less disables throttling.
    If the console's Redis is unreachable, logins are not throttled (logged): an outage must not lock
    operators out of the console they need to diagnose it.
    """
    limit = settings.BUSCONSOLE_LOGIN_MAX_FAILURES
    keys = _throttle_keys(username=username, ip=ip)
    if limit <= 0 or not keys:
        return 0
    try:
        values = cache.get_many([*keys, *(f"{key}:until" for key in keys)])
    except redis.RedisError:
        log.exception("login throttle unavailable: cannot read failure counters")
        return 0
    wait = 0.0
    for key in keys:
        if int(values.get(key) or 0) >= limit:
            until = values.get(f"{key}:until")
            left = until - time.time() if until else settings.BUSCONSOLE_LOGIN_WINDOW_S
            wait = max(wait, left, 1)
    return math.ceil(wait)


def login_failure_record(*, username: str | None, ip: str | None) -> None:
    """Count one failed login against the account and the address.

    Fixed windows: the first failure starts a window of BUSCONSOLE_LOGIN_WINDOW_S seconds (the key's
    expiry) and later failures within it only increment, so a lockout ends at a known time, which the
    error message states. ``add`` then ``incr`` keeps concurrent failures from losing counts.
    """
    window = settings.BUSCONSOLE_LOGIN_WINDOW_S
    try:
        for key in _throttle_keys(username=username, ip=ip):
            if cache.add(key, 0, timeout=window):
                cache.set(f"{key}:until", time.time() + window, timeout=window)
            try:
                cache.incr(key)
            except ValueError:  # the window ended between add and incr: this failure opens a new one
                cache.set(key, 1, timeout=window)
                cache.set(f"{key}:until", time.time() + window, timeout=window)
    except redis.RedisError:
        log.exception("login throttle unavailable: cannot record a failed login")


def login_failures_clear(*, username: str | None = None, ip: str | None = None) -> None:
    """Forget the failures counted against an account and/or an address."""
    keys = _throttle_keys(username=username, ip=ip)
    try:
        cache.delete_many([*keys, *(f"{key}:until" for key in keys)])
    except redis.RedisError:
        log.exception("login throttle unavailable: cannot clear failure counters")


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's login form, refusing to even check a password once too many guesses failed.

    The refusal comes before authentication, so the right password does not get through a lockout:
    otherwise the lockout would only slow a guesser down until the correct guess, which it would then
    confirm. A successful login clears the account's counter but not the address's, so one valid
    account cannot be used to reset the count while guessing at others from the same address.
    """

    error_messages = {
        **AuthenticationForm.error_messages,
        "throttled": "Too many failed logins for this account or address; try again in %(wait)s.",
    }

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        ip = client_ip(self.request)
        wait = login_blocked_for(username=username, ip=ip)
        if wait:
            minutes = max(1, math.ceil(wait / 60))
            raise forms.ValidationError(
                self.error_messages["throttled"],
                code="throttled",
                params={"wait": f"{minutes} minute" if minutes == 1 else f"{minutes} minutes"},
            )
        try:
            cleaned = super().clean()
        except forms.ValidationError:
            login_failure_record(username=username, ip=ip)
            raise
        if self.user_cache is not None:  # None when a field was missing: nothing was checked
            login_failures_clear(username=username)
        return cleaned
