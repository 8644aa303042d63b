"""Roles, the login page and its throttling, ensure_admin, and the read-only admin (SPEC section 3)."""

from __future__ import annotations

import importlib
import io
import math
import re
import time
from types import SimpleNamespace

import pytest
import redis
from django.apps import apps as django_apps
from django.contrib import admin
from django.contrib.auth.models import AnonymousUser, Group, User
from django.core.exceptions import PermissionDenied
from django.core.management import call_command
from django.db import connection
from django.test import Client
from django.urls import reverse

from streams_app.accounts.roles import (
    ROLE_GROUPS,
    Role,
    read_only_blocked,
    require_role,
    require_writable,
    role_of,
)
from streams_app.audit.models import AuditEvent
from streams_app.jobs.models import Job
from streams_app.services import action_authorize
from tests.console.conftest import PASSWORD, make_user
from tests.servers import free_port

THROTTLED = "Too many failed logins for this account or address"
INVALID = "Please enter a correct username and password"

# ------------------------------------------------------------------------------------------- roles


def test_migration_created_the_role_groups(db) -> None:
    assert set(Group.objects.values_list("name", flat=True)) >= {"viewer", "operator", "admin"}
    assert set(ROLE_GROUPS) == {"viewer", "operator", "admin"}


def test_role_migration_is_idempotent_and_reversible(db) -> None:
    migration = importlib.import_module("streams_app.migrations.0002_roles")
    schema_editor = SimpleNamespace(connection=connection)

    migration.create_role_groups(django_apps, schema_editor)
    assert Group.objects.filter(name__in=["viewer", "operator", "admin"]).count() == 3

    migration.delete_role_groups(django_apps, schema_editor)
    assert not Group.objects.filter(name__in=["viewer", "operator", "admin"]).exists()

    migration.create_role_groups(django_apps, schema_editor)
    assert Group.objects.filter(name__in=["viewer", "operator", "admin"]).count() == 3


def test_role_of_each_standing_user(viewer: User, operator: User, admin_user: User, outsider: User) -> None:
    assert role_of(viewer) is Role.VIEWER
    assert role_of(operator) is Role.OPERATOR
    assert role_of(admin_user) is Role.ADMIN
    assert role_of(outsider) is Role.NONE  # inactive, although in the operator group
    assert role_of(AnonymousUser()) is Role.NONE
    assert role_of(None) is Role.NONE


def test_superusers_are_admins_without_any_group(db) -> None:
    root = User.objects.create_superuser("root", password=PASSWORD)
    assert role_of(root) is Role.ADMIN


def test_users_in_no_role_group_are_viewers(db) -> None:
    plain = make_user("paula-plain")
    assert role_of(plain) is Role.VIEWER
    unrelated = make_user("una-unrelated")
    unrelated.groups.add(Group.objects.create(name="billing-team"))
    assert role_of(unrelated) is Role.VIEWER


def test_the_highest_role_group_wins(db) -> None:
    both = make_user("bo-both", groups=("viewer", "operator"))
    assert role_of(both) is Role.OPERATOR
    all_three = make_user("al-all", groups=("viewer", "operator", "admin"))
    assert role_of(all_three) is Role.ADMIN


def test_role_is_looked_up_once_per_user_object(operator: User, django_assert_num_queries) -> None:
    user = User.objects.get(pk=operator.pk)
    with django_assert_num_queries(1):
        assert role_of(user) is Role.OPERATOR
        assert role_of(user) is Role.OPERATOR


def test_roles_are_ordered_and_print_as_group_names() -> None:
    assert Role.NONE < Role.VIEWER < Role.OPERATOR < Role.ADMIN
    assert str(Role.OPERATOR) == "operator"
    assert f"{Role.ADMIN}" == "admin"
    assert Role.VIEWER.label == "viewer"


@pytest.mark.parametrize(
    ("who", "needed", "allowed"),
    [
        ("viewer", Role.VIEWER, True),
        ("viewer", Role.OPERATOR, False),
        ("operator", Role.OPERATOR, True),
        ("operator", Role.ADMIN, False),
        ("admin_user", Role.ADMIN, True),
        ("admin_user", Role.OPERATOR, True),
        ("outsider", Role.VIEWER, False),
    ],
)
def test_require_role(request, db, who: str, needed: Role, allowed: bool) -> None:
    user = request.getfixturevalue(who)
    if allowed:
        require_role(user, needed)
    else:
        with pytest.raises(
            PermissionDenied, match=f"needs the {needed.label} role|has the {needed.label} role"
        ):
            require_role(user, needed)


def test_require_role_says_what_is_needed_and_what_the_user_has(viewer: User) -> None:
    with pytest.raises(PermissionDenied) as excinfo:
        require_role(viewer, Role.OPERATOR)
    assert str(excinfo.value) == "This action needs the operator role; your account has the viewer role."


def test_require_role_refuses_anonymous_users() -> None:
    with pytest.raises(PermissionDenied, match="Log in"):
        require_role(AnonymousUser(), Role.VIEWER)


