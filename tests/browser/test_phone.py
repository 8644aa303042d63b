"""The DLQ and group pages on a phone (390 x 844), in headless Chromium.

At 390 px the DLQ table scrolled sideways inside its own box: a row's Requeue button, where it came from
and its payload lay to the right of the screen. On a group with 151 pending entries the claim and ack
forms sat under the whole pending page, 5,600 px down. These tests measure bounding boxes in the real
browser:

* every key fact of a dead letter (its ID, its error, "Came from" and the stream, the payload preview)
  and its Requeue button lie inside the viewport's width, and the document does not scroll sideways;
  after ticking the last dead letter, "Requeue selected" is on screen;
* a pending row's box, ID and consumer lie inside the viewport's width;
* after ticking an entry halfway down the pending list, the claim and ack controls are inside the
  viewport and on top (``elementFromPoint`` at their centre is them), with the page far from its bottom,
  with and without JavaScript;
* the other pages (overview, streams, stream, search, retries, jobs) do not scroll sideways, and a
  stream's entry rows show their ID and the start of their fields on screen;
* the jobs list, the retries, a group's consumers and a stream's groups are cards too: a job's link and
  state, a retry's box, due time, event, error and payload preview (and, once the last retry is ticked,
  the buttons for the selection), a consumer's name, pending and idle, a group's name, pending and lag lie
  inside the viewport's width, no element of those pages scrolls sideways, and the sort links stay;
* the pending list's select-all box has a visible label on a phone (with JavaScript, which ticks them).

Screenshots go to ``artifacts/phone/``.
"""

from __future__ import annotations

import json
from pathlib import Path
from urllib.parse import quote

import msgpack
import pytest
import redis

from eventbus import keys as bus_keys
from streams_app.jobs.models import Job
from tests.browser.conftest import login_through_form

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

ARTIFACTS = Path(__file__).resolve().parents[2] / "artifacts" / "phone"
PHONE = {"width": 390, "height": 844}

# Names as buses make them: long, with nowhere to break.
STREAM = b"tenant-acme:region-europe-west-1:service-order-management:orders-created-events-v2"
DLQ = STREAM + b":dlq"
GROUP = b"billing-settlement-workers"
UNBROKEN = "x" * 40 + "-" + "0123456789abcdef" * 8

# The box of each element, null when it is missing. A selector is CSS, or [CSS, TEXT]: the element
# inside CSS that draws TEXT, as its own text or as its ::before (a label drawn before a cell's value;
# its box is then the cell's, which starts with it).
BOXES = """
(selectors) => Object.fromEntries(Object.entries(selectors).map(([name, sel]) => {
  const drawn = (e) => e.textContent.trim() === sel[1] && ![...e.children].some((c) => c.textContent.trim() === sel[1])
    || getComputedStyle(e, "::before").content === JSON.stringify(sel[1]);
  const el = typeof sel === "string" ? document.querySelector(sel)
    : [...document.querySelectorAll(sel[0] + " *")].find(drawn);
  if (!el) return [name, null];
  const b = el.getBoundingClientRect();
  return [name, {left: b.left, right: b.right, top: b.top, bottom: b.bottom, width: b.width, height: b.height}];
}))
"""

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

SCROLL_WIDTH = "[document.scrollingElement.scrollWidth, window.innerWidth]"


def _dead_letters(r: redis.Redis, n: int = 3) -> list[str]:
    ids = [r.xadd(STREAM, {"type": "order.created", "data": json.dumps({"order_id": i})}).decode() for i in range(n)]
    return [
        r.xadd(DLQ, {
            "type": "order.created",
            "data": json.dumps({"order_id": i, "note": UNBROKEN, "customer": "c" * 120}),
            "token": UNBROKEN,
            "dlq_original_stream": STREAM,
            "dlq_original_id": ids[i],
            "dlq_group": GROUP,
            "dlq_error": f"ValueError: {UNBROKEN} declined {i}",
            "dlq_retries": "5",
            "dlq_traceback": "Traceback (most recent call last):\n  " + UNBROKEN,
            "dlq_failed_at": "1700000000000",
        }).decode()
        for i in range(n)
    ]


