"""An ack refused for want of the confirmation box keeps the selection, in Chromium.

The operator ticks two pending entries and presses "Ack selected" without ticking "will never be
processed". The ack is refused, and the two entries must still be ticked (and only they), so that ticking
the box and pressing again acks exactly them. With JavaScript the refusal happens in the page (the box
says why, nothing is posted); without it the form is posted, refused, and the page comes back with the
selection. Either way the page says why. Redis is read after each step: nothing is acked by the refusal, exactly the two after.
"""

from __future__ import annotations

import re

import pytest
import redis

from tests.browser.conftest import login_through_form

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

GROUP_PAGE = "/c/default/streams/orders/groups/billing/"


def _pending(r: redis.Redis) -> list[str]:
    return [p["message_id"].decode() for p in r.xpending_range("orders", "billing", "-", "+", 100)]


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_ack_without_the_confirmation_keeps_the_selection(javascript, browser, asgi_server, operator, r) -> None:
    from playwright.sync_api import expect

    ids = [r.xadd("orders", {"type": "order.created", "n": str(i)}).decode() for i in range(6)]
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker-1", {"orders": ">"})
    chosen = [ids[1], ids[3]]

    context = browser.new_context(base_url=asgi_server.url, java_script_enabled=javascript)
    try:
        page = login_through_form(context.new_page(), operator, asgi_server)
        page.goto(GROUP_PAGE + "?consumer=worker-1")
        for entry_id in chosen:
            page.check(f'input[name=ids][value="{entry_id}"]')
        page.click("#pending-select button:has-text('Ack selected')")

        confirm = page.locator("#pending-select input[name=confirm]")
        expect(page.get_by_text(re.compile("Tick the box")).first).to_be_visible()  # says why
        if javascript:
            expect(page.locator('[data-selection-count="pending-select"]').first).to_have_text("2 selected")
        assert page.url.endswith(GROUP_PAGE + "?consumer=worker-1")  # the same filtered list
        assert _pending(r) == ids  # nothing acked
        ticked = page.eval_on_selector_all('input[name=ids][form="pending-select"]:checked', "els => els.map(e => e.value)")
        assert ticked == chosen

        confirm.check()
        page.click("#pending-select button:has-text('Ack selected')")
        expect(page.locator(".messages")).to_contain_text("Acknowledged 2 entries")
        assert _pending(r) == [i for i in ids if i not in chosen]
        # After an ack that went through, nothing stays ticked.
        assert page.eval_on_selector_all('input[name=ids][form="pending-select"]:checked', "els => els.length") == 0
    finally:
        context.close()
