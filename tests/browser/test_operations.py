"""The operator buttons in headless Chromium, against the real ASGI app (uvicorn) and a real Redis.

The operator logs in through the login form, presses the buttons a person would press, and the test
checks both what the page then shows and what Redis now holds.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
import redis

from tests.browser.conftest import login_through_form

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


@pytest.fixture
def operator_page(page, operator, asgi_server):
    """The shared browser's fresh tab, logged in as an operator through the login form."""
    return login_through_form(page, operator, asgi_server)


def test_requeue_one_dlq_entry_and_see_it_leave_the_list(operator_page, r: redis.Redis) -> None:
    from playwright.sync_api import expect

    page = operator_page
    ids = [
        r.xadd("orders:dlq", {
            "type": "order.created", "data": json.dumps({"order_id": i}), "dlq_original_stream": "orders",
            "dlq_original_id": f"1-{i}", "dlq_group": "billing", "dlq_error": f"ValueError: order {i} declined",
            "dlq_retries": "5", "dlq_failed_at": "1700000000000",
        }).decode()
        for i in range(3)
    ]
    page.goto(f"/c/default/dlq/{quote(b'orders:dlq', safe='')}/")
    row = page.locator(f'tr[data-id="{ids[1]}"]')
    expect(row).to_contain_text("ValueError: order 1 declined")
    expect(page.locator("tr[data-id]")).to_have_count(3)

    row.locator('button[data-action="requeue-one"]').click()

    expect(page.locator(".messages")).to_contain_text("Requeued 1 entry to orders: ")
    expect(page.locator(f'tr[data-id="{ids[1]}"]')).to_have_count(0)
    expect(page.locator("tr[data-id]")).to_have_count(2)
    assert [e[0].decode() for e in r.xrange("orders:dlq")] == [ids[0], ids[2]]
    [(_, fields)] = r.xrange("orders")
    assert fields == {b"type": b"order.created", b"data": b'{"order_id": 1}', b"_requeued_from": ids[1].encode()}


def test_claim_a_pending_entry_to_another_consumer_from_the_group_page(operator_page, r: redis.Redis) -> None:
    from playwright.sync_api import expect

    page = operator_page
    ids = [r.xadd("orders", {"type": "order.created", "n": str(i)}).decode() for i in range(5)]
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker-1", {"orders": ">"}, count=3)
    r.xclaim("orders", "billing", "worker-1", 0, ids[:3], idle=100_000, justid=True)  # stuck for 100 s

    page.goto("/c/default/streams/orders/groups/billing/")
    owner = page.locator(f'tr[data-id="{ids[1]}"] td:nth-child(3)')
    expect(owner).to_have_text("worker-1")
    page.check(f'input[name=ids][value="{ids[1]}"]')
    page.fill("#pending-select input[name=consumer]", "worker-2")
    page.click("#pending-select button:has-text('Claim selected')")

    expect(page.locator(".messages")).to_contain_text("Claimed 1 entry to worker-2.")
    expect(page.locator(f'tr[data-id="{ids[1]}"] td:nth-child(3)')).to_have_text("worker-2")
    expect(page.locator(f'tr[data-id="{ids[0]}"] td:nth-child(3)')).to_have_text("worker-1")
    owners = {p["message_id"].decode(): p["consumer"].decode() for p in r.xpending_range("orders", "billing", "-", "+", 10)}
    assert owners == {ids[0]: "worker-1", ids[1]: "worker-2", ids[2]: "worker-1"}


def test_an_open_dlq_page_follows_another_operators_requeue_without_reload(operator_page, operator,
                                                                          r: redis.Redis) -> None:
    """An action taken elsewhere reaches open pages of the stream over the channel layer."""
    from concurrent.futures import ThreadPoolExecutor

    from playwright.sync_api import expect

    from streams_app import services

    page = operator_page
    ids = [
        r.xadd("orders:dlq", {"type": "t", "data": "{}", "dlq_original_stream": "orders", "dlq_error": "E"}).decode()
        for _ in range(3)
    ]
    page.goto(f"/c/default/dlq/{quote(b'orders:dlq', safe='')}/")
    expect(page.locator("tr[data-id]")).to_have_count(3)
    expect(page.locator("body")).to_have_attribute("data-metrics-socket", "open")
    page.evaluate("window.__marker = 'not reloaded'")

    # "Someone else", from another thread: this one runs Playwright's event loop, where async_to_sync
    # (the broadcast) refuses to run.
    with ThreadPoolExecutor(1) as pool:
        pool.submit(services.dlq_requeue, user=operator, conn="default", key=b"orders:dlq", ids=[ids[0]]).result()

    expect(page.locator(f'tr[data-id="{ids[0]}"]')).to_have_count(0)
    expect(page.locator("tr[data-id]")).to_have_count(2)
    assert page.evaluate("window.__marker") == "not reloaded"
