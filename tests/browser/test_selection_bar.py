"""A selection's action bar stays in reach while scrolling, and works from the keyboard,
in headless Chromium at a desktop size, against the real ASGI app and a real Redis.

On the stream's entries, the pending list and a DLQ, an entry far down a long list is ticked with the
keyboard (Space on its focused box), the page is scrolled, and the bar's button must lie inside the
viewport and be the topmost thing at its centre (``getBoundingClientRect`` and ``elementFromPoint``).
On the entries page, focus moved back up with Shift+Tab onto a row hidden above the screen must come
into view clear of the stuck bar, not under it; and Enter on the bar's button does its work (the delete
preview names the ticked entry, read back from XRANGE; nothing is deleted).
"""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest
import redis

from tests.browser.conftest import login_through_form

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DESKTOP = {"width": 1280, "height": 720}

# Whether the element is drawn inside the viewport and is the topmost thing at its centre (not covered).
IN_VIEW = """
(el) => {
  const b = el.getBoundingClientRect();
  const inside = b.width > 0 && b.height > 0 && b.left >= 0 && b.top >= 0
    && b.right <= window.innerWidth && b.bottom <= window.innerHeight;
  const hit = document.elementFromPoint(b.left + b.width / 2, b.top + b.height / 2);
  return {inside, on_top: !!hit && (hit === el || el.contains(hit)),
          box: [Math.round(b.left), Math.round(b.top), Math.round(b.right), Math.round(b.bottom)]};
}
"""


def _tick_with_keyboard(page, box) -> None:
    box.focus()
    page.keyboard.press("Space")
    assert box.is_checked()


def _scroll_by(page, pixels: int) -> None:
    """Scroll the page as a wheel would, at once (no smooth scrolling to wait for)."""
    before = page.evaluate("window.scrollY")
    after = page.evaluate("(px) => { window.scrollBy({top: px, behavior: 'instant'}); return window.scrollY; }", pixels)
    assert after != before, "the page did not scroll: the list is not long enough to test this"


def _assert_in_reach(locator, what: str) -> None:
    seen = locator.evaluate(IN_VIEW)
    assert seen["inside"] and seen["on_top"], f"{what}: {seen}"


def test_the_action_bar_stays_in_reach_while_scrolling_and_works_with_the_keyboard(
    browser, asgi_server, admin_user, r: redis.Redis
) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(200):
        pipe.xadd("orders", {"type": "order.created", "data": json.dumps({"order_id": i})})
    ids = [i.decode() for i in pipe.execute()]
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker-1", {"orders": ">"}, count=200)
    for i in range(80):
        r.xadd("orders:dlq", {"type": "order.created", "data": json.dumps({"order_id": i}),
                              "dlq_original_stream": "orders", "dlq_original_id": ids[i], "dlq_error": "boom"})  # fmt: skip
    context = browser.new_context(base_url=asgi_server.url, viewport=DESKTOP)
    try:
        page = context.new_page()
        page.set_default_timeout(15_000)
        login_through_form(page, admin_user, asgi_server)

        # The stream's entries, newest first, 200 on the page: tick the 150th, then scroll on.
        page.goto("/c/default/streams/orders/?count=200")
        bar_button = page.locator(".entries-selection button[data-action=delete-selected]")
        assert not bar_button.is_visible()  # nothing ticked: no bar
        target = ids[200 - 150]
        box = page.locator(f'input[name=ids][value="{target}"]')
        _tick_with_keyboard(page, box)
        _scroll_by(page, 1500)
        _assert_in_reach(bar_button, "entries: 'Preview delete' after scrolling")
        _assert_in_reach(page.locator('.entries-selection [data-selection-count="entries-delete"]'), "entries: count")
        assert page.locator('.entries-selection [data-selection-count="entries-delete"]').inner_text() == "1 selected"
        # Focus back on the ticked box, its row put just above the screen; Shift+Tab reaches the row
        # above, which the browser scrolls into view below the stuck bar.
        box.focus()
        page.evaluate("(el) => { el.scrollIntoView({block: 'start'}); window.scrollBy(0, 200); }", box.element_handle())
        page.keyboard.press("Shift+Tab")
        focused = page.evaluate_handle("document.activeElement")
        assert page.evaluate("(el) => el.closest('tr') !== null", focused), "focus left the table"
        seen = page.evaluate(IN_VIEW, focused)
        assert seen["inside"] and seen["on_top"], f"the row focused with Shift+Tab is hidden under the bar: {seen}"
        # Enter on the bar's button: the delete preview of the ticked entry (nothing deleted yet).
        bar_button.focus()
        page.keyboard.press("Enter")
        page.wait_for_url("**/delete/preview/")
        assert target in page.content() and r.xrange("orders", target, target) != []

        # The pending list (desktop): tick the 45th of 50 with the keyboard, scroll back to the list's top.
        page.goto("/c/default/streams/orders/groups/billing/")
        _tick_with_keyboard(page, page.locator("#pending input[name=ids]").nth(44))
        page.locator("#pending input[name=ids]").nth(5).scroll_into_view_if_needed()
        _scroll_by(page, -200)
        _assert_in_reach(page.locator("#pending-select button:has-text('Claim selected')"), "pending: 'Claim selected'")
        _assert_in_reach(page.locator("#pending-select button:has-text('Ack selected')"), "pending: 'Ack selected'")

        # A DLQ of 80 (50 on the page): tick the last with the keyboard, it is far below the bar above.
        page.goto(f"/c/default/dlq/{quote(b'orders:dlq', safe='')}/")
        _tick_with_keyboard(page, page.locator("input[name=ids][form=dlq-selection]").last)
        _scroll_by(page, 400)
        _assert_in_reach(page.locator("#dlq-selection button[value=requeue]"), "DLQ: 'Requeue selected'")
    finally:
        context.close()