def _stuck_group(r: redis.Redis, n: int) -> list[str]:
    """``n`` entries of STREAM, all delivered to one consumer of GROUP and never acked."""
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd(STREAM, {"type": "order.created", "data": json.dumps({"order_id": i})})
    ids = [i.decode() for i in pipe.execute()]
    r.xgroup_create(STREAM, GROUP, id="0")
    r.xreadgroup(GROUP, b"worker-7f3c9a2e-4b1d-4e8f-9a6b-2c5d8e1f0a3b", {STREAM: ">"}, count=n)
    assert r.xpending(STREAM, GROUP)["pending"] == n
    return ids


def _dlq_page() -> str:
    return f"/c/default/dlq/{quote(DLQ, safe='')}/"


def _group_page() -> str:
    return f"/c/default/streams/{quote(STREAM, safe='')}/groups/{quote(GROUP, safe='')}/"


@pytest.fixture
def phone(browser, asgi_server):
    """A factory of logged-in phone-sized tabs, with or without JavaScript."""
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


def _outside_width(boxes: dict, width: int) -> dict:
    """The boxes (of those measured) that are missing, empty or not within 0..width."""
    return {
        name: box for name, box in boxes.items()
        if box is None or box["width"] <= 0 or box["left"] < 0 or box["right"] > width + 0.5
    }


def test_a_dead_letter_row_keeps_its_facts_and_its_requeue_button_on_a_phone(phone, operator, r) -> None:
    dlq_ids = _dead_letters(r)
    page = phone(operator)
    page.goto(_dlq_page())
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
        assert _outside_width(boxes, inner) == {}, f"row {dlq_id} at {inner} px: {_outside_width(boxes, inner)}"

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
    assert _outside_width(pre, inner) == {}

    # And the button still does its work from there.
    row.locator("button[data-action=requeue-one]").click()
    page.wait_for_selector(".messages")
    assert [e[0].decode() for e in r.xrange(DLQ)] == dlq_ids[1:]


def test_a_pending_row_keeps_its_box_id_and_consumer_on_a_phone(phone, operator, r) -> None:
    ids = _stuck_group(r, 5)
    page = phone(operator)
    page.goto(_group_page())
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
        assert _outside_width(boxes, inner) == {}, f"pending row {entry_id} at {inner} px: {_outside_width(boxes, inner)}"


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_the_claim_and_ack_bar_is_in_reach_after_ticking_an_entry(javascript, phone, operator, r) -> None:
    ids = _stuck_group(r, 151)
    page = phone(operator, javascript=javascript)
    page.goto(_group_page())
    page_height = page.evaluate("document.scrollingElement.scrollHeight")
    assert page_height > 3 * PHONE["height"], "the pending list is not long enough to test this"

    # An entry halfway down the first page of the list: ticking scrolls it into view, as a thumb would.
    middle = page.locator('#pending input[name=ids]').nth(25)
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
    _dead_letters(r)
    _stuck_group(r, 3)
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
        "dlq search": _dlq_page() + "search/?q=declined",
        "retries": stream + "retries/",
        "retries list": "/c/default/retries/",
        "jobs": "/jobs/",
        "group": _group_page(),
        "dlq": _dlq_page(),
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


# --------------------------------------------------------------------- jobs, retries, consumers, groups
# The lists that still scrolled sideways inside their own box at 390 px: a job's state, a retry's due
# time, error and box, a consumer's pending and idle, a group's pending and lag lay to the right of the
# screen. Each is measured as above, and no element of the page may scroll sideways.

# Every element that scrolls sideways (its overflow lets it, and its content is wider than its box).
SIDEWAYS = """
() => [...document.querySelectorAll("body *")].filter((e) => {
  const x = getComputedStyle(e).overflowX;
  return (x === "auto" || x === "scroll") && e.scrollWidth > e.clientWidth + 1;
}).map((e) => `${e.tagName.toLowerCase()}${e.id ? "#" + e.id : ""}${[...e.classList].map((c) => "." + c).join("")}`
  + ` ${e.scrollWidth}>${e.clientWidth}`)
"""

