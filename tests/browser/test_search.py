"""Search on the stream page in headless Chromium: type a query, see the matches arrive and the
"scanned N of M" line, then Continue from where the run stopped. No script of ours runs: htmx follows
the chain of steps (``hx-trigger="load"``), under the page's Content-Security-Policy."""

from __future__ import annotations

import re

import pytest
import redis

from streams_app import search
from streams_app.views import search as search_views
from tests.browser.conftest import login_through_form

pytestmark = pytest.mark.browser


def test_typing_a_query_shows_matches_and_continue_resumes(
    page, viewer, asgi_server, r: redis.Redis, monkeypatch
) -> None:
    for i in range(40):
        r.xadd("orders", {"type": "order.paid" if i % 3 == 0 else "order.created", "data": f'{{"n": {i}}}'})
    ids = [i.decode() for i, _ in r.xrange("orders")]
    paid = {i.decode() for i, f in r.xrange("orders") if f[b"type"] == b"order.paid"}
    # the server runs in this process: small steps and a small run, as a big stream would have
    monkeypatch.setattr(search_views, "STEP_ENTRIES", 5)
    monkeypatch.setattr(search, "BUDGET_ENTRIES", 20)
    csp_errors: list[str] = []
    page.on("console", lambda m: csp_errors.append(m.text) if "Content Security Policy" in m.text else None)

    login_through_form(page, viewer, asgi_server)
    page.goto("/c/default/streams/orders/")
    page.fill("form.search-form input[name=q]", 'type == "order.paid"')
    page.click("form.search-form button[type=submit]")
    page.wait_for_url(re.compile(r"[?&]q=type"))
    page.wait_for_selector("#search-status[data-complete=stopped]")

    first_run = page.locator(".search-hit > a.mono").all_inner_texts()
    assert first_run == [i for i in ids[:20] if i in paid]
    status = " ".join(page.locator("#search-status").inner_text().split())
    assert status.startswith(f"Scanned 20 of 40 entries, from ID {ids[0]} (")
    assert f"to ID {ids[19]} (" in status and f"{len(first_run)} matches." in status

    page.click("#search-status a[data-search-continue]")
    page.wait_for_url(re.compile(r"[?&]cursor="))
    page.wait_for_selector("#search-status[data-complete=yes]")
    second_run = page.locator(".search-hit > a.mono").all_inner_texts()
    assert second_run == [i for i in ids[20:] if i in paid]
    status = " ".join(page.locator("#search-status").inner_text().split())
    assert (
        status.startswith(f"Scanned 20 of 40 entries, from ID {ids[20]} (") and f"to ID {ids[39]} (" in status
    )
    assert page.locator("form.search-form input[name=q]").input_value() == 'type == "order.paid"'
    assert csp_errors == [] and page.dialogs == []
