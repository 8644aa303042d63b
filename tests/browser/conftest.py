"""Headless Chromium (Debian's package) driven by Playwright, plus the console's standing users."""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Iterator

import pytest

from tests.browser.phone_pages import PHONE
from tests.console.conftest import *  # noqa: F403 - the standing users and their clients
from tests.console.conftest import (  # noqa: F401 - the autouse fixtures apply here too
    PASSWORD,
    _clean_login_throttle,
    _fast_password_hashing,
    _fresh_console_state,
)

CHROMIUM = "/usr/bin/chromium"
CHROMIUM_ARGS = [
    "--no-sandbox",
    "--disable-gpu",
    "--disable-background-networking",
    "--disable-component-update",
    "--disable-sync",
    "--no-first-run",
]


@pytest.fixture(scope="session")
def browser() -> Iterator[object]:
    if shutil.which(CHROMIUM) is None:
        pytest.fail(f"{CHROMIUM} is missing: run `make setup` (installs Debian's chromium)")
    from playwright.sync_api import sync_playwright

    # Playwright's sync API keeps an event loop running in this thread; Django's ORM (used by
    # fixtures in the same thread, never concurrently) would otherwise refuse to run.
    os.environ["DJANGO_ALLOW_ASYNC_UNSAFE"] = "true"
    with sync_playwright() as pw:
        browser = pw.chromium.launch(executable_path=CHROMIUM, args=CHROMIUM_ARGS, headless=True)
        yield browser
        browser.close()


@pytest.fixture
def page(browser, asgi_server) -> Iterator[object]:
    """A fresh browser context (no cookies) with a page whose dialogs are recorded, not shown."""
    context = browser.new_context(base_url=asgi_server.url)
    page = context.new_page()
    page.dialogs = []
    page.on("dialog", lambda d: (page.dialogs.append(d.message), d.dismiss()))
    page.set_default_timeout(15_000)
    yield page
    context.close()


def login_through_form(page, user, asgi_server):
    """``page`` logged in as ``user`` the way a person does it: the login form, then the overview."""
    page.goto("/login/")
    page.fill("input[name=username]", user.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(f"{asgi_server.url}/")
    return page


@pytest.fixture
def phone(browser, asgi_server):
    """A factory of logged-in phone-sized tabs (390 x 844), with or without JavaScript."""
    contexts = []

    def open_as(user, *, javascript: bool = True):
        context = browser.new_context(base_url=asgi_server.url, viewport=PHONE, java_script_enabled=javascript)
        contexts.append(context)
        page = context.new_page()
        page.set_default_timeout(15_000)
        return login_through_form(page, user, asgi_server)

    yield open_as
    for context in contexts:
        context.close()


@pytest.fixture
def downloads_dir() -> Iterator[str]:
    path = tempfile.mkdtemp(prefix="busconsole-downloads-")
    yield path
    shutil.rmtree(path, ignore_errors=True)
