"""Login throttling: failed logins counted per account and per address, and the login form that
refuses to check a password once either count is too high (SPEC section 3).

The login page itself lives in ``streams_app.views.auth``. Counters live in Django's cache (the
console's own Redis), so every web process shares them.
"""

from __future__ import annotations

import hashlib
import logging
import math
import time
from typing import Any

from django import forms
from django.conf import settings
from django.contrib.auth.forms import AuthenticationForm
from django.core.cache import cache
from django.http import HttpRequest

from busconsole.cache import CacheUnavailable

log = logging.getLogger(__name__)

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
    except CacheUnavailable:
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
    except CacheUnavailable:
        log.exception("login throttle unavailable: cannot record a failed login")


def login_failures_clear(*, username: str | None = None, ip: str | None = None) -> None:
    """Forget the failures counted against an account and/or an address."""
    keys = _throttle_keys(username=username, ip=ip)
    try:
        cache.delete_many([*keys, *(f"{key}:until" for key in keys)])
    except CacheUnavailable:
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
