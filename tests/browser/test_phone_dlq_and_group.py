"""The DLQ and group pages on a phone (390 x 844), in headless Chromium.

At 390 px the DLQ table scrolled sideways inside its own box: a row's Requeue button, where it came from
and its payload lay to the right of the screen. On a group with 151 pending entries the claim and ack
forms sat under the whole pending page, 5,600 px down. These tests measure bounding boxes in the real
browser:

* every key fact of a dead letter (its ID, its error, "Came from" and the stream, the payload preview)
  and its Requeue button lie inside the viewport's width, and the document does not scroll sideways;
  after ticking the last dead letter, "Requeue selected" is on screen;
* a pending row's box, ID and consumer lie inside the viewport's width;
* after ticking an entry halfway down the pending list (with script, the lowest entry on screen, which
  the page then scrolls out from under the bar), the claim and ack controls are inside the
  viewport and on top (``elementFromPoint`` at their centre is them), with the page far from its bottom,
  with and without JavaScript;
* the other pages (overview, streams, stream, search, retries, jobs) do not scroll sideways, and a
  stream's entry rows show their ID and the start of their fields on screen.

Screenshots go to ``artifacts/phone/``.
"""

from __future__ import annotations

from urllib.parse import quote

import msgpack
import pytest

from eventbus import keys as bus_keys
from streams_app.jobs.models import Job
from tests.browser.phone_pages import (
    ARTIFACTS,
    BOXES,
    DLQ,
    GROUP,
    IN_VIEW,
    PHONE,
    SCROLL_WIDTH,
    STREAM,
    UNBROKEN,
    dead_letters,
    dlq_page,
    group_page,
    outside_width,
    stuck_group,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


def test_a_dead_letter_row_keeps_its_facts_and_its_requeue_button_on_a_phone(phone, operator, r) -> None:
    dlq_ids = dead_letters(r)
    page = phone(operator)
    page.goto(dlq_page())
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / "dlq-390.png"), full_page=True)

    scroll, inner = page.evaluate(SCROLL_WIDTH)
    assert scroll <= inner, f"the DLQ page is {scroll} px wide in a {inner} px viewport"
    for dlq_id in dlq_ids:
        row = f'tr[data-id="{dlq_id}"]'
        boxes = page.evaluate(BOXES, {
            "select box": f"{row} input[name=ids]",
            "ID": f"{row} a[data-action=dead-letter-page]",
            "error": f"{row} .error-cell .bad-text",
            "Came from": [row, "Came from"],
            "original stream": f'{row} a[href="/c/default/streams/{quote(STREAM, safe="")}/"]',
            "payload preview": f"{row} .payload-cell summary",
            "Requeue": f"{row} button[data-action=requeue-one]",
        })
        assert outside_width(boxes, inner) == {}, f"row {dlq_id} at {inner} px: {outside_width(boxes, inner)}"

    # Ticking the last entry, far below the bar of buttons for the selection, keeps that bar on screen.
    last_box = page.locator(f'tr[data-id="{dlq_ids[0]}"] input[type=checkbox][name=ids]')  # newest first
    last_box.check()
    selected = page.locator("#dlq-selection button[value=requeue]").evaluate(IN_VIEW)
    assert selected["inside"] and selected["on_top"], f"'Requeue selected' after ticking the last entry: {selected}"
    last_box.uncheck()

    # The payload preview is clipped to its box, never wider than the screen, and opens in place.
    row = page.locator(f'tr[data-id="{dlq_ids[0]}"]')
    row.locator(".payload-cell summary").click()
    assert row.locator(".payload-cell pre.payload").first.is_visible()
    scroll, inner = page.evaluate(SCROLL_WIDTH)
    assert scroll <= inner, f"an opened payload makes the page {scroll} px wide"
    pre = page.evaluate(BOXES, {"pre": f'tr[data-id="{dlq_ids[0]}"] .payload-cell pre.payload'})
    assert outside_width(pre, inner) == {}

    # And the button still does its work from there.
    row.locator("button[data-action=requeue-one]").click()
    page.wait_for_selector(".messages")
    assert [e[0].decode() for e in r.xrange(DLQ)] == dlq_ids[1:]


