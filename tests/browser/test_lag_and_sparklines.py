"""In Chromium: an unknown lag explains itself on hover, and the overview's sparklines are drawn at a
readable size at 390 px and 1600 px.

Sizes are the rendered boxes Chromium reports. A sparkline is 32 CSS px tall and fills its cell; the
thresholds (drawing at least 20 px tall and 60 px wide) sit well under that and well above the slivers
it replaces: a drawing scaled down with its aspect ratio into a narrow cell (about 14 px tall), and a
few minutes of samples placed at the right end of a 24 h width (1/144 of it, a pixel or two wide).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
from django.utils import timezone
from playwright.sync_api import expect

from streams_app.metrics import snapshots
from streams_app.redis_ops import client as redis_client
from tests.conftest import session_cookie

pytestmark = pytest.mark.browser


def unknown_lag_stream(r: redis.Redis) -> None:
    ids = [r.xadd("orders", {"n": str(i)}) for i in range(10)]
    r.xgroup_create("orders", "billing", id="0")
    r.execute_command("XGROUP", "SETID", "orders", "billing", ids[4])  # no ENTRIESREAD
    assert r.xinfo_groups("orders")[0]["lag"] is None  # Redis itself cannot tell


def some_traffic(r: redis.Redis) -> None:
    start = snapshots.snapshot_tick_for(now=timezone.now() - timedelta(seconds=125), interval_s=10)
    for i in range(12):
        for key, n in (("orders", 1 + i % 4), ("payments", 2), ("eventbus:metrics", 30)):
            for _ in range(n):
                r.xadd(key, {"n": str(i)})
        snapshots.snapshot_take(tick=start + timedelta(seconds=10 * i))


def test_unknown_lag_explains_itself_and_sparklines_are_readable(
    page, asgi_server, viewer, r: redis.Redis
) -> None:
    redis_client.reset()
    expect.set_options(timeout=15_000)
    unknown_lag_stream(r)
    some_traffic(r)
    page.context.add_cookies(
        [{"name": n, "value": v, "url": asgi_server.url} for n, v in session_cookie(viewer).items()]
    )

    for url in ("/c/default/streams/?live=1", "/c/default/streams/?sort=lag", "/c/default/streams/orders/"):
        page.goto(url)
        marker = page.locator(".lag-cell .unknown-figure").first
        expect(marker).to_have_text("unknown")
        title = marker.get_attribute("title")
        assert "SETID" in title and "ENTRIESREAD" in title and "reads past the last entry" in title
        marker.hover()  # a visible, hoverable marker (not a hidden cell)
        assert marker.bounding_box()["width"] > 10

    for width in (390, 1600):
        page.set_viewport_size({"width": width, "height": 900})
        for window in ("1h", "24h"):
            page.goto(f"/?window={window}")
            rows = page.locator(".busiest tr")
            expect(rows).to_have_count(2)  # orders and payments; the bus's metrics stream is left out
            for i in range(2):
                area = rows.nth(i).locator("path.chart-area").bounding_box()
                svg = rows.nth(i).locator("svg.spark-svg").bounding_box()
                assert svg["height"] >= 28 and svg["width"] >= 72, (width, window, svg)
                assert area["height"] >= 20 and area["width"] >= 60, (width, window, area)
            page.screenshot(path=f"/tmp/overview-{width}-{window}.png", full_page=True)
    page.locator("[data-internal-toggle]").first.click()
    expect(page.locator(".busiest tr")).to_have_count(3)
    expect(page.locator(".busiest .pill.internal")).to_have_text("internal")
    assert page.dialogs == []
