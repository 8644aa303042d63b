"""A dead letter's own page in Chromium: an event-bus and an OmniDaemon dead letter,
opened from the DLQ list, show what the test wrote (error, traceback, origin, decoded payload), and
Requeue from the page makes exactly one new entry in the origin stream, read back with XRANGE.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
import redis

from tests.browser.conftest import login_through_form

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

TRACEBACK = 'Traceback (most recent call last):\n  File "app.py", line 3, in charge\n    raise ValueError("<declined>")\nValueError: <declined>'


@pytest.fixture
def operator_page(page, operator, asgi_server):
    return login_through_form(page, operator, asgi_server)


def _dlq(key: bytes) -> str:
    return f"/c/default/dlq/{quote(key, safe='')}/"


def test_an_eventbus_dead_letter_page_and_its_requeue(operator_page, r: redis.Redis) -> None:
    from playwright.sync_api import expect

    page = operator_page
    original = r.xadd("orders", {"type": "order.created", "data": json.dumps({"order_id": 7})}).decode()
    dead = r.xadd(
        "{orders}:dlq",
        {
            "type": "order.created",
            "data": json.dumps({"order_id": 7, "note": "<b>hi</b>"}),
            "_retries": "5",
            "dlq_original_stream": "orders",
            "dlq_original_id": original,
            "dlq_group": "billing",
            "dlq_error": "ValueError: <declined>",
            "dlq_traceback": TRACEBACK,
            "dlq_retries": "5",
            "dlq_failed_at": "1714557600123",
        },
    ).decode()

    page.goto(_dlq(b"{orders}:dlq"))
    page.click(f'tr[data-id="{dead}"] a[data-action="dead-letter-page"]')
    page.wait_for_url(f"**/entries/{dead}/")

    expect(page.locator('[data-fact="error"]')).to_have_text("ValueError: <declined>")
    assert page.locator("#dead-letter-traceback").text_content() == TRACEBACK
    expect(page.locator('[data-fact="retries"]')).to_have_text("5")
    expect(page.locator('[data-fact="group"]')).to_have_text("billing")
    expect(page.locator('[data-fact="failed-at"]')).to_have_text("2024-05-01 10:00:00 UTC")
    origin = page.locator('[data-fact="origin"] a')
    expect(origin).to_have_text("orders")
    assert origin.get_attribute("href") == "/c/default/streams/orders/"
    original_link = page.locator('[data-fact="original-id"] a')
    expect(original_link).to_have_text(original)
    assert original_link.get_attribute("href") == f"/c/default/streams/orders/entries/{original}/"
    payload = page.locator("#dead-letter-payload")
    expect(payload.locator("dt")).to_have_count(2)  # type and data: no dlq_* field, no _retries
    assert json.loads(page.locator("#payload-1").text_content()) == {"order_id": 7, "note": "<b>hi</b>"}
    assert page.locator("#dead-letter-payload b").count() == 0  # the payload's markup is text

    page.click('button[data-action="requeue-one"]')

    page.wait_for_url(f"**{_dlq(b'{orders}:dlq')}")
    expect(page.locator(".messages")).to_contain_text("Requeued 1 entry to orders")
    entries = r.xrange("orders")
    assert len(entries) == 2 and entries[0][0].decode() == original
    assert entries[1][1] == {
        b"type": b"order.created",
        b"data": json.dumps({"order_id": 7, "note": "<b>hi</b>"}).encode(),
        b"_requeued_from": dead.encode(),
    }
    assert r.xlen("{orders}:dlq") == 0


def test_an_omnidaemon_dead_letter_page(operator_page, r: redis.Redis) -> None:
    from playwright.sync_api import expect

    page = operator_page
    doc = {
        "topic": "invoices",
        "original_stream": "omni-stream:invoices",
        "original_id": "1-1",
        "failed_message": {"content": {"invoice": 12}, "reply_to": None},
        "error": "TimeoutError: agent slept",
        "retry_count": 3,
        "failed_at": 1714557600.5,
    }
    dead = r.xadd("omni-dlq:group:invoices:agent-a", {"data": json.dumps(doc)}).decode()
    r.xadd("omni-stream:invoices", {"data": "{}"})  # the origin exists, its entry 1-1 does not

    page.goto(_dlq(b"omni-dlq:group:invoices:agent-a"))
    page.click(f'tr[data-id="{dead}"] a[data-action="dead-letter-page"]')
    page.wait_for_url(f"**/entries/{dead}/")

    expect(page.locator('[data-fact="error"]')).to_have_text("TimeoutError: agent slept")
    expect(page.locator('[data-fact="retries"]')).to_have_text("3")
    expect(page.locator('[data-fact="group"]')).to_have_text("group:invoices:agent-a")
    expect(page.locator('[data-fact="failed-at"]')).to_have_text("2024-05-01 10:00:00 UTC")
    expect(page.locator('[data-fact="origin"] a')).to_have_text("omni-stream:invoices")
    expect(page.locator('[data-fact="original-id"]')).to_contain_text("1-1 (no longer in the stream)")
    assert page.locator('[data-fact="original-id"] a').count() == 0
    # the failed message, decoded from the JSON inside the JSON
    assert json.loads(page.locator("#payload-0").text_content()) == doc["failed_message"]

    page.click('button[data-action="requeue-one"]')
    expect(page.locator(".messages")).to_contain_text("Requeued 1 entry to omni-stream:invoices")
    entries = r.xrange("omni-stream:invoices")
    assert len(entries) == 2
    assert json.loads(entries[1][1][b"data"]) == doc["failed_message"]
    assert entries[1][1][b"_requeued_from"] == dead.encode()


def test_copy_id_button_copies(operator_page, r: redis.Redis, browser) -> None:
    """The copy button works under the CSP (no inline handler) and puts the ID on the clipboard."""
    from playwright.sync_api import expect

    page = operator_page
    page.context.grant_permissions(["clipboard-read", "clipboard-write"])
    entry_id = r.xadd("orders", {"ts": "1714557600123"}).decode()
    page.goto(f"/c/default/streams/orders/entries/{entry_id}/")
    button = page.locator('button[data-copy="entry-id"]')
    expect(button).to_be_visible()
    button.click()
    expect(button).to_have_attribute("data-copied", "yes")
    assert page.evaluate("navigator.clipboard.readText()") == entry_id