def test_a_pending_row_keeps_its_box_id_and_consumer_on_a_phone(phone, operator, r) -> None:
    ids = stuck_group(r, 5)
    page = phone(operator)
    page.goto(group_page())
    scroll, inner = page.evaluate(SCROLL_WIDTH)
    assert scroll <= inner, f"the group page is {scroll} px wide in a {inner} px viewport"
    for entry_id in ids:
        row = f'#pending tr[data-id="{entry_id}"]'
        boxes = page.evaluate(BOXES, {
            "select box": f"{row} input[name=ids]",
            "ID": f"{row} td:nth-child(2) a",
            "consumer": f"{row} td:nth-child(3)",
            "idle": f"{row} td:nth-child(4)",
        })
        assert outside_width(boxes, inner) == {}, f"pending row {entry_id} at {inner} px: {outside_width(boxes, inner)}"


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_the_claim_and_ack_bar_is_in_reach_after_ticking_an_entry(javascript, phone, operator, r) -> None:
    ids = stuck_group(r, 151)
    page = phone(operator, javascript=javascript)
    page.goto(group_page())
    page_height = page.evaluate("document.scrollingElement.scrollHeight")
    assert page_height > 3 * PHONE["height"], "the pending list is not long enough to test this"

    # An entry halfway down the first page of the list: ticking scrolls it into view, as a thumb would.
    # With script, the worst case: the entry is the lowest on screen when ticked, where the bar that
    # the tick calls up would cover it.
    middle = page.locator('#pending input[name=ids]').nth(25)
    if javascript:
        middle.evaluate("el => el.closest('tr').scrollIntoView({block: 'end'})")
    middle.check()
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"group-selected-390-{'js' if javascript else 'nojs'}.png"))

    controls = {
        "consumer": "#pending-select input[name=consumer]",
        "Claim selected": "#pending-select button:has-text('Claim selected')",
        "confirm box": "#pending-select input[name=confirm]",
        "Ack selected": "#pending-select button:has-text('Ack selected')",
    }
    seen = {name: page.locator(sel).evaluate(IN_VIEW) for name, sel in controls.items()}
    assert all(v["inside"] and v["on_top"] for v in seen.values()), seen
    scroll_y, inner_h = page.evaluate("[window.scrollY, window.innerHeight]")
    assert scroll_y + inner_h < page_height - PHONE["height"], "the page was scrolled to its bottom"
    # The ticked entry itself is not hidden under the bar.
    assert middle.evaluate(IN_VIEW)["on_top"]

    # And it works from there: claim the ticked entry to another consumer.
    page.fill(controls["consumer"], "rescuer")
    page.fill("#pending-select input[name=min_idle_ms]", "0")
    page.click(controls["Claim selected"])
    page.wait_for_selector(".messages")
    [claimed] = [p["message_id"].decode() for p in r.xpending_range(STREAM, GROUP, "-", "+", 200, consumername="rescuer")]
    assert claimed == ids[25]


def test_other_pages_do_not_scroll_sideways_on_a_phone(phone, admin_user, r) -> None:
    dead_letters(r)
    stuck_group(r, 3)
    member = msgpack.packb([b"type", b"order.created", b"token", UNBROKEN.encode(), b"_retries", b"1", b"_group", GROUP])
    r.zadd(bus_keys.retry_key(STREAM.decode()), {member: 4_000_000_000_000})
    Job.objects.create(
        kind="dlq.requeue_all", connection="default", state=Job.State.RUNNING, done=1, total=3,
        parameters={"key_text": DLQ.decode()}, created_by=admin_user,
    )
    stream = f"/c/default/streams/{quote(STREAM, safe='')}/"
    pages = {
        "overview": "/",
        "streams": "/c/default/streams/",
        "stream": stream,
        "search": stream + "search/?q=" + quote('data.order_id == 1'),
        "plain search": stream + "search/?q=order",
        "dlq search": dlq_page() + "search/?q=declined",
        "retries": stream + "retries/",
        "retries list": "/c/default/retries/",
        "jobs": "/jobs/",
        "group": group_page(),
        "dlq": dlq_page(),
    }
    page = phone(admin_user)
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    wide = {}
    for name, path in pages.items():
        response = page.goto(path)
        assert response is not None and response.status < 400, f"{name}: {response and response.status}"
        page.wait_for_load_state("networkidle")
        scroll, inner = page.evaluate(SCROLL_WIDTH)
        if scroll > inner:
            wide[name] = scroll
        page.screenshot(path=str(ARTIFACTS / f"{name.replace(' ', '-')}-390.png"), full_page=True)
    assert wide == {}, f"pages wider than the {PHONE['width']} px viewport: {wide}"

    # The stream's entries: each row's ID and the start of its fields are on screen, not in a third
    # column to the right of it.
    page.goto(stream)
    rows = page.locator("#entries tbody tr")
    assert rows.count() >= 3
    for i in range(rows.count()):
        boxes = {
            "ID": rows.nth(i).locator("td:first-child a").bounding_box(),
            "fields": rows.nth(i).locator("summary").bounding_box(),
        }
        outside = {n: b for n, b in boxes.items() if b is None or b["x"] < 0 or b["x"] + b["width"] > PHONE["width"] + 0.5}
        assert outside == {}, f"stream entry row {i}: {outside}"
