"""The retries page in headless Chromium: the bus's real retries listed with their due times, one retried
now with its checkbox, the rest moved to the DLQ through the "all" confirm page; checked in Redis.
Screenshots at 390 px and 1600 px are left in the temp dir for the closing note."""

from __future__ import annotations

import os
import tempfile
from urllib.parse import quote

import pytest
import redis

from tests.browser.conftest import login_through_form
from tests.console.retries.conftest import DLQ, RETRY_SET, STREAM, make_retries, scheduled

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_retry_now_and_move_all_to_the_dlq(page, operator, asgi_server, redis_server, r: redis.Redis) -> None:
    from playwright.sync_api import expect

    make_retries(redis_server.url(0), r, 3)
    members = scheduled(r)
    login_through_form(page, operator, asgi_server)
    page.goto(f"/c/default/streams/{quote(STREAM, safe='')}/")
    page.locator('a[data-action="retries"]').click()
    expect(page.locator("tr[data-ref]")).to_have_count(3)
    expect(page.locator("#retries-waiting")).to_have_text("3")
    expect(page.locator("tr[data-ref]").first).to_contain_text("in 4 m")
    expect(page.locator("tr[data-ref]").first).to_contain_text("RuntimeError: card declined")
    shots = tempfile.mkdtemp(prefix="retries-shots-")
    for width in (390, 1600):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=os.path.join(shots, f"retries-{width}.png"), full_page=True)

    page.locator("tr[data-ref] input[type=checkbox]").first.check()
    page.get_by_role("button", name="Retry selected now").click()
    expect(page.locator(".messages")).to_contain_text("Re-added 1 retry to orders now.")
    expect(page.locator("tr[data-ref]")).to_have_count(2)
    assert scheduled(r) == members[1:]

    page.locator('select[name="mode"]').select_option("dlq")
    page.get_by_role("button", name="Review…").click()
    expect(page.locator("#retries-count")).to_have_text("2")
    page.get_by_role("button", name="Move to DLQ: 2 retries").click()
    expect(page.locator(".messages")).to_contain_text("Moved 2 retries to {orders}:dlq.")
    assert r.zcard(RETRY_SET) == 0 and r.xlen(DLQ) == 2
