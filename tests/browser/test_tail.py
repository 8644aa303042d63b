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

    # The field/value filter hides the other rows.
    page.fill("#tail-filter", "html=onerror")
    expect(page.locator("#tail-rows tr:visible")).to_have_count(1)
    page.fill("#tail-filter", "type=order")
    expect(page.locator("#tail-rows tr:visible")).to_have_count(len(while_paused) + len(while_down))
    page.fill("#tail-filter", "")
    expect(page.locator("#tail-rows tr:visible")).to_have_count(len(ids_on_page(page)))
    assert page.dialogs == []


# ------------------------------------------------------------------------ rate, counter, nested filter, address

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


def json_at(value: object, path: list[str], want: str) -> bool:
    """Plain Python reading of the page's documented path syntax (see the help text of tail.html)."""
    if not path:
        text = value if isinstance(value, str) else json.dumps(value, separators=(",", ":"))
        return want in text.lower()
    head, rest = path[0], path[1:]
    if isinstance(value, list):
        if head.isdigit():
            return int(head) < len(value) and json_at(value[int(head)], rest, want)
        return any(json_at(item, path, want) for item in value)
    if isinstance(value, dict):
        return any(json_at(v, rest, want) for k, v in value.items() if k.lower() == head)
    return False


def expected_matches(entries: dict[str, dict[str, str]], path: list[str], want: str) -> list[str]:
    """IDs of the entries a nested filter ``path=want`` keeps (path of two segments or more)."""
    kept = []
    for entry_id, fields in entries.items():
        decoded = {}
        for name, raw in fields.items():
            try:
                decoded[name] = json.loads(raw) if raw.lstrip()[:1] in ("{", "[") else None
            except ValueError:
                decoded[name] = None
        if any(
            isinstance(v, dict | list)
            and (json_at(v, path, want) or (name.lower() == path[0] and json_at(v, path[1:], want)))
            for name, v in decoded.items()
        ):
            kept.append(entry_id)
    return kept


NESTED = [
    {"type": "a", "data": json.dumps({"customer": {"name": "ada"}})},
    {"type": "b", "data": json.dumps({"customer": {"name": "Ada Lovelace"}})},
    {"type": "c", "data": json.dumps({"customer": {"name": "bob"}})},
    {"type": "d", "data": json.dumps({"customer": {"nick": "ada"}})},
    {"type": "e", "data": json.dumps({"name": "ada"})},
    {"type": "f", "data": json.dumps({"customer": [{"name": "zed"}, {"name": "ada"}]})},
    {"type": "g", "customer": json.dumps({"name": "ada"})},  # the path starts at the field it names
    {"type": "h", "note": "customer.name=ada"},  # text, not JSON
    {"type": "i", "data": json.dumps({"order": {"customer": {"name": "ada"}}})},  # deeper than the path
    {"type": "j", "data": json.dumps({"items": [{"sku": "a1"}, {"sku": "b2"}]}), "extra": "[1, 2"},
    {"type": "k", "data": json.dumps({"items": [{"sku": "b2"}]})},
    {"type": "l", "data": json.dumps({"customer": {"name": None}})},
]


def test_nested_filter_and_the_row_counter(page, asgi_server, viewer, r: redis.Redis) -> None:
    expect.set_options(timeout=15_000)
    key = b"nested"
    entries = {r.xadd(key, fields).decode(): fields for fields in NESTED}
    signed_in(page, asgi_server, viewer)
    page.goto("/c/default/streams/nested/tail/")
    expect(page.locator("#tail-state")).to_have_attribute("data-state", "live")
    expect(page.locator("#tail-count")).to_have_text(f"{len(entries)} rows")
    # the last ID has its human time beside it, computed here from the ID's millisecond part
    newest = max(entries, key=lambda i: tuple(map(int, i.split("-"))))
    expect(page.locator("#tail-last")).to_have_text(newest)
    when = datetime.fromtimestamp(int(newest.split("-")[0]) / 1000, tz=UTC)
    expect(page.locator("#tail-last-time")).to_have_text(when.strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC")

    def visible_ids() -> list[str]:
        return page.locator("#tail-rows tr:visible td:first-child a").all_inner_texts()[::-1]

    for text, path in [
        ("customer.name=ada", ["customer", "name"]),
        ("items[1].sku=B2", ["items", "1", "sku"]),
        ("items.sku=b2", ["items", "sku"]),
        ("data.customer.name=ada", ["data", "customer", "name"]),
        ("customer.name=null", ["customer", "name"]),
    ]:
        want = expected_matches(entries, path, text.split("=", 1)[1].lower())
        assert 0 < len(want) < len(entries), (text, want)  # each case keeps some and hides some
        page.fill("#tail-filter", text)
        expect(page.locator("#tail-count")).to_have_text(f"{len(want)} shown of {len(entries)} rows")
        assert visible_ids() == want, text

    # The filter on live entries, and the counter follows.
    page.fill("#tail-filter", "customer.name=ada")
    want = expected_matches(entries, ["customer", "name"], "ada")
    more = {
        r.xadd(key, fields).decode(): fields
        for fields in (
            {"data": json.dumps({"customer": {"name": "ADA"}})},
            {"data": json.dumps({"customer": {"name": "eve"}})},
        )
    }
    entries.update(more)
    want = expected_matches(entries, ["customer", "name"], "ada")
    expect(page.locator("#tail-count")).to_have_text(f"{len(want)} shown of {len(entries)} rows")
    assert visible_ids() == want
    # Top-level field=value keeps working (type=b), and "a" of "type" is a name part as before.
    page.fill("#tail-filter", "type=b")
    expect(page.locator("#tail-count")).to_have_text(f"1 shown of {len(entries)} rows")
    page.fill("#tail-filter", "")
    expect(page.locator("#tail-count")).to_have_text(f"{len(entries)} rows")
    expect(page.locator("#tail-rows tr:visible")).to_have_count(len(entries))


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

    # Filter and pause: both go into the address, with the last ID shown.
    page.fill("#tail-filter", "type=refund")
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
    expect(page.locator("#tail-rows tr")).to_have_count(50)
    assert ids_on_page(page) == first[-50:]  # the BACKLOG newest up to the position
    refunds = [i for i in first[-50:] if first.index(i) % 3 == 0]
    expect(page.locator("#tail-count")).to_have_text(f"{len(refunds)} shown of 50 rows")
    assert page.locator("#tail-rows tr:visible td:first-child a").all_inner_texts()[::-1] == refunds

    # Resume: what was written while paused, each once, after the last ID.
    page.click("#tail-pause")
    expect(page.locator("#tail-rows tr")).to_have_count(50 + len(while_paused))
    expect(state).to_have_attribute("data-state", "live")
    assert ids_on_page(page) == first[-50:] + while_paused
    expect(page).to_have_url(re.compile(r"[?&]after=" + re.escape(quote(while_paused[-1])) + "(&|$)"))
    assert url_param(page, "paused") is None
    link = page.url

    # A shared link opened later: the context up to its position, then everything after it, once.
    later = [r.xadd(key, {"type": "order", "n": f"l{i}"}).decode() for i in range(4)]
    page.goto(link)
    expect(state).to_have_attribute("data-state", "live")
    expect(page.locator("#tail-rows tr")).to_have_count(50 + len(later))
    assert ids_on_page(page) == (first + while_paused)[-50:] + later
    expect(page.locator("#tail-filter")).to_have_value("type=refund")
    assert page.dialogs == []
