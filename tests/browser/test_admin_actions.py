"""The admin buttons in headless Chromium, against the real ASGI app (uvicorn) and a real Redis.

The admin logs in through the login form, goes through each confirm step as a person would (ticking
the box, typing the name), and the test checks what the page shows and what Redis now holds.
"""

from __future__ import annotations

import os

import pytest
import redis

from tests.browser.conftest import login_through_form

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]
SCREENSHOTS = os.environ.get("BUSCONSOLE_SCREENSHOTS")  # a directory: save what the admin saw


@pytest.fixture
def admin_page(page, admin_user, asgi_server):
    return login_through_form(page, admin_user, asgi_server)


def _shot(page, name: str) -> None:
    if SCREENSHOTS:
        page.screenshot(path=os.path.join(SCREENSHOTS, f"{name}.png"), full_page=True)


def test_delete_a_consumer_with_pending_entries_then_the_group(admin_page, r: redis.Redis) -> None:
    from playwright.sync_api import expect

    page = admin_page
    for i in range(6):
        r.xadd("orders", {"n": str(i)})
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker-1", {"orders": ">"}, count=3)

    page.goto("/c/default/streams/orders/groups/billing/")
    page.locator("form.consumer-delete button").click()
    expect(page.locator("#consumer-pending")).to_have_text("3")
    expect(page.get_by_role("link", name="Claim its pending entries to another consumer first")).to_be_visible()
    _shot(page, "consumer-delete-preview")
    page.get_by_role("button", name="Delete consumer").click()  # the box is required: nothing is sent
    assert [c["name"] for c in r.xinfo_consumers("orders", "billing")] == [b"worker-1"]
    page.check("input[name=force]")
    page.get_by_role("button", name="Delete consumer").click()
    expect(page.locator(".messages")).to_contain_text("3 pending entries were dropped")
    assert r.xinfo_consumers("orders", "billing") == []

    page.locator("#group-delete summary").click()
    page.fill("#group-delete input[name=confirm]", "billing")
    page.get_by_role("button", name="Delete group").click()
    expect(page.locator(".messages")).to_contain_text("Deleted group billing")
    assert page.url.endswith("/c/default/streams/orders/")
    assert r.xinfo_groups("orders") == []


def test_trim_and_delete_entries_from_the_stream_page(admin_page, r: redis.Redis) -> None:
    from playwright.sync_api import expect

    page = admin_page
    ids = [r.xadd("orders", {"n": str(i)}).decode() for i in range(20)]
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker-1", {"orders": ">"}, count=2)

    page.goto("/c/default/streams/orders/")
    page.locator("#stream-admin summary").click()
    page.fill("#trim-minid input[name=minid]", ids[5])
    page.locator("#trim-minid button").click()
    expect(page.locator("#will-remove")).to_have_text("5")
    expect(page.locator("#trim-pending-warning")).to_contain_text("billing")
    _shot(page, "trim-preview")
    page.get_by_role("button", name="Trim 5 entries").click()
    expect(page.locator(".messages")).to_contain_text("removed 5 entries, 15 left")
    assert r.xrange("orders", count=1)[0][0].decode() == ids[5]

    page.locator(f'input[type=checkbox][value="{ids[19]}"]').check()
    page.locator(f'input[type=checkbox][value="{ids[18]}"]').check()
    page.locator("#stream-admin summary").click()
    page.locator("#entries-delete button").click()
    expect(page.locator("#delete-count")).to_have_text("2")
    page.get_by_role("button", name="Delete 2 entries").click()
    expect(page.locator(".messages")).to_contain_text("Deleted 2 entries.")
    assert r.xlen("orders") == 13


def test_create_and_revoke_a_token(admin_page) -> None:
    from playwright.sync_api import expect

    page = admin_page
    page.get_by_role("link", name="Tokens").click()
    page.fill("#token-form input[name=name]", "deploy script")
    page.get_by_role("button", name="Create token").click()
    raw = page.locator("#raw-token").inner_text().strip()
    assert raw.startswith("bct_")
    expect(page.locator("#admin-note")).to_be_visible()
    _shot(page, "token-created")
    page.goto("/tokens/")
    expect(page.locator("#raw-token")).to_have_count(0)
    expect(page.locator("#tokens")).to_contain_text(raw[:8])
    page.get_by_role("button", name="Revoke").click()  # a confirm() dialog: the fixture dismisses it
    assert page.dialogs and "Revoke this token?" in page.dialogs[-1]
    expect(page.locator("#tokens")).to_contain_text(raw[:8])
    page.locator("#tokens form").evaluate("form => form.submit()")  # as if confirmed
    expect(page.locator(".messages")).to_contain_text("Revoked the token deploy script")
    expect(page.locator("#tokens")).to_contain_text("You have no API tokens.")
