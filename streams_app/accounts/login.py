"""Login throttling: failed logins counted per account and per address, and the login form that
refuses to check a password once either count is too high.

The login page itself lives in ``streams_app.views.auth``. Counters live in the console's own Redis
(REDIS_URL, through ``busconsole.cache``), so every web process shares them, and an attempt is counted
before its password is checked, so concurrent guesses cannot slip between a check and a count.
"""

from __future__ import annotations

import hashlib
import logging
import math
from dataclasses import dataclass
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.models import User
from django.http import HttpRequest

from busconsole.cache import CacheUnavailable, window_clear, window_give_back, window_take

log = logging.getLogger(__name__)

_THROTTLE_NS = "busconsole:login-fail"


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
    """Redis keys of the counters that apply; hashed so any username or address makes a valid key.

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


def login_attempt_take(*, username: str | None, ip: str | None) -> int:
    """Count a login attempt against the account and the address before its password is checked.

    Returns 0 when the attempt is counted and may go on, else the seconds until a login for
    ``username`` from ``ip`` is accepted again (nothing counted). Check and count are one atomic step
    on the console's Redis (:func:`busconsole.cache.window_take`), so concurrent guesses cannot all pass
    the check before any is counted: at most BUSCONSOLE_LOGIN_MAX_FAILURES passwords are checked per
    window, however many arrive at once. Fixed windows: an account's or address's first attempt starts
    a window of BUSCONSOLE_LOGIN_WINDOW_S seconds (the counter's expiry), so a lockout ends at a known
    time, which the error message states. A limit of 0 or less disables throttling. If the console's
    Redis is unreachable, logins are not throttled (logged): an outage must not lock operators out of
    the console they need to diagnose it.
    """
    limit = settings.BUSCONSOLE_LOGIN_MAX_FAILURES
    keys = _throttle_keys(username=username, ip=ip)
    if limit <= 0 or not keys:
        return 0
    try:
        wait = window_take(keys, limit=limit, window_s=settings.BUSCONSOLE_LOGIN_WINDOW_S)
    except CacheUnavailable:
        log.exception("login throttle unavailable: cannot count a login attempt")
        return 0
    return math.ceil(wait)


def login_success_record(*, username: str | None, ip: str | None) -> None:
    """A counted attempt logged in: clear the account's counter and give the address its count back.

    The address keeps its failures (one valid account must not launder an address's guesses at
    others), but a success does not add to them: people behind one address would otherwise run out
    of logins.
    """
    try:
        window_clear(_throttle_keys(username=username, ip=None))
        for key in _throttle_keys(username=None, ip=ip):
            window_give_back(key)
    except CacheUnavailable:
        log.exception("login throttle unavailable: cannot record a successful login")


def login_attempt_give_back(*, username: str | None, ip: str | None) -> None:
    """Uncount an attempt counted by :func:`login_attempt_take` that turned out to be no guess."""
    try:
        for key in _throttle_keys(username=username, ip=ip):
            window_give_back(key)
    except CacheUnavailable:
        log.exception("login throttle unavailable: cannot give an attempt back")


def login_failures_clear(*, username: str | None = None, ip: str | None = None) -> None:
    """Forget the failures counted against an account and/or an address."""
    try:
        window_clear(_throttle_keys(username=username, ip=ip))
    except CacheUnavailable:
        log.exception("login throttle unavailable: cannot clear failure counters")


@dataclass(frozen=True)
class DirectoryLogin:
    """What a directory's login decided, for its audit row: the account, the role its groups gave (None:
    refused), the role it had before and the groups' names. Kept on the form by the backend's caller and
    written by the login view, the layer that writes audit rows."""

    user: User
    role: str | None
    previous_role: str | None
    groups: tuple[str, ...]

    def audit_params(self) -> dict[str, Any]:
        return {"role": self.role, "previous_role": self.previous_role, "groups": list(self.groups[:100])}


class LoginRefused(Exception):
    """A login that cannot go on, for a reason the person logging in must be told (a directory that cannot
    be reached, groups that give no role), raised by an authentication backend through Django's
    ``authenticate`` and said by the login form, where a wrong password's message would mislead.
    ``directory`` is set when the directory did check the password and its groups gave no role."""

    def __init__(self, message: str, *, directory: DirectoryLogin | None = None) -> None:
        super().__init__(message)
        self.directory = directory


def password_login_allowed(username: str | None) -> bool:
    """Whether ``username`` may log in with a password: everyone unless BUSCONSOLE_LOCAL_LOGIN=0, then
    only the break-glass accounts (BUSCONSOLE_BREAK_GLASS_USERS), for when the provider is down.

    Asked by the login form, to say why, and by the authentication backend
    (:class:`streams_app.accounts.role_backend.ConsoleModelBackend`), so that no other path that checks a
    password gets around it.
    """
    if settings.BUSCONSOLE_LOCAL_LOGIN:
        return True
    return bool(username) and username in settings.BUSCONSOLE_BREAK_GLASS_USERS


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
        "local_login_off": "Password logins are switched off here: use %(sso)s.",
    }
    directory_login: DirectoryLogin | None = None  # set by clean() when a directory checked the password

    def clean(self) -> dict[str, Any]:
        username = self.cleaned_data.get("username")
        if username is None or not self.cleaned_data.get("password"):
            return super().clean()  # a field is missing: no password is checked, nothing is counted
        if not password_login_allowed(username) and settings.BUSCONSOLE_LDAP is None:
            # Refused before anything is counted or checked: no password of an SSO-only console is tried.
            # (With a directory, its accounts log in with passwords: the backends decide, the local one
            # refusing all but the break-glass accounts.)
            oidc = settings.BUSCONSOLE_OIDC
            sso = f"Sign in with {oidc.display_name}" if oidc else "single sign-on"
            raise forms.ValidationError(
                self.error_messages["local_login_off"], code="local_login_off", params={"sso": sso}
            )
        ip = client_ip(self.request)
        # Counted before the check: a wrong password leaves its count, a right one gives it back.
        wait = login_attempt_take(username=username, ip=ip)
        if wait:
            minutes = max(1, math.ceil(wait / 60))
            raise forms.ValidationError(
                self.error_messages["throttled"],
                code="throttled",
                params={"wait": f"{minutes} minute" if minutes == 1 else f"{minutes} minutes"},
            )
        try:
            cleaned = super().clean()
        except LoginRefused as refused:
            # Not a wrong guess (the directory was down, or the password was right but gives no role):
            # the attempt is not held against the account or the address.
            login_attempt_give_back(username=username, ip=ip)
            self.directory_login = refused.directory
            raise forms.ValidationError(str(refused), code="refused") from None
        self.directory_login = getattr(self.user_cache, "directory_login", None)
        login_success_record(username=username, ip=ip)
        return cleaned
