"""The live tail page in headless Chromium: untrusted payloads stay text, pause/resume and reconnects miss nothing."""

from __future__ import annotations

import json
import re
from datetime import UTC, datetime
from urllib.parse import quote

import pytest
import redis
from playwright.sync_api import expect

from tests.conftest import AsgiServer, session_cookie
from tests.polling import wait_for

pytestmark = pytest.mark.browser

XSS = ["<img src=x onerror=alert(1)>", "<script>alert(2)</script>", '"><svg onload=alert(3)>']


def ids_on_page(page) -> list[str]:
    """Entry IDs shown, oldest first (the page shows the newest on top)."""
    return page.locator("#tail-rows tr td:first-child a").all_inner_texts()[::-1]


def test_live_tail_renders_payloads_as_text_and_resumes_without_gaps(
    page, asgi_server, viewer, r: redis.Redis
) -> None:
    expect.set_options(timeout=15_000)
    key = b"web:events"
    history = [r.xadd(key, {"type": "page.view", "n": str(i)}).decode() for i in range(3)]
    page.context.add_cookies(
        [
            {"name": name, "value": value, "url": asgi_server.url}
            for name, value in session_cookie(viewer).items()
        ]
    )

    page.goto("/c/default/streams/web%3Aevents/tail/")
    state = page.locator("#tail-state")
    expect(state).to_have_attribute("data-state", "live")
    assert ids_on_page(page) == history  # the recent backlog is replayed when the page opens

    # Untrusted payloads arrive live and are shown as text: no element, no script, no dialog.
    evil = [
        r.xadd(key, {"html": XSS[0]}).decode(),
        r.xadd(key, {"js": XSS[1]}).decode(),
        r.xadd(key, {"data": json.dumps({"x": XSS[2]})}).decode(),
    ]
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
    # entries/s that arrived live: the 25 replayed on Resume are not a rate
    expect(page.locator("#tail-rate")).to_have_text("0.0")

    # The filter runs on the server: the page's rows are shown again through it (payloads still text).
    everything = history + evil + while_paused
    page.fill("#tail-filter", 'html.contains("onerror")')
    expect(page.locator("#tail-count")).to_have_text("1 row matching the filter")
    assert ids_on_page(page) == [evil[0]]
    assert rows.locator("img, script, svg").count() == 0
    page.fill("#tail-filter", "type=order")  # the old syntax, read as search's expression
    expect(page.locator("#tail-filter-note")).to_have_text('Filter read as type == "order"')
    expect(page.locator("#tail-rows tr")).to_have_count(len(while_paused))
    assert ids_on_page(page) == while_paused
    page.fill("#tail-filter", "")
    expect(page.locator("#tail-rows tr")).to_have_count(len(everything))
    assert ids_on_page(page) == everything

    # The server goes away (a restart closes the socket): the page reconnects by itself, with
    # backoff, to the new server on the same address and resumes from the last ID it showed.
    replacement = AsgiServer()
    replacement.port, replacement._server.config.port, replacement.url = (
        asgi_server.port,
        asgi_server.port,
        asgi_server.url,
    )
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

    assert page.dialogs == []


# ------------------------------------------------------------------------ rate, counter, filter language, address

# Records every value the page writes into the rate, with the state and row count at that moment, so a
# test can look at all of them (the script rewrites the rate once a second).
RATE_RECORDER = """
window.__rates = [];
document.addEventListener("DOMContentLoaded", function () {
  var rate = document.getElementById("tail-rate"), state = document.getElementById("tail-state");
  new MutationObserver(function () {
    window.__rates.push([state.dataset.state, rate.textContent,
                         document.querySelectorAll("#tail-rows tr").length]);
  }).observe(rate, {childList: true, characterData: true, subtree: true});
});
"""


def signed_in(page, asgi_server, user) -> None:
    page.context.add_cookies(
        [
            {"name": name, "value": value, "url": asgi_server.url}
            for name, value in session_cookie(user).items()
        ]
    )


def recorded_rates(page) -> list[tuple[str, str, int]]:
    return [tuple(x) for x in page.evaluate("() => window.__rates")]


def rates_with(page, rows: int) -> list[str]:
    """The rates shown while live with ``rows`` rows, once at least two were shown (two ticks).

    (Polled with ``evaluate``: ``wait_for_function`` compiles its predicate with eval, which CSP refuses.)
    """

    def shown() -> list[str]:
        return [value for state, value, n in recorded_rates(page) if state == "live" and n == rows]

    return wait_for(
        lambda: len(shown()) >= 2 and shown(), what=f"two rates shown with {rows} rows", timeout=15
    )


