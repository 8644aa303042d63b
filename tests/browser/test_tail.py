"""The live tail page in headless Chromium: untrusted payloads stay text, pause/resume and reconnects miss nothing."""

from __future__ import annotations

import json

import pytest
import redis
from playwright.sync_api import expect

from tests.conftest import AsgiServer, session_cookie

pytestmark = pytest.mark.browser

XSS = ["<img src=x onerror=alert(1)>", "<script>alert(2)</script>", '"><svg onload=alert(3)>']


def ids_on_page(page) -> list[str]:
    """Entry IDs shown, oldest first (the page shows the newest on top)."""
    return page.locator("#tail-rows tr td:first-child a").all_inner_texts()[::-1]


def test_live_tail_renders_payloads_as_text_and_resumes_without_gaps(page, asgi_server, viewer, r: redis.Redis) -> None:
    expect.set_options(timeout=15_000)
    key = b"web:events"
    history = [r.xadd(key, {"type": "page.view", "n": str(i)}).decode() for i in range(3)]
    page.context.add_cookies(
        [{"name": name, "value": value, "url": asgi_server.url} for name, value in session_cookie(viewer).items()]
    )

    page.goto("/c/default/streams/web%3Aevents/tail/")
    state = page.locator("#tail-state")
    expect(state).to_have_attribute("data-state", "live")
    assert ids_on_page(page) == history  # the recent backlog is replayed when the page opens

    # Untrusted payloads arrive live and are shown as text: no element, no script, no dialog.
    evil = [r.xadd(key, {"html": XSS[0]}).decode(), r.xadd(key, {"js": XSS[1]}).decode(),
            r.xadd(key, {"data": json.dumps({"x": XSS[2]})}).decode()]
    expect(page.locator("#tail-rows tr").first.locator("td").first).to_have_text(evil[-1])
    assert ids_on_page(page) == history + evil
    rows = page.locator("#tail-rows")
    assert rows.locator("img, script, svg").count() == 0
    text = rows.text_content()
    assert f"html={XSS[0]}" in text and f"js={XSS[1]}" in text and XSS[2].replace('"', '\\"') in text
    page.locator("#tail-rows tr").nth(1).locator("summary").click()  # open the <script> entry
    expect(page.locator("#tail-rows tr").nth(1).locator("pre.payload")).to_have_text(XSS[1])
    assert page.dialogs == []

    # Pause: the socket is closed; entries written meanwhile are not shown...
    page.click("#tail-pause")
    expect(state).to_have_attribute("data-state", "paused")
    expect(page.locator("#tail-pause")).to_have_text("Resume")
    while_paused = [r.xadd(key, {"type": "order", "n": str(i)}).decode() for i in range(25)]
    assert ids_on_page(page) == history + evil
    # ...and Resume continues after the last ID seen: every one of them, once, in order.
    page.click("#tail-pause")
    expect(page.locator("#tail-rows tr").first.locator("td").first).to_have_text(while_paused[-1])
    expect(state).to_have_attribute("data-state", "live")
    assert ids_on_page(page) == history + evil + while_paused
    expect(page.locator("#tail-rate")).not_to_have_text("0.0")  # entries/s over the last few seconds

    # The server goes away (a restart closes the socket): the page reconnects by itself, with
    # backoff, to the new server on the same address and resumes from the last ID it showed.
    replacement = AsgiServer()
    replacement.port, replacement._server.config.port, replacement.url = asgi_server.port, asgi_server.port, asgi_server.url
    asgi_server.stop()
    try:
        expect(state).to_have_attribute("data-state", "reconnecting")
        while_down = [r.xadd(key, {"type": "order", "n": str(i)}).decode() for i in range(4)]
        replacement.start()
        expect(page.locator("#tail-rows tr").first.locator("td").first).to_have_text(while_down[-1])
        expect(state).to_have_attribute("data-state", "live")
        assert ids_on_page(page) == history + evil + while_paused + while_down
        live = r.xadd(key, {"type": "order", "n": "last"}).decode()
        expect(page.locator("#tail-rows tr").first.locator("td").first).to_have_text(live)
        while_down.append(live)
    finally:
        replacement.stop()

    # The field/value filter hides the other rows.
    page.fill("#tail-filter", "html=onerror")
    expect(page.locator("#tail-rows tr:visible")).to_have_count(1)
    page.fill("#tail-filter", "type=order")
    expect(page.locator("#tail-rows tr:visible")).to_have_count(len(while_paused) + len(while_down))
    page.fill("#tail-filter", "")
    expect(page.locator("#tail-rows tr:visible")).to_have_count(len(ids_on_page(page)))
    assert page.dialogs == []
