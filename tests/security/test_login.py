"""One login path, one throttle: ``/admin/login/`` counts and obeys the same failed-login limits as ``/login/``.

The attacker here is a script posting passwords to whichever login URL it finds. The limit is set in the test;
whether a login happened is read from the session the response left behind, never from the code under test.
"""

from __future__ import annotations

import pytest
from django.contrib.auth.models import User
from django.test import Client

from tests.console.conftest import PASSWORD, make_user

THROTTLED = "Too many failed logins for this account or address"
LIMIT = 3


@pytest.fixture(autouse=True)
def _limits(settings) -> None:
    settings.BUSCONSOLE_LOGIN_MAX_FAILURES = LIMIT
    settings.BUSCONSOLE_LOGIN_WINDOW_S = 900


@pytest.fixture
def root(db) -> User:
    """A staff superuser: the account Django's own admin login would have let in."""
    return make_user("rooty", is_staff=True, is_superuser=True)


def post_login(url: str, username: str, password: str, *, ip: str, client: Client | None = None):
    client = client or Client()
    return client.post(url, {"username": username, "password": password, "next": "/admin/"}, REMOTE_ADDR=ip)


def session_user(response) -> str | None:
    user = response.wsgi_request.user
    return user.username if user.is_authenticated else None


def test_a_lock_from_login_holds_at_admin_login(root: User) -> None:
    ip = "198.51.100.10"
    for i in range(LIMIT):
        post_login("/login/", f"guess-{i}", "wrong", ip=ip)
    assert THROTTLED in post_login("/login/", root.username, PASSWORD, ip=ip).content.decode()

    client = Client()
    for i in range(20):
        assert session_user(post_login("/admin/login/", root.username, f"wrong-{i}", ip=ip, client=client)) is None
    right = post_login("/admin/login/", root.username, PASSWORD, ip=ip, client=client)
    assert session_user(right) is None
    assert THROTTLED in right.content.decode()
    assert "_auth_user_id" not in client.session
    assert client.get("/admin/").status_code == 302  # still anonymous


def test_failures_at_admin_login_lock_login(root: User) -> None:
    ip = "198.51.100.11"
    for i in range(LIMIT):
        post_login("/admin/login/", root.username, f"wrong-{i}", ip=ip)
    refused = post_login("/login/", root.username, PASSWORD, ip=ip)
    assert THROTTLED in refused.content.decode()
    assert session_user(refused) is None


def test_admin_login_logs_a_console_admin_in_and_goes_to_next(admin_user: User) -> None:
    client = Client()
    page = client.get("/admin/login/?next=/admin/")
    assert page.status_code == 200
    assert 'name="next" value="/admin/"' in page.content.decode()
    done = post_login("/admin/login/", admin_user.username, PASSWORD, ip="198.51.100.12", client=client)
    assert done.status_code == 302 and done["Location"] == "/admin/"
    assert client.session["_auth_user_id"] == str(admin_user.pk)
    assert client.get("/admin/").status_code == 200


def test_a_logged_in_user_without_admin_access_gets_403_not_a_redirect_loop(viewer_client: Client) -> None:
    sent = viewer_client.get("/admin/")
    assert sent.status_code == 302 and sent["Location"].startswith("/admin/login/")
    refused = viewer_client.get(sent["Location"])
    assert refused.status_code == 403
    assert "admin" in refused.content.decode()
