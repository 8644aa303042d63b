"""Addresses in headless Chromium: the DLQ page's JSON button, pages of keys holding
'/' or non-UTF-8 bytes refreshing themselves, the favicon, and the console's own 404 under DEBUG.

Each refresh is the one htmx makes (the section's ``stream-refresh`` event, as console.js sends it), and
what it must show is read from Redis in the test.
"""

from __future__ import annotations

from urllib.parse import quote

import pytest
import redis
from playwright.sync_api import expect

from tests.browser.conftest import login_through_form

pytestmark = pytest.mark.browser

#: A DLQ of our convention whose key holds a '/', a space and bytes that are not UTF-8.
DLQ = b"team/a \xff\xfe:orders:dlq"
STREAM = b"team/a \xff\xfe:orders"


def dead_letter(r: redis.Redis, n: int) -> str:
    return r.xadd(
        DLQ,
        {"type": "order.created", "data": f'{{"n": {n}}}', "dlq_original_stream": STREAM,
         "dlq_error": f"ValueError: order {n} declined", "dlq_retries": "3"},
    ).decode()


def test_the_dlq_json_button_answers_the_dlq_s_own_json(page, asgi_server, operator, r: redis.Redis) -> None:
    ids = [dead_letter(r, n) for n in range(3)]
    login_through_form(page, operator, asgi_server)
    page.goto(f"/c/default/dlq/{quote(DLQ, safe='')}/")
    with page.expect_response(lambda resp: "/api/v1/" in resp.url) as answer:
        page.get_by_role("link", name="JSON", exact=True).click()
    response = answer.value
    assert response.status == 200, response.text()
    body = response.json()
    # the DLQ's own entries, newest first, as Redis holds them; the key in the API's text form
    assert [e["id"] for e in body["entries"]] == [i.decode() for i, _ in r.xrevrange(DLQ)] == ids[::-1]
    assert body["key"] == r"team/a \xff\xfe:orders:dlq"


@pytest.mark.parametrize("kind", ["stream", "dlq"])
def test_a_page_of_a_key_with_a_slash_and_binary_bytes_refreshes_itself(
    page, asgi_server, operator, r: redis.Redis, kind: str
) -> None:
    r.xadd(STREAM, {"type": "order.created", "n": "0"})
    dead_letter(r, 0)
    key = STREAM if kind == "stream" else DLQ
    path = f"/c/default/{'streams' if kind == 'stream' else 'dlq'}/{quote(key, safe='')}/"
    login_through_form(page, operator, asgi_server)
    page.goto(path)
    expect(page.locator("#entries")).to_be_visible()

    new_id = r.xadd(STREAM, {"type": "order.created", "n": "1"}).decode() if kind == "stream" else dead_letter(r, 1)
    with page.expect_response(lambda resp: resp.request.headers.get("hx-request") == "true") as answer:
        page.locator("#entries").dispatch_event("stream-refresh")
    assert answer.value.status == 200, answer.value.url
    # the refresh asked for this very key (its bytes, '/' and \xff\xfe included), not a decoded copy
    assert quote(key, safe="") in answer.value.url
    expect(page.locator("#entries")).to_contain_text(new_id)


def test_every_page_names_a_favicon_the_server_gives(page, asgi_server, viewer) -> None:
    login_through_form(page, viewer, asgi_server)
    href = page.locator("link[rel=icon]").get_attribute("href")
    response = page.request.get(href)
    assert response.status == 200
    assert response.headers["content-type"].startswith("image/svg+xml")
    assert b"<svg" in response.body()


def test_an_unknown_address_is_the_console_s_404_under_debug(page, asgi_server, viewer, settings) -> None:
    settings.DEBUG = True  # as under `make run`; the server runs in this process
    login_through_form(page, viewer, asgi_server)
    response = page.goto("/no/such/page/")
    assert response.status == 404
    expect(page.locator("body")).to_contain_text("There is nothing at this address.")
    assert "URLconf" not in page.content()
    expect(page.locator("nav a", has_text="Audit")).to_have_count(1)  # the console's own frame, nav and all
