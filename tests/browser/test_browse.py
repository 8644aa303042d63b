"""An operator logs in, opens a stream, pages through it and opens an entry, in headless Chromium."""

from __future__ import annotations

import json
import re

import pytest
import redis

from tests.console.conftest import PASSWORD

pytestmark = pytest.mark.browser


def test_login_browse_page_and_open_an_entry(page, viewer, r: redis.Redis) -> None:
    ids = [
        r.xadd("orders:created", {"type": "order.created", "data": json.dumps({"order_id": i, "total": i * 1.5})}).decode()
        for i in range(60)
    ]
    r.xadd("orders:created", {"type": "evil", "data": "<img src=x onerror=alert(1)>"})
    newest_first = [*reversed(ids)]

    page.goto("/c/default/streams/")
    assert "/login/" in page.url  # anonymous: sent to the login page
    page.fill("input[name=username]", viewer.username)
    page.fill("input[name=password]", PASSWORD)
    page.click("button[type=submit]")
    page.wait_for_url(re.compile(r"/c/default/streams/$"))

    page.click("text=orders:created")
    page.wait_for_url(re.compile(r"/c/default/streams/orders%3Acreated/$"))
    first_page = page.locator("table.entries tbody tr td:first-child a").all_inner_texts()
    assert len(first_page) == 50
    assert first_page[1:] == newest_first[:49]  # the newest is the "evil" entry

    page.click("a[rel=next]")
    page.wait_for_url(re.compile(r"before="))
    second_page = page.locator("table.entries tbody tr td:first-child a").all_inner_texts()
    assert second_page == newest_first[49:]

    # Expand an entry in place: the decoded JSON payload is shown.
    row = page.locator("table.entries tbody tr").first
    row.locator("summary").click()
    assert '"order_id"' in row.locator("pre.payload").nth(1).inner_text()

    # Open the entry's own page.
    target = second_page[0]
    page.click(f"text={target}")
    page.wait_for_url(re.compile(rf"/entries/{target}/$"))
    assert page.locator("h1").inner_text() == target
    assert json.loads(page.locator("pre.payload").nth(1).inner_text())["order_id"] == ids.index(target)

    # The stored XSS payload on the first page was shown as text, never run.
    page.goto("/c/default/streams/orders%3Acreated/")
    page.locator("table.entries tbody tr").first.locator("summary").click()
    assert "<img src=x onerror=alert(1)>" in page.locator("table.entries tbody tr").first.inner_text()
    assert page.dialogs == []
