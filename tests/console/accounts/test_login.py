"""The login page, logout, and the throttling of failed logins by account and by address.

Throttling is checked from outside: a login with the right password must be refused once the limit set in
the test is reached, the counters must sit in the console's Redis with a TTL no longer than the window
(read with a raw client), and Redis expiring them must end the lockout. A plain password login must reach
the action buttons.
"""

from __future__ import annotations

import math
from types import SimpleNamespace

import pytest
import redis
from django.contrib.auth.models import User
from django.test import Client
from django.urls import reverse

from tests.console.conftest import PASSWORD
from tests.console.services.helpers import OPERATIONS
from tests.polling import wait_for
from tests.servers import free_port

THROTTLED = "Too many failed logins for this account or address"
INVALID = "Please enter a correct username and password"


# ------------------------------------------------------------------------------------- login page


def attempt(username: str, password: str, *, ip: str = "127.0.0.1", client: Client | None = None):
    """POST the login form as a browser at ``ip`` would; returns the response."""
    client = client or Client()
    return client.post(reverse("login"), {"username": username, "password": password}, REMOTE_ADDR=ip)


def logged_in_as(response) -> str | None:
    user = response.wsgi_request.user
    return user.username if user.is_authenticated else None


def test_login_page_is_open_to_anonymous_users(client: Client) -> None:
    response = client.get(reverse("login"))
    assert response.status_code == 200
    assert b'name="username"' in response.content and b'name="password"' in response.content
    assert b"csrfmiddlewaretoken" in response.content


def test_login_logs_in_and_goes_to_next(viewer: User) -> None:
    client = Client()
    response = client.post(
        reverse("login") + "?next=/audit/",
        {"username": viewer.username, "password": PASSWORD, "next": "/audit/"},
    )
    assert response.status_code == 302
    assert response["Location"] == "/audit/"
    assert client.session["_auth_user_id"] == str(viewer.pk)


def test_login_refuses_offsite_next(viewer: User) -> None:
    response = Client().post(
        reverse("login"), {"username": viewer.username, "password": PASSWORD, "next": "https://evil.example/"}
    )
    assert response.status_code == 302
    assert response["Location"] == reverse("overview")


def test_wrong_password_and_inactive_accounts_are_refused(viewer: User, outsider: User) -> None:
    for username, password in [(viewer.username, "wrong"), (outsider.username, PASSWORD), ("nobody", "x")]:
        response = attempt(username, password)
        assert response.status_code == 200
        assert INVALID in response.content.decode()
        assert logged_in_as(response) is None


def test_logged_in_users_are_sent_on_from_the_login_page(viewer_client: Client) -> None:
    response = viewer_client.get(reverse("login"))
    assert response.status_code == 302
    assert response["Location"] == reverse("overview")


def test_logout_needs_post(viewer_client: Client) -> None:
    assert viewer_client.get(reverse("logout")).status_code == 405
    response = viewer_client.post(reverse("logout"))
    assert response.status_code == 302
    assert "_auth_user_id" not in viewer_client.session


def test_login_form_still_works_for_an_operator(client, operator, bus) -> None:
    """The console's pages and buttons are reachable by a plain password login (no test shortcuts)."""
    response = client.post("/login/", {"username": operator.username, "password": PASSWORD})
    assert response.status_code == 302
    url, data = OPERATIONS[0].html(bus)
    assert client.post(url, data).status_code == 302


# ------------------------------------------------------------------------------------- throttling


@pytest.fixture
def limits(settings) -> SimpleNamespace:
    settings.BUSCONSOLE_LOGIN_MAX_FAILURES = 3
    settings.BUSCONSOLE_LOGIN_WINDOW_S = 900
    return SimpleNamespace(max=3, window=900)


@pytest.fixture
def console_redis(redis_server):
    """A raw client on the console's own Redis (db 1), where the cache keeps the counters."""
    client = redis.Redis.from_url(redis_server.url(1))
    yield client
    client.close()


def throttle_keys(console_redis: redis.Redis) -> list[bytes]:
    return sorted(console_redis.scan_iter(match="*console:login-fail:*", count=1000))


def test_account_is_locked_after_max_failures_even_with_the_right_password(viewer: User, limits) -> None:
    for i in range(limits.max):
        response = attempt(viewer.username, "wrong", ip=f"10.0.0.{i + 1}")
        assert INVALID in response.content.decode()

    # From yet another address, and with the right password: still refused.
    response = attempt(viewer.username, PASSWORD, ip="10.0.1.1")
    assert response.status_code == 200
    body = response.content.decode()
    assert f"{THROTTLED}; try again in {math.ceil(limits.window / 60)} minutes." in body
    assert logged_in_as(response) is None


