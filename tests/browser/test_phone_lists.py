"""The jobs list, the retries, a group's consumers and a stream's groups on a phone (390 x 844), in
headless Chromium.

These lists still scrolled sideways inside their own box at 390 px: a job's state, a retry's due time,
error and box, a consumer's pending and idle, a group's pending and lag lay to the right of the screen.
They are cards now: a job's link and state, a retry's box, due time, event, error and payload preview
(and, once the last retry is ticked, the buttons for the selection), a consumer's name, pending and
idle, a group's name, pending and lag lie inside the viewport's width, no element of those pages
scrolls sideways, and the sort links stay. The pending list's select-all box has a visible label on a
phone (with JavaScript, which ticks them).

Screenshots go to ``artifacts/phone/``.
"""

from __future__ import annotations

import json
from urllib.parse import quote

import pytest

from streams_app.jobs.models import Job
from tests.browser.phone_pages import (
    ARTIFACTS,
    BOXES,
    DLQ,
    IN_VIEW,
    PHONE,
    SCROLL_WIDTH,
    STREAM,
    group_page,
    outside_width,
    stuck_group,
)

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]


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
        assert outside_width(boxes, PHONE["width"]) == {}, f"job {job.pk}: {outside_width(boxes, PHONE['width'])}"
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
        assert outside_width(boxes, PHONE["width"]) == {}, f"retry {i}: {outside_width(boxes, PHONE['width'])}"
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
        assert outside_width(boxes, PHONE["width"]) == {}, f"consumer {consumer}: {outside_width(boxes, PHONE['width'])}"
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
        assert outside_width(boxes, PHONE["width"]) == {}, f"group {group}: {outside_width(boxes, PHONE['width'])}"
    lags = {group: page.locator(f'#groups-table tr[data-group="{group}"] .lag-cell').inner_text() for group in GROUPS}
    assert lags == {g["name"].decode(): str(g["lag"]) for g in r.xinfo_groups(STREAM)}


@pytest.mark.parametrize("javascript", [True, False], ids=["js", "no-js"])
def test_the_pending_lists_select_all_box_has_a_visible_label_on_a_phone(javascript, phone, operator, r) -> None:
    ids = stuck_group(r, 4)
    page = phone(operator, javascript=javascript)
    page.goto(group_page())
    label = page.locator("#pending thead label", has_text="Select all on this page")
    if not javascript:  # no script ticks them all: neither the box nor its label is shown
        assert label.count() == 0 or not label.is_visible()
        return
    seen = label.evaluate(IN_VIEW)
    assert label.is_visible() and seen["box"][2] <= PHONE["width"], seen
    label.click()  # the label, not the small box: a thumb's target
    assert page.locator("#pending input[name=ids]:checked").count() == len(ids)
    assert page.locator("[data-selection-count=pending-select]").inner_text() == f"{len(ids)} selected"