CONSUMERS = [f"worker-{i}-" + "0123456789abcdef" * 3 for i in range(3)]
GROUPS = [f"{name}-{'settlement-' * 4}{i}" for i, name in enumerate(["billing", "shipping", "reporting"])]


def _no_sideways_scroll(page, name: str) -> None:
    scroll, inner = page.evaluate(SCROLL_WIDTH)
    assert scroll <= inner, f"the {name} page is {scroll} px wide in a {inner} px viewport"
    assert page.evaluate(SIDEWAYS) == [], f"elements of the {name} page that scroll sideways"


def _shot(page, name: str, table: str) -> None:
    """The whole page, and the table alone (legible at its own size)."""
    ARTIFACTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(ARTIFACTS / f"{name}-390.png"), full_page=True)
    page.locator(table).screenshot(path=str(ARTIFACTS / f"{name}-table-390.png"))


def test_a_job_row_keeps_its_state_and_link_on_a_phone(phone, admin_user) -> None:
    made = [
        Job.objects.create(
            kind=kind, connection="default", state=state, done=done, total=total, created_by=admin_user,
            parameters={"key": DLQ.hex(), "key_text": DLQ.decode()},
        )
        for kind, state, done, total in [("dlq.requeue_all", Job.State.RUNNING, 1, 3), ("replay", Job.State.FAILED, 7, 9),
                                         ("export", Job.State.DONE, 40_000, 40_000)]
    ]
    page = phone(admin_user)
    page.goto("/jobs/")
    _shot(page, "jobs-cards", "#jobs table")
    _no_sideways_scroll(page, "jobs")
    for job in made:
        row = f'#jobs tr[data-id="{job.pk}"]'
        boxes = page.evaluate(BOXES, {
            "link": f'{row} a[href="/jobs/{job.pk}/"]',
            "state": f"{row} .pill",
            "kind": [row, job.kind],
        })
        assert _outside_width(boxes, PHONE["width"]) == {}, f"job {job.pk}: {_outside_width(boxes, PHONE['width'])}"
        assert page.locator(f"{row} .pill").inner_text() == job.state


def test_a_retry_row_keeps_its_due_time_event_error_and_box_on_a_phone(phone, operator, redis_server, r) -> None:
    from tests.console.retries.conftest import make_retries, scheduled

    make_retries(redis_server.url(0), r, 8, stream=STREAM.decode())
    members = scheduled(r, "{" + STREAM.decode() + "}:retry")
    page = phone(operator)
    page.goto(f"/c/default/streams/{quote(STREAM, safe='')}/retries/")
    _shot(page, "retries-cards", "#entries table")
    _no_sideways_scroll(page, "retries")
    rows = page.locator("#entries tr[data-ref]")
    assert rows.count() == len(members) == 8
    for i in range(rows.count()):
        ref = rows.nth(i).get_attribute("data-ref")
        row = f'#entries tr[data-ref="{ref}"]'
        boxes = page.evaluate(BOXES, {
            "select box": f"{row} input[name=refs]",
            "due": f"{row} .due-cell strong",
            "event": f"{row} .event-cell .mono",
            "error": f"{row} .error-cell .bad-text",
            "payload preview": f"{row} .payload-cell summary",
        })
        assert _outside_width(boxes, PHONE["width"]) == {}, f"retry {i}: {_outside_width(boxes, PHONE['width'])}"
        assert "card declined" in page.locator(f"{row} .error-cell").inner_text()

    # Ticking the last retry, far below the buttons for the selection, keeps them on screen.
    last = rows.nth(rows.count() - 1).locator("input[name=refs]")
    last.check()
    for name in ("Retry selected now", "Move selected to DLQ"):
        seen = page.get_by_role("button", name=name).evaluate(IN_VIEW)
        assert seen["inside"] and seen["on_top"], f"{name!r} after ticking the last retry: {seen}"
    assert last.evaluate(IN_VIEW)["on_top"]  # the ticked row is not under the bar
    page.get_by_role("button", name="Retry selected now").click()
    page.wait_for_selector(".messages")
    assert len(scheduled(r, "{" + STREAM.decode() + "}:retry")) == 7