def test_the_rate_counts_live_entries_not_the_replayed_backlog(
    page, asgi_server, viewer, r: redis.Redis
) -> None:
    expect.set_options(timeout=15_000)
    key = b"rate:events"
    backlog = [r.xadd(key, {"n": str(i)}).decode() for i in range(300)]
    signed_in(page, asgi_server, viewer)
    page.add_init_script(RATE_RECORDER)

    # Opened at an earlier position: all 300 entries are replayed (the old page showed 60/s for them).
    page.goto(f"/c/default/streams/rate%3Aevents/tail/?after={backlog[0]}")
    expect(page.locator("#tail-state")).to_have_attribute("data-state", "live")
    expect(page.locator("#tail-rows tr")).to_have_count(len(backlog))
    assert ids_on_page(page) == backlog
    shown = rates_with(page, len(backlog))
    assert set(shown) == {"0.0"}, shown
    assert {value for _, value, _ in recorded_rates(page)} <= {"0.0", "—"}  # never the backlog

    # Four entries arrive live: the rate counts them (at most 4 in any second), and nothing more.
    live = [r.xadd(key, {"n": f"live-{i}"}).decode() for i in range(4)]
    expect(page.locator("#tail-rows tr")).to_have_count(len(backlog) + len(live))
    shown = rates_with(page, len(backlog) + len(live))
    assert all(0 < float(value) <= len(live) for value in shown[:1]), shown  # the first tick after they came
    assert all(float(value) <= len(live) for value in shown), shown
    assert ids_on_page(page) == backlog + live


CUSTOMERS = [4, 42, 14, "4", 40, 4]


def customer_entry(i: int) -> dict[str, str]:
    return {
        "type": "order.paid" if i % 2 else "order.created",
        "data": json.dumps({"customer": {"id": CUSTOMERS[i % 6], "name": "Ada" if i % 3 == 0 else "Bob"}}),
    }


def is_customer(fields: dict[str, str], n: int) -> bool:
    value = json.loads(fields["data"])["customer"]["id"]
    return type(value) is int and value == n


def has_text(fields: dict[str, str], needle: str) -> bool:
    return any(needle in name.lower() or needle in value.lower() for name, value in fields.items())