def test_username_counter_ignores_case(viewer: User, limits) -> None:
    for i in range(limits.max):
        attempt(viewer.username.upper(), "wrong", ip=f"10.0.2.{i + 1}")
    assert THROTTLED in attempt(viewer.username, PASSWORD, ip="10.0.3.1").content.decode()


def test_address_is_locked_after_max_failures_across_usernames(viewer: User, operator: User, limits) -> None:
    for i in range(limits.max):
        attempt(f"guess-{i}", "wrong", ip="192.0.2.7")

    response = attempt(viewer.username, PASSWORD, ip="192.0.2.7")
    assert THROTTLED in response.content.decode()
    assert logged_in_as(response) is None
    # The account itself is fine: from another address it logs in.
    assert logged_in_as(attempt(viewer.username, PASSWORD, ip="192.0.2.8")) == viewer.username


def test_failures_below_the_limit_do_not_lock(viewer: User, limits) -> None:
    for _ in range(limits.max - 1):
        attempt(viewer.username, "wrong")
    assert logged_in_as(attempt(viewer.username, PASSWORD)) == viewer.username


def test_success_clears_the_account_counter_but_not_the_address_counter(viewer: User, limits) -> None:
    # max-1 failures, a success, max-1 failures: without the reset the account would be locked.
    for i in range(limits.max - 1):
        attempt(viewer.username, "wrong", ip=f"10.1.0.{i + 1}")
    assert logged_in_as(attempt(viewer.username, PASSWORD, ip="10.1.1.1")) == viewer.username
    for i in range(limits.max - 1):
        attempt(viewer.username, "wrong", ip=f"10.1.2.{i + 1}")
    assert logged_in_as(attempt(viewer.username, PASSWORD, ip="10.1.3.1")) == viewer.username

    # The address counter survives a success: a valid account cannot launder an address's guesses.
    for _ in range(limits.max - 1):
        attempt("someone-else", "wrong", ip="10.1.9.9")
    assert logged_in_as(attempt(viewer.username, PASSWORD, ip="10.1.9.9")) == viewer.username
    attempt("someone-else", "wrong", ip="10.1.9.9")
    assert THROTTLED in attempt(viewer.username, PASSWORD, ip="10.1.9.9").content.decode()


def test_lockout_ends_when_the_window_expires(viewer: User, limits, console_redis: redis.Redis) -> None:
    for _ in range(limits.max):
        attempt(viewer.username, "wrong", ip="10.2.0.1")
    assert THROTTLED in attempt(viewer.username, PASSWORD, ip="10.2.0.1").content.decode()

    keys = throttle_keys(console_redis)
    assert keys, "the counters live in the console's Redis"
    for key in keys:  # every counter expires with the window, none is kept forever
        assert 0 < console_redis.ttl(key) <= limits.window
    # Let Redis itself expire them now rather than waiting 15 minutes.
    for key in keys:
        console_redis.pexpire(key, 1)
    wait_for(lambda: not throttle_keys(console_redis), what="the login counters to expire", timeout=2, step=0.01)

    assert logged_in_as(attempt(viewer.username, PASSWORD, ip="10.2.0.1")) == viewer.username


def test_message_counts_down_in_minutes(viewer: User, settings) -> None:
    settings.BUSCONSOLE_LOGIN_MAX_FAILURES = 1
    settings.BUSCONSOLE_LOGIN_WINDOW_S = 60
    attempt(viewer.username, "wrong", ip="10.3.0.1")
    assert (
        f"{THROTTLED}; try again in 1 minute."
        in attempt(viewer.username, PASSWORD, ip="10.3.0.2").content.decode()
    )


def test_refused_attempts_do_not_extend_the_lockout(viewer: User, limits, console_redis: redis.Redis) -> None:
    for _ in range(limits.max):
        attempt(viewer.username, "wrong", ip="10.4.0.1")
    counts_before = {key: console_redis.get(key) for key in throttle_keys(console_redis)}
    for _ in range(3):
        assert THROTTLED in attempt(viewer.username, "wrong", ip="10.4.0.1").content.decode()
    assert {key: console_redis.get(key) for key in throttle_keys(console_redis)} == counts_before


def test_any_username_makes_a_valid_counter_key(db, limits) -> None:
    odd = "ünïcode user with spaces/and:colons " + "x" * 200
    for _ in range(limits.max):
        attempt(odd, "wrong", ip="10.5.0.1")
    assert THROTTLED in attempt(odd, "wrong", ip="10.5.0.2").content.decode()


def test_logins_are_not_throttled_when_the_console_redis_is_down(viewer: User, settings) -> None:
    """An outage must not lock operators out of the console they need to look at it."""
    settings.REDIS_URL = f"redis://127.0.0.1:{free_port()}/1"  # where the counters live
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/1",
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }
    assert INVALID in attempt(viewer.username, "wrong").content.decode()
    assert logged_in_as(attempt(viewer.username, PASSWORD)) == viewer.username
