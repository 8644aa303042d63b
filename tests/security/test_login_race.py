"""Concurrent guesses at one account: the throttle counts an attempt before the password is checked.

The attacker sends 40 ``POST /login/`` at once for one user through a real ASGI server (uvicorn, Django
running each request in a thread of its own): 39 wrong passwords and the right one. What the server did
with each attempt is read from its answer alone: a 302 is a login, the "correct username and password"
error is a checked wrong guess, the "Too many failed logins" error is an attempt refused before any
password was checked.
"""

from __future__ import annotations

import re
import threading

import httpx
import pytest
from django.contrib.auth.models import User

from tests.console.conftest import PASSWORD, make_user

LIMIT = 5
ATTEMPTS = 40
THROTTLED = "Too many failed logins for this account or address"
INVALID = "Please enter a correct username and password"


@pytest.fixture
def target(settings, transactional_db) -> User:
    settings.BUSCONSOLE_LOGIN_MAX_FAILURES = LIMIT
    settings.BUSCONSOLE_LOGIN_WINDOW_S = 900
    # Django's default hasher, as in production: the suite's fast MD5 leaves too short a window between
    # the throttle's check and its count for the race to show every time.
    settings.PASSWORD_HASHERS = ["django.contrib.auth.hashers.PBKDF2PasswordHasher"]
    return make_user("rita-raced", groups=("viewer",))


def csrf_pair(base_url: str) -> tuple[str, str]:
    """The csrftoken cookie and the form's token, as a browser gets them from the login page."""
    with httpx.Client(base_url=base_url) as http:
        page = http.get("/login/")
        token = re.search(r'name="csrfmiddlewaretoken" value="([^"]+)"', page.text).group(1)
        return http.cookies["csrftoken"], token


@pytest.mark.slow
def test_forty_concurrent_guesses_check_at_most_the_limit(asgi_server, target: User) -> None:
    cookie, token = csrf_pair(asgi_server.url)
    passwords = [f"wrong-{i}" for i in range(ATTEMPTS - 1)] + [PASSWORD]
    start = threading.Barrier(ATTEMPTS)
    outcomes: list[str] = []

    def guess(password: str) -> None:
        with httpx.Client(base_url=asgi_server.url, cookies={"csrftoken": cookie}, timeout=60) as http:
            start.wait()
            sent = http.post(
                "/login/",
                data={"username": target.username, "password": password, "csrfmiddlewaretoken": token},
                headers={"Referer": asgi_server.url + "/login/"},
            )
        if sent.status_code == 302:
            outcomes.append("logged in")
        elif INVALID in sent.text:
            outcomes.append("checked, wrong")
        elif THROTTLED in sent.text:
            outcomes.append("refused unchecked")
        else:
            outcomes.append(f"unexpected {sent.status_code}")

    threads = [threading.Thread(target=guess, args=(password,)) for password in passwords]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(120)

    assert len(outcomes) == ATTEMPTS and not [o for o in outcomes if o.startswith("unexpected")], outcomes
    wrong_checked = outcomes.count("checked, wrong")
    logged_in = outcomes.count("logged in")
    # At most LIMIT passwords are checked; a success gives the address its attempt back (an office behind
    # one address must not run out of logins), so the right password, if checked first, can add one.
    assert wrong_checked <= LIMIT, f"{wrong_checked} wrong passwords were checked; the limit is {LIMIT}"
    assert logged_in <= 1
    assert outcomes.count("refused unchecked") >= ATTEMPTS - LIMIT - 1
