"""Bulk actions in headless Chromium, against the real ASGI app and a real Redis.

- "Requeue all up to ..." and the sweep first show a page with the number they will touch (the
   expected number is computed here from XLEN / XPENDING ... IDLE), nothing changes until the operator
   confirms, and then exactly that many entries move.
- select-all boxes tick every row box of the pending, DLQ and entry tables, and the "N selected"
   label beside the buttons follows every box.
- a requeue's flash lists the new IDs (XRANGE finds them in the target stream) and links them, and
   an action taken on a filtered DLQ page comes back to the same filter.
"""

from __future__ import annotations

import json
import re
from concurrent.futures import ThreadPoolExecutor
from urllib.parse import quote

import pytest
import redis

from tests.browser.conftest import login_through_form

pytestmark = [pytest.mark.browser, pytest.mark.django_db(transaction=True)]

DLQ_PAGE = f"/c/default/dlq/{quote(b'orders:dlq', safe='')}/"
GROUP_PAGE = "/c/default/streams/orders/groups/billing/"


@pytest.fixture
def operator_page(page, operator, asgi_server):
    return login_through_form(page, operator, asgi_server)


def _dead_letter(r: redis.Redis, i: int, error: str = "ValueError: card declined") -> str:
    return r.xadd(
        "orders:dlq",
        {
            "type": "order.created",
            "data": json.dumps({"order_id": i}),
            "dlq_original_stream": "orders",
            "dlq_original_id": f"1-{i}",
            "dlq_group": "billing",
            "dlq_error": error,
            "dlq_retries": "5",
            "dlq_failed_at": "1700000000000",
        },
    ).decode()


def _stuck(r: redis.Redis, *, idle: int, fresh: int) -> list[str]:
    """Pending entries of worker-1: ``idle`` of them idle for an hour (XCLAIM IDLE), then ``fresh`` ones."""
    ids = [r.xadd("orders", {"type": "order.created", "n": str(i)}).decode() for i in range(idle + fresh)]
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker-1", {"orders": ">"})
    r.xclaim("orders", "billing", "worker-1", 0, ids[:idle], idle=3_600_000, justid=True)
    return ids


def _owners(r: redis.Redis) -> dict[str, str]:
    return {
        p["message_id"].decode(): p["consumer"].decode()
        for p in r.xpending_range("orders", "billing", "-", "+", 100)
    }


# ----------------------------------------------------------------------------------------- item 7


def test_requeue_all_shows_the_count_and_waits_for_the_confirmation(operator_page, r: redis.Redis) -> None:
    from playwright.sync_api import expect

    from streams_app.jobs import runner as jobs
    from streams_app.jobs.models import Job

    page = operator_page
    for i in range(6):
        _dead_letter(r, i)
    page.goto(DLQ_PAGE)
    expect(page.locator("tr[data-id]")).to_have_count(6)
    expected = r.xlen("orders:dlq")  # what is on screen, up to the newest ID shown
    late = [_dead_letter(r, 100 + i) for i in range(2)]  # dead-lettered after the page loaded

    page.click("#requeue-all-form button")
    expect(page.locator("#requeue-count")).to_have_text(str(expected))
    expect(page.locator("#requeue-all-preview button[type=submit]")).to_have_text(
        f"Requeue {expected} entries"
    )
    assert r.xlen("orders:dlq") == expected + 2 and not r.exists("orders")  # nothing happened yet
    with ThreadPoolExecutor(1) as pool:
        assert pool.submit(lambda: Job.objects.count()).result() == 0

    page.click("#requeue-all-preview button[type=submit]")
    page.wait_for_url(re.compile(r"/jobs/\d+/$"))
    job_id = int(page.url.rstrip("/").rsplit("/", 1)[1])
    with ThreadPoolExecutor(1) as pool:  # what the worker does; this thread runs Playwright's loop
        pool.submit(jobs.job_run, job_id).result()
    assert r.xlen("orders") == expected
    assert [e[0].decode() for e in r.xrange("orders:dlq")] == late