def test_consumer_and_group_rows_keep_their_figures_on_a_phone(phone, operator, r) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(30):
        pipe.xadd(STREAM, {"type": "order.created", "data": json.dumps({"order_id": i})})
    pipe.execute()
    for group in GROUPS:
        r.xgroup_create(STREAM, group, id="0")
    for n, consumer in enumerate(CONSUMERS):
        r.xreadgroup(GROUPS[0], consumer, {STREAM: ">"}, count=n + 2)
    r.xreadgroup(GROUPS[1], CONSUMERS[0], {STREAM: ">"}, count=5)
    page = phone(operator)

    page.goto(f"/c/default/streams/{quote(STREAM, safe='')}/groups/{quote(GROUPS[0], safe='')}/")
    _shot(page, "group-consumers-cards", "#consumers-table")
    _no_sideways_scroll(page, "group")
    rows = page.locator("#consumers-table tbody tr")
    assert rows.count() == len(CONSUMERS)
    for consumer in CONSUMERS:
        row = f'#consumers-table tr[data-consumer="{consumer}"]'
        boxes = page.evaluate(BOXES, {
            "name": [row, consumer], "pending": f"{row} .pending-cell", "idle": f"{row} .idle-cell",
            "its pending entries": f"{row} a[href*='consumer=']",
        })
        assert _outside_width(boxes, PHONE["width"]) == {}, f"consumer {consumer}: {_outside_width(boxes, PHONE['width'])}"
    pending = {consumer: int(page.locator(f'#consumers-table tr[data-consumer="{consumer}"] .pending-cell').inner_text())
               for consumer in CONSUMERS}
    assert pending == {c["name"].decode(): c["pending"] for c in r.xinfo_consumers(STREAM, GROUPS[0])}
    # The header's sort links stay on a phone: one tap on "Pending" sorts the cards by it, either way.
    page.locator("#consumers-table thead a", has_text="Pending").click()
    page.wait_for_load_state()
    order = page.locator("#consumers-table thead th", has_text="Pending").get_attribute("aria-sort")
    shown = [row.get_attribute("data-consumer") for row in page.locator("#consumers-table tbody tr").all()]
    assert shown == sorted(pending, key=pending.get, reverse=order == "descending"), (order, shown)
    _no_sideways_scroll(page, "group, sorted")

    page.goto(f"/c/default/streams/{quote(STREAM, safe='')}/")
    _shot(page, "stream-groups-cards", "#groups-table")
    _no_sideways_scroll(page, "stream")
    for group in GROUPS:
        row = f'#groups-table tr[data-group="{group}"]'
        boxes = page.evaluate(BOXES, {
            "name": f"{row} a.mono", "pending": f"{row} .pending-cell", "lag": f"{row} .lag-cell",
        })
        assert _outside_width(boxes, PHONE["width"]) == {}, f"group {group}: {_outside_width(boxes, PHONE['width'])}"
    lags = {group: page.locator(f'#groups-table tr[data-group="{group}"] .lag-cell').inner_text() for group in GROUPS}
    assert lags == {g["name"].decode(): str(g["lag"]) for g in r.xinfo_groups(STREAM)}


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_the_pending_lists_select_all_box_has_a_visible_label_on_a_phone(javascript, phone, operator, r) -> None:
    ids = _stuck_group(r, 4)
    page = phone(operator, javascript=javascript)
    page.goto(_group_page())
    label = page.locator("#pending thead label", has_text="Select all on this page")
    if not javascript:  # no script ticks them all: neither the box nor its label is shown
        assert label.count() == 0 or not label.is_visible()
        return
    seen = label.evaluate(IN_VIEW)
    assert label.is_visible() and seen["box"][2] <= PHONE["width"], seen
    label.click()  # the label, not the small box: a thumb's target
    assert page.locator("#pending input[name=ids]:checked").count() == len(ids)
    assert page.locator("[data-selection-count=pending-select]").inner_text() == f"{len(ids)} selected"