def test_an_operator_action_is_allowed_to_operators_and_refused_to_viewers(settings, viewer: User, operator: User) -> None:
    """Where an action runs, its role comes from ACTION_ROLES ("claim" needs an operator)."""
    settings.BUSCONSOLE_READ_ONLY = False
    action_authorize(user=operator, action="claim")
    with pytest.raises(PermissionDenied, match="needs the operator role"):
        action_authorize(user=viewer, action="claim")


def test_read_only_mode(settings) -> None:
    settings.BUSCONSOLE_READ_ONLY = False
    assert read_only_blocked() is False
    require_writable()

    settings.BUSCONSOLE_READ_ONLY = True
    assert read_only_blocked() is True
    with pytest.raises(PermissionDenied, match="read-only"):
        require_writable()


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
    deadline = time.monotonic() + 2
    while throttle_keys(console_redis) and time.monotonic() < deadline:
        time.sleep(0.01)

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
    settings.CACHES = {
        "default": {
            "BACKEND": "django.core.cache.backends.redis.RedisCache",
            "LOCATION": f"redis://127.0.0.1:{free_port()}/1",
            "OPTIONS": {"socket_connect_timeout": 0.5, "socket_timeout": 0.5},
        }
    }
    assert INVALID in attempt(viewer.username, "wrong").content.decode()
    assert logged_in_as(attempt(viewer.username, PASSWORD)) == viewer.username


# ----------------------------------------------------------------------------------- ensure_admin


def run_ensure_admin(*args: str) -> str:
    out = io.StringIO()
    call_command("ensure_admin", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_ensure_admin_creates_a_superuser_with_a_generated_password(db, monkeypatch) -> None:
    monkeypatch.delenv("BUSCONSOLE_ADMIN_PASSWORD", raising=False)
    output = run_ensure_admin()

    match = re.fullmatch(r"Admin login: admin / (\S+)\n", output)
    assert match, output
    user = User.objects.get(username="admin")
    assert user.is_superuser and user.is_staff and user.is_active
    assert user.check_password(match.group(1))
    assert len(match.group(1)) >= 16
    assert user.groups.filter(name="admin").exists()
    assert role_of(user) is Role.ADMIN


def test_ensure_admin_uses_the_password_from_the_environment(db, monkeypatch) -> None:
    monkeypatch.setenv("BUSCONSOLE_ADMIN_PASSWORD", "from-the-env-123")
    output = run_ensure_admin("--username", "root")

    assert output.startswith("Admin login: root / ")
    assert "from-the-env-123" not in output  # already known to whoever set it; kept out of logs
    assert User.objects.get(username="root").check_password("from-the-env-123")


def test_ensure_admin_resets_an_existing_password_only_when_told(db, monkeypatch) -> None:
    monkeypatch.delenv("BUSCONSOLE_ADMIN_PASSWORD", raising=False)
    first = re.fullmatch(r"Admin login: admin / (\S+)\n", run_ensure_admin())
    assert first

    again = run_ensure_admin()
    assert "exists" in again and "Admin login" not in again
    assert User.objects.get(username="admin").check_password(first.group(1))
    assert User.objects.filter(username="admin").count() == 1

    monkeypatch.setenv("BUSCONSOLE_ADMIN_PASSWORD", "new-secret-456")
    reset = run_ensure_admin()
    assert "password reset" in reset and "new-secret-456" not in reset
    assert User.objects.get(username="admin").check_password("new-secret-456")


def test_ensure_admin_puts_an_existing_user_in_the_admin_group(viewer: User, monkeypatch) -> None:
    monkeypatch.delenv("BUSCONSOLE_ADMIN_PASSWORD", raising=False)
    run_ensure_admin("--username", viewer.username)
    viewer = User.objects.get(pk=viewer.pk)
    assert role_of(viewer) is Role.ADMIN
    assert viewer.check_password(PASSWORD)


# ----------------------------------------------------------------------------------------- admin


@pytest.mark.parametrize("model", [AuditEvent, Job])
def test_audit_events_and_jobs_cannot_be_edited_even_by_superusers(rf, db, model) -> None:
    model_admin = admin.site._registry[model]
    request = rf.get("/")
    request.user = User.objects.create_superuser("root", password=PASSWORD)
    assert model_admin.has_view_permission(request)
    assert not model_admin.has_add_permission(request)
    assert not model_admin.has_change_permission(request)
    assert not model_admin.has_delete_permission(request)


def test_audit_admin_filters(db) -> None:
    assert set(admin.site._registry[AuditEvent].list_filter) == {"action", "outcome", "connection"}


def test_admin_site_lists_audit_events(db) -> None:
    root = User.objects.create_superuser("root", password=PASSWORD)
    AuditEvent.objects.create(
        who=root,
        username="root",
        connection="default",
        action="dlq.purge",
        target_stream=b"orders:\xff",
        target_display="orders:\\xff",
        outcome=AuditEvent.Outcome.OK,
        affected=3,
    )
    client = Client()
    client.force_login(root)
    response = client.get(reverse("admin:streams_app_auditevent_changelist"))
    assert response.status_code == 200
    assert "dlq.purge" in response.content.decode()

