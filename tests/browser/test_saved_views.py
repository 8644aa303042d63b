"""Saved views in Chromium: save a filtered page from the frame's form, find it on the overview and on
/views/, open it and land on the very same address showing the same rows; a binary key's page too."""

from __future__ import annotations

import re
from urllib.parse import quote

import pytest
import redis
from playwright.sync_api import expect

from streams_app.saved.models import SavedView
from tests.browser.conftest import login_through_form
from tests.console.services.helpers import orders_bus

pytestmark = pytest.mark.browser


def _save_here(page, name: str, *, shared: bool = False) -> None:
    page.click("#save-view summary")
    page.fill("#save-view input[name=name]", name)
    if shared:
        page.check("#save-view input[name=shared]")
    page.click("#save-view button[type=submit]")


def test_a_filtered_dlq_page_is_saved_shared_and_reopened_from_the_overview(
    page, asgi_server, operator, viewer, r: redis.Redis
) -> None:
    bus = orders_bus(r)
    expected = [i.decode() for i, f in reversed(r.xrange("orders:dlq")) if b"card 2" in f[b"dlq_error"]]
    assert len(expected) == 1 and len(bus.dlq_ids) == 3
    login_through_form(page, operator, asgi_server)
    page.goto("/c/default/dlq/orders%3Adlq/")
    page.fill("input[name=error]", "card 2")
    page.press("input[name=error]", "Enter")
    page.wait_for_url(re.compile(r"error=card\+2"))

    # The chart window switched by htmx is written into the address, beside the filter.
    other = page.locator(".chart-panel .window-switch a:not(.active)").first
    window = other.inner_text()
    other.click()
    page.wait_for_url(re.compile(rf"window={re.escape(window)}"))
    assert "error=card+2" in page.url
    saved_at = page.url

    _save_here(page, "card 2 failures", shared=True)
    expect(page.locator(".messages")).to_contain_text("card 2 failures")
    assert page.url == saved_at  # back on the page that was saved
    view = SavedView.objects.get()
    assert asgi_server.url + view.url == saved_at and view.shared

    page.goto("/")
    page.click("#saved-views a:text('card 2 failures')")
    page.wait_for_load_state()
    assert page.url == saved_at
    assert (
        page.locator("#entries tbody tr[data-id]").evaluate_all("rows => rows.map(r => r.dataset.id)")
        == expected
    )
    assert page.locator(".chart-panel .window-switch a.active").inner_text() == window

    # Shared: another user sees it on /views/ and opens the same address.
    page.context.clear_cookies()
    login_through_form(page, viewer, asgi_server)
    page.goto("/views/")
    page.click("#views a.view-open:text('card 2 failures')")
    page.wait_for_load_state()
    assert page.url == saved_at
    assert page.dialogs == []


def test_a_binary_key_s_page_is_saved_and_reopened(page, asgi_server, viewer, r: redis.Redis) -> None:
    key = b"bin/\xff\xfe:100%\x00k"  # "/", "%", NUL and bytes that are not UTF-8
    ids = [r.xadd(key, {"n": str(i)}).decode() for i in range(4)]
    address = f"/c/default/streams/{quote(key, safe='')}/?order=asc"
    login_through_form(page, viewer, asgi_server)
    page.goto(address)
    shown = page.locator("table.entries tbody tr td:first-child a").all_inner_texts()
    assert shown == ids

    _save_here(page, "binary, oldest first")
    expect(page.locator(".messages")).to_contain_text("binary, oldest first")
    assert SavedView.objects.get().url == address

    page.goto("/views/")
    page.click("#views a.view-open:text('binary, oldest first')")
    page.wait_for_load_state()
    assert page.url == asgi_server.url + address
    assert page.locator("table.entries tbody tr td:first-child a").all_inner_texts() == ids
