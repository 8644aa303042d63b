"""A search never says "Scanned 2551 of 2550 entries" (docs/api.md#looked-at-n-of-m).

The figure after "of" was XLEN read before the scan, which then read up to the stream's end as it
stood at each page: an entry added meanwhile was scanned but not counted. And a run of several steps
read XLEN again at each step while summing what every step scanned, so a stream trimmed as it grows
(MAXLEN) could show more scanned than it ever held. Now the run's first step reads the length and the
newest entry's ID in one MULTI, no step scans past that entry, and the status line says what the
figure is.

The stream is written by a second, real client at a chosen moment: inside the scan (the mask, which
the scan calls on every entry it reads) or between two steps of a run.
"""

from __future__ import annotations

import re
from html import unescape

import redis
from django.test import Client

from streams_app.redis_ops.types import Entry
from streams_app.search import compile_query, search_page
from streams_app.views import search as search_views
from tests.console.helpers import CONN, stream_url

HX = {"HTTP_HX_REQUEST": "true"}


def _fill(r: redis.Redis, n: int) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(n):
        pipe.xadd("orders", {"type": "order.paid", "n": str(i)})
    pipe.execute()


def test_an_entry_added_during_the_scan_is_not_counted_past_the_total(r: redis.Redis) -> None:
    _fill(r, 2550)

    def producer_writes_once(entry: Entry) -> Entry:
        if r.xlen("orders") == 2550:
            r.xadd("orders", {"type": "order.paid", "n": "late"})
        return entry

    page = search_page(CONN, b"orders", compile_query("nowhere"), mask=producer_writes_once)
    assert r.xlen("orders") == 2551  # it did arrive, mid-scan
    assert (page.scanned, page.total) == (2550, 2550)
    assert page.complete and page.last_id == r.xrange("orders")[2549][0].decode()
    assert page.until == page.last_id


def _status(html: str) -> str:
    found = re.search(r'<p id="search-status".*?</p>', html, re.S)
    assert found, html[:500]
    return " ".join(re.sub(r"<[^>]+>", "", found.group()).split())


def test_a_run_counts_against_the_stream_as_it_was_when_the_run_began(
    r: redis.Redis, viewer_client: Client, monkeypatch
) -> None:
    """A capped stream (XADD MAXLEN) keeps 2,550 entries while a producer writes between two steps
    of a run: the run still scans the 2,550 it began with, and says so."""
    _fill(r, 2550)
    monkeypatch.setattr(search_views, "STEP_ENTRIES", 1000)
    first = viewer_client.get(stream_url("orders") + "search/", {"q": "nowhere"}, **HX).content.decode()
    [more] = re.findall(r'class="search-more" hx-get="([^"]+)"', first)
    for i in range(600):
        r.xadd("orders", {"type": "order.paid", "n": f"new {i}"}, maxlen=2550, approximate=False)
    assert r.xlen("orders") == 2550
    url, status = unescape(more), ""
    for _ in range(10):
        body = viewer_client.get(url, **HX).content.decode()
        status = _status(body)
        nexts = re.findall(r'class="search-more" hx-get="([^"]+)"', body)
        if not nexts:
            break
        url = unescape(nexts[0])
    assert status.startswith("Scanned 2550 of 2550 entries"), status
    assert "2550: the stream's length when this search began; entries added since are not searched." in status