def test_the_filter_is_search_language_customer_4_is_not_42(page, asgi_server, viewer, r: redis.Redis) -> None:
    """``data.customer.id == 4`` shows customer 4 and not 42 (nor the string "4"), live and replayed; the
    old ``data.customer.id=4`` is read as that and the page says so; plain text still works; a refused
    filter says why and a corrected one tails again."""
    expect.set_options(timeout=15_000)
    key = b"customers"
    entries = {r.xadd(key, customer_entry(i)).decode(): customer_entry(i) for i in range(12)}
    signed_in(page, asgi_server, viewer)
    page.goto("/c/default/streams/customers/tail/")
    expect(page.locator("#tail-state")).to_have_attribute("data-state", "live")
    expect(page.locator("#tail-count")).to_have_text(f"{len(entries)} rows")
    # the last ID has its human time beside it, computed here from the ID's millisecond part
    newest = max(entries, key=lambda i: tuple(map(int, i.split("-"))))
    expect(page.locator("#tail-last")).to_have_text(newest)
    when = datetime.fromtimestamp(int(newest.split("-")[0]) / 1000, tz=UTC)
    expect(page.locator("#tail-last-time")).to_have_text(when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC")

    def shows(predicate) -> None:
        want = [i for i, fields in entries.items() if predicate(fields)]
        assert 0 < len(want) < len(entries), want
        expect(page.locator("#tail-count")).to_have_text(f"{len(want)} row{'s' if len(want) > 1 else ''} "
                                                         "matching the filter")
        assert ids_on_page(page) == want

    page.fill("#tail-filter", "data.customer.id == 4")
    page.press("#tail-filter", "Enter")
    shows(lambda f: is_customer(f, 4))
    expect(page.locator("#tail-filter-note")).to_have_text("Expression (CEL).")
    # the help is the search box's
    expect(page.locator("#tail-filter-help")).to_contain_text("A query is an expression (CEL) when it parses")
    # live: customer 4 arrives, customer 42 does not
    more = [customer_entry(0), {**customer_entry(1), "data": json.dumps({"customer": {"id": 42}})}]
    entries.update({r.xadd(key, fields).decode(): fields for fields in more})
    shows(lambda f: is_customer(f, 4))
    expect(page.locator("#tail-state")).to_have_attribute("data-state", "live")

    page.fill("#tail-filter", "data.customer.id=4")  # applies once typing stops
    expect(page.locator("#tail-filter-note")).to_have_text("Filter read as data.customer.id == 4")
    shows(lambda f: is_customer(f, 4))
    assert url_param(page, "filter") == "data.customer.id=4"

    page.fill("#tail-filter", "ada")
    expect(page.locator("#tail-filter-note")).to_contain_text("Plain text")
    shows(lambda f: has_text(f, "ada"))

    page.fill("#tail-filter", "data.customer.id == ")
    expect(page.locator("#tail-filter-note")).to_contain_text("Filter refused: ")
    expect(page.locator("#tail-state")).to_have_attribute("data-state", "filter-error")
    expect(page.locator("#tail-filter")).to_have_attribute("aria-invalid", "true")
    expect(page.locator("#tail-rows tr")).to_have_count(0)
    page.fill("#tail-filter", 'type == "order.paid"')
    page.press("#tail-filter", "Enter")
    shows(lambda f: f["type"] == "order.paid")
    expect(page.locator("#tail-state")).to_have_attribute("data-state", "live")

    page.fill("#tail-filter", "")
    expect(page.locator("#tail-count")).to_have_text(f"{len(entries)} rows")
    assert ids_on_page(page) == list(entries)
    assert page.dialogs == []


def url_param(page, name: str) -> str | None:
    return page.evaluate("(n) => new URLSearchParams(location.search).get(n)", name)


def test_reload_and_shared_link_resume_the_same_view(page, asgi_server, viewer, r: redis.Redis) -> None:
    expect.set_options(timeout=15_000)
    key = b"url:state"
    first = [r.xadd(key, {"type": "order" if i % 3 else "refund", "n": str(i)}).decode() for i in range(70)]
    signed_in(page, asgi_server, viewer)
    page.goto("/c/default/streams/url%3Astate/tail/")
    state = page.locator("#tail-state")
    expect(state).to_have_attribute("data-state", "live")
    assert ids_on_page(page) == first[-50:]

    # Filter and pause: both go into the address, with the last ID read.
    refunds = [i for i in first[-50:] if first.index(i) % 3 == 0]
    page.fill("#tail-filter", "type=refund")
    page.press("#tail-filter", "Enter")
    expect(page.locator("#tail-count")).to_have_text(f"{len(refunds)} rows matching the filter")
    expect(state).to_have_attribute("data-state", "live")
    page.click("#tail-pause")
    expect(state).to_have_attribute("data-state", "paused")
    expect(page).to_have_url(re.compile(r"[?&]after=" + re.escape(quote(first[-1])) + "(&|$)"))
    assert url_param(page, "filter") == "type=refund" and url_param(page, "paused") == "1"
    while_paused = [r.xadd(key, {"type": "refund", "n": f"p{i}"}).decode() for i in range(5)]

    # Reload: the same filter, still paused, the same rows (nothing written meanwhile).
    page.reload()
    expect(state).to_have_attribute("data-state", "paused")
    expect(page.locator("#tail-pause")).to_have_text("Resume")
    expect(page.locator("#tail-filter")).to_have_value("type=refund")
    expect(page.locator("#tail-count")).to_have_text(f"{len(refunds)} rows matching the filter")
    assert ids_on_page(page) == refunds  # the filter's matches among the BACKLOG newest up to the position

    # Resume: what was written while paused, each once, after the last ID.
    page.click("#tail-pause")
    expect(page.locator("#tail-rows tr")).to_have_count(len(refunds) + len(while_paused))
    expect(state).to_have_attribute("data-state", "live")
    assert ids_on_page(page) == refunds + while_paused
    expect(page).to_have_url(re.compile(r"[?&]after=" + re.escape(quote(while_paused[-1])) + "(&|$)"))
    assert url_param(page, "paused") is None
    link = page.url

    # A shared link opened later: the context up to its position, then everything after it that the
    # filter keeps, once.
    later = [r.xadd(key, {"type": "order" if i % 2 else "refund", "n": f"l{i}"}).decode() for i in range(4)]
    page.goto(link)
    expect(state).to_have_attribute("data-state", "live")
    context = [i for i in (first + while_paused)[-50:] if i in refunds or i in while_paused]
    expect(page.locator("#tail-rows tr")).to_have_count(len(context) + 2)
    assert ids_on_page(page) == context + later[0::2]
    expect(page.locator("#tail-filter")).to_have_value("type=refund")
    assert page.dialogs == []