def test_sweep_shows_the_count_and_waits_for_the_confirmation(operator_page, r: redis.Redis) -> None:
    from playwright.sync_api import expect

    page = operator_page
    _stuck(r, idle=7, fresh=3)
    min_idle, count = 600_000, 5
    idle_now = [
        p["message_id"].decode() for p in r.xpending_range("orders", "billing", "-", "+", 100, idle=min_idle)
    ]
    expected = idle_now[:count]
    before = _owners(r)

    page.goto(GROUP_PAGE + "?consumer=worker-1")
    form = page.locator("#sweep-form")
    form.locator("input[name=min_idle_ms]").fill(str(min_idle))
    form.locator("input[name=consumer]").fill("sweeper")
    form.locator("input[name=count]").fill(str(count))
    form.locator("button[type=submit]").click()

    expect(page.locator("#sweep-count")).to_have_text(str(len(expected)))
    assert _owners(r) == before  # nothing happened yet

    page.click("#sweep-preview button[type=submit]")
    expect(page.locator(".messages")).to_contain_text(f"Claimed {len(expected)} entries to sweeper.")
    assert page.url.endswith(GROUP_PAGE + "?consumer=worker-1")  # the filtered page it came from
    after = _owners(r)
    assert sorted(e for e, c in after.items() if c == "sweeper") == sorted(expected)
    assert sum(c == "worker-1" for c in after.values()) == 10 - len(expected)


# ----------------------------------------------------------------------------------------- item 8


def _check_select_all(page, form_id: str, rows: int) -> None:
    from playwright.sync_api import expect

    boxes = page.locator(f'input[type=checkbox][name=ids][form="{form_id}"]')
    label = page.locator(f'[data-selection-count="{form_id}"]').first
    select_all = page.locator(f'[data-select-all="{form_id}"]')
    expect(boxes).to_have_count(rows)
    expect(label).to_have_text("0 selected")
    select_all.check()
    for i in range(rows):
        expect(boxes.nth(i)).to_be_checked()
    expect(label).to_have_text(f"{rows} selected")
    boxes.nth(1).uncheck()
    expect(label).to_have_text(f"{rows - 1} selected")
    expect(select_all).not_to_be_checked()
    assert select_all.evaluate("el => el.indeterminate") is True
    boxes.nth(1).check()
    expect(select_all).to_be_checked()
    select_all.uncheck()
    expect(label).to_have_text("0 selected")
    for i in range(rows):
        expect(boxes.nth(i)).not_to_be_checked()


def test_select_all_on_the_pending_and_dlq_tables(operator_page, r: redis.Redis) -> None:
    page = operator_page
    _stuck(r, idle=4, fresh=0)
    for i in range(3):
        _dead_letter(r, i)
    page.goto(GROUP_PAGE)
    _check_select_all(page, "pending-select", 4)
    page.goto(DLQ_PAGE)
    _check_select_all(page, "dlq-selection", 3)


def test_select_all_on_the_entries_table(page, admin_user, asgi_server, r: redis.Redis) -> None:
    from playwright.sync_api import expect

    login_through_form(page, admin_user, asgi_server)
    for i in range(5):
        r.xadd("orders", {"n": str(i)})
    page.goto("/c/default/streams/orders/")
    page.click("#stream-admin summary")  # the delete button and its count live in the admin zone
    _check_select_all(page, "entries-delete", 5)
    page.locator('[data-select-all="entries-delete"]').check()
    page.click("#entries-delete button[type=submit]")
    expect(page.locator("#delete-count")).to_have_text("5")


# ----------------------------------------------------------------------------------------- item 9


def test_requeue_flash_lists_the_new_ids_and_the_filter_stays(operator_page, r: redis.Redis) -> None:
    from playwright.sync_api import expect

    page = operator_page
    timeouts = [_dead_letter(r, i, error="TimeoutError: payment gateway") for i in range(3)]
    others = [_dead_letter(r, 10 + i) for i in range(2)]
    page.goto(DLQ_PAGE + "?error=TimeoutError")
    expect(page.locator("tr[data-id]")).to_have_count(3)
    page.locator('[data-select-all="dlq-selection"]').check()
    expect(page.locator('[data-selection-count="dlq-selection"]')).to_have_text("3 selected")
    page.click("#dlq-selection button[value=requeue]")

    expect(page.locator(".messages")).to_contain_text("Requeued 3 entries to orders: ")
    assert page.url.endswith(DLQ_PAGE + "?error=TimeoutError")
    expect(page.locator("input[name=error]")).to_have_value("TimeoutError")
    new_ids = [e[0].decode() for e in r.xrange("orders")]
    assert len(new_ids) == 3
    assert sorted(f[b"_requeued_from"].decode() for _, f in r.xrange("orders")) == sorted(timeouts)
    flash = page.locator(".messages").inner_text()
    assert f"orders: {', '.join(new_ids)}." in flash
    links = page.locator("#requeued-links a")
    expect(links).to_have_count(3)
    assert [links.nth(i).inner_text() for i in range(3)] == new_ids
    assert [e[0].decode() for e in r.xrange("orders:dlq")] == others
    links.nth(0).click()
    page.wait_for_url(re.compile(rf"/c/default/streams/orders/entries/{new_ids[0]}/$"))
