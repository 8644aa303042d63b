"""Charts in headless Chromium: the group page draws lag from real snapshots, the window switch swaps
the panel in place, and a snapshot announced over the channel layer refreshes it live.
"""

from __future__ import annotations

import re
import threading
from datetime import timedelta

import pytest
import redis
from django.utils import timezone
from playwright.sync_api import expect

from streams_app.live import broadcast
from streams_app.metrics import snapshots
from streams_app.redis_ops import client as redis_client
from tests.conftest import session_cookie

pytestmark = pytest.mark.browser


def line_points(d: str) -> int:
    return len(re.findall(r"[ML]-?[\d.]+,-?[\d.]+", d))


def test_group_page_chart_renders_with_data_and_updates_live(page, asgi_server, viewer, r: redis.Redis) -> None:
    redis_client.reset()
    expect.set_options(timeout=15_000)
    r.xgroup_create("orders", "billing", id="$", mkstream=True)
    start = snapshots.snapshot_tick_for(now=timezone.now() - timedelta(minutes=5), interval_s=10)
    for i in range(6):
        for _ in range(i + 1):
            r.xadd("orders", {"type": "order.created", "n": str(i)})
        snapshots.snapshot_take(tick=start + timedelta(seconds=10 * i))
    page.context.add_cookies(
        [{"name": n, "value": v, "url": asgi_server.url} for n, v in session_cookie(viewer).items()]
    )

    page.goto("/c/default/streams/orders/groups/billing/")
    lag = page.locator('figure[data-chart="lag-entries-not-yet-delivered"]')
    expect(lag.locator("svg.chart-svg")).to_have_attribute("data-points", "6")
    d = lag.locator("path.chart-line").get_attribute("d")
    assert line_points(d) == 6 and d.startswith("M")
    expect(lag.locator(".chart-last")).to_have_text("21")  # 1 + 2 + ... + 6 entries, none delivered
    box = lag.locator("svg.chart-svg").bounding_box()
    assert box is not None and box["width"] > 250 and box["height"] > 50  # drawn at a readable size

    # The window switch swaps the panel in place (htmx), without leaving the page, and writes the
    # window into the address so a reload or a saved view keeps it.
    page.locator(".chart-panel .window-switch a", has_text="24h").click()
    expect(page.locator(".chart-panel .window-switch a.active")).to_have_text("24h")
    assert page.url.endswith("/groups/billing/?window=24h")
    expect(lag.locator("svg.chart-svg")).to_have_attribute("data-points", "6")

    # A new snapshot, announced over the channel layer, refreshes the open page (websocket, no reload).
    expect(page.locator("body")).to_have_attribute("data-metrics-socket", "open")
    for _ in range(7):
        r.xadd("orders", {"type": "order.created"})
    tick = start + timedelta(seconds=60)
    # Playwright's event loop owns this thread; the snapshot and its broadcast run in another, as in a worker.
    worker = threading.Thread(target=lambda: (snapshots.snapshot_take(tick=tick), broadcast.snapshot_broadcast(tick)))
    worker.start()
    worker.join(30)
    expect(page.locator("body")).to_have_attribute("data-metrics-tick", tick.isoformat())
    expect(lag.locator("svg.chart-svg")).to_have_attribute("data-points", "7")
    expect(lag.locator(".chart-last")).to_have_text("28")
    expect(page.locator(".chart-panel .window-switch a.active")).to_have_text("24h")  # the window is kept
    assert page.dialogs == []
