"""Search on the stream and DLQ pages: the box, the chain of steps htmx follows, the status line, the
Continue link, escaping. The steps are requested here as htmx requests them (``HX-Request``); the
browser test (``tests/browser/test_search.py``) checks the same in Chromium."""

from __future__ import annotations

import re
from html import unescape

import pytest
import redis
from django.test import Client

from streams_app import search
from streams_app.views import search as search_views
from tests.console.helpers import dlq_url, stream_url
from tests.console.interop.helpers import XSS, assert_escaped

HX = {"HTTP_HX_REQUEST": "true"}


def _first_step_url(page: str) -> str:
    [url] = re.findall(r'class="search-more" hx-get="([^"]+)"', page)
    return unescape(url)


def _run(client: Client, page_html: str) -> tuple[list[str], str]:
    """Follow the chain of steps as htmx would; the ids found and the last status line."""
    url, found, status = _first_step_url(page_html), [], ""
    for _ in range(1000):
        response = client.get(url, **HX)
        assert response.status_code == 200
        body = response.content.decode()
        found += re.findall(r'<div class="search-hit">\s*<a class="mono" href="[^"]+">([0-9-]+)</a>', body)
        status = re.search(r'<p id="search-status".*?</p>', body, re.S).group()
        more = re.findall(r'class="search-more" hx-get="([^"]+)"', body)
        if not more:
            return found, status
        url = unescape(more[0])
    raise AssertionError("the chain did not end")


def _words(html: str) -> str:
    return " ".join(re.sub(r"<[^>]+>", "", html).split()).replace("&amp;", "&")


def test_stream_page_search_streams_steps_and_reports(
    r: redis.Redis, viewer_client: Client, monkeypatch
) -> None:
    for i in range(50):
        r.xadd("orders", {"type": "order.paid" if i % 3 == 0 else "order.created", "data": f'{{"n": {i}}}'})
    ids = [i.decode() for i, _ in r.xrange("orders")]
    expected = [i.decode() for i, f in r.xrange("orders") if f[b"type"] == b"order.paid"]
    monkeypatch.setattr(search_views, "STEP_ENTRIES", 8)  # several steps, as on a big stream

    page = viewer_client.get(stream_url("orders"), {"q": 'type == "order.paid"'}).content.decode()
    assert 'name="q" value="type == &quot;order.paid&quot;"' in page
    found, status = _run(viewer_client, page)
    assert found == expected
    assert (
        _words(status).startswith(f"Scanned 50 of 50 entries, from ID {ids[0]} (")
        and f"to ID {ids[-1]} (" in _words(status)
        and f"{len(expected)} matches." in _words(status)
    )
    assert "The whole range was searched." in status and "Continue" not in status


def test_run_budget_offers_continue_which_resumes_without_gap(
    r: redis.Redis, viewer_client: Client, monkeypatch
) -> None:
    for i in range(30):
        r.xadd("orders", {"n": str(i)})
    ids = [i.decode() for i, _ in r.xrange("orders")]
    monkeypatch.setattr(search_views, "STEP_ENTRIES", 4)
    monkeypatch.setattr(search, "BUDGET_ENTRIES", 12)

    page = viewer_client.get(stream_url("orders"), {"q": "n", "direction": "desc"}).content.decode()
    found, status = _run(viewer_client, page)
    assert found == list(reversed(ids))[:12]
    assert "Scanned 12 of 30 entries" in _words(status)
    [cont] = re.findall(r'href="([^"]+)" rel="next" data-search-continue', status)
    assert unescape(cont).startswith(stream_url("orders") + "?") and unescape(cont).endswith("#search")
    page = viewer_client.get(unescape(cont)).content.decode()
    more, status = _run(viewer_client, page)
    assert more == list(reversed(ids))[12:24]
    assert f"from ID {ids[-13]}" in _words(status)


def test_results_are_escaped_and_a_bad_expression_says_why(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd("orders", {"data": f'{{"name": "{XSS}"}}'})
    page = viewer_client.get(stream_url("orders"), {"q": "onerror"}).content.decode()
    step = viewer_client.get(_first_step_url(page), **HX).content.decode()
    assert_escaped(step, XSS)
    assert "1 match (plain text)." in _words(step)
    page = viewer_client.get(stream_url("orders"), {"q": "data.name == "}).content.decode()
    refused = viewer_client.get(_first_step_url(page), **HX)
    assert refused.status_code == 200 and "Search refused: This is not a valid expression" in _words(
        refused.content.decode()
    )
    page = viewer_client.get(stream_url("orders"), {"q": "x", "from": "9-0", "to": "1-0"}).content.decode()
    refused = viewer_client.get(_first_step_url(page), **HX)
    assert refused.status_code == 200 and "'from' is after 'to'" in unescape(refused.content.decode())


def test_dlq_page_search_sees_the_parsed_fields(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd("jobs:dlq", {"task": "resize", "_retries": "4"})
    dead = r.xadd(
        "jobs:dlq",
        {"task": "mail", "dlq_original_stream": "jobs", "dlq_error": "SMTPError: 550", "dlq_retries": "3"},
    ).decode()
    page = viewer_client.get(dlq_url("jobs:dlq"), {"q": 'error.startsWith("SMTP")'}).content.decode()
    assert "How search works" in page
    found, status = _run(viewer_client, page)
    assert found == [dead] and "Scanned 2 of 2 entries" in _words(status)


@pytest.mark.parametrize("path", ["search/"])
def test_a_step_without_htmx_is_a_whole_page(r: redis.Redis, viewer_client: Client, path: str) -> None:
    hit = r.xadd("orders", {"type": "order.paid"}).decode()
    response = viewer_client.get(stream_url("orders", path), {"q": "PAID"})
    body = response.content.decode()
    assert (
        response.status_code == 200
        and "<html" in body
        and hit in body
        and "1 match (plain text)." in _words(body)
    )


def test_search_needs_a_login_and_is_read_only(r: redis.Redis, client: Client, viewer_client: Client) -> None:
    r.xadd("orders", {"type": "order.paid"})
    for url in (stream_url("orders", "search/"), dlq_url("orders") + "search/"):
        assert client.get(url, {"q": "paid"}).status_code == 302  # to the login page
        assert viewer_client.get(url, {"q": "paid"}).status_code == 200
        assert viewer_client.post(url, {"q": "paid"}).status_code == 405
    api = "/api/v1/c/default/streams/orders/search/"
    assert client.get(api, {"q": "paid"}).status_code == 401
    assert viewer_client.post(api, {"q": "paid"}).status_code == 405
