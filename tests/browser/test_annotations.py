"""Annotations in headless Chromium: they appear on the charts.

An annotation posted through the JSON API (a deploy script's bearer token, over real HTTP) shows on the
group page's charts and on the incident timeline, with its words in a tooltip on hover and on keyboard
focus, as text (its ``<img onerror>`` never runs). The timeline's zoom and pan change the address, and
its permalink reopens the same window in a fresh page.
"""

from __future__ import annotations

from datetime import timedelta
from urllib.parse import parse_qs, urlsplit

import httpx
import pytest
import redis
from django.utils import timezone
from playwright.sync_api import expect

from streams_app.metrics import snapshots
from streams_app.redis_ops import client as redis_client
from tests.conftest import session_cookie

pytestmark = pytest.mark.browser

TEXT = 'deploy v1.4 <img src=x onerror="alert(1)">'


def test_an_annotation_from_the_api_shows_on_the_charts_and_the_timeline(
    page, asgi_server, viewer, operator, api_token, r: redis.Redis
) -> None:
    redis_client.reset()
    r.xgroup_create("orders", "billing", id="$", mkstream=True)
    start = snapshots.snapshot_tick_for(now=timezone.now() - timedelta(minutes=5), interval_s=10)
    for i in range(6):
        r.xadd("orders", {"type": "order.created", "n": str(i)})
        snapshots.snapshot_take(tick=start + timedelta(seconds=30 * i))
    posted = httpx.post(
        f"{asgi_server.url}/api/v1/annotations",
        json={"text": TEXT, "tags": ["deploy"], "connection": "default", "stream": "orders",
              "time": (start + timedelta(seconds=75)).isoformat()},
        headers={"Authorization": f"Bearer {api_token(operator)}"},
        timeout=30,
    )
    assert posted.status_code == 201, posted.text
    ident = posted.json()["id"]
    page.context.add_cookies(
        [{"name": n, "value": v, "url": asgi_server.url} for n, v in session_cookie(viewer).items()]
    )
    tip = page.locator("#annotation-tip")

    # the group page: the marker on the lag chart, its words on hover and on focus
    page.goto("/c/default/streams/orders/groups/billing/")
    marker = page.locator(f'figure[data-chart="lag-entries-not-yet-delivered"] g[data-annotation="{ident}"]')
    expect(marker).to_have_count(1)
    box = marker.bounding_box()
    assert box is not None and box["height"] > 50  # a line across the plot, not a dot
    marker.hover()
    expect(tip).to_be_visible()
    expect(tip).to_contain_text(TEXT)
    expect(tip).to_contain_text("[deploy]")
    assert marker.get_attribute("aria-describedby") == "annotation-tip"
    page.mouse.move(0, 0)
    expect(tip).to_be_hidden()
    other = page.locator(f'figure[data-chart="pending-delivered-not-acked"] g[data-annotation="{ident}"]')
    other.focus()  # a keyboard user reaches it too
    expect(tip).to_be_visible()
    expect(tip).to_contain_text(TEXT)
    page.keyboard.press("Escape")
    expect(tip).to_be_hidden()
    expect(page.locator(".annotation-list li")).to_contain_text(TEXT)

    # the incident timeline: in the annotations row and on its charts
    page.goto("/c/default/streams/orders/timeline/")
    lane_mark = page.locator(f'.lane-annotations g[data-annotation="{ident}"]')
    expect(lane_mark).to_have_count(1)
    lane_mark.hover()
    expect(tip).to_be_visible()
    expect(tip).to_contain_text(TEXT)
    expect(page.locator(f'figure[data-chart="pending-billing"] g[data-annotation="{ident}"]')).to_have_count(1)
    expect(page.locator('tr[data-event-kind="annotation"] .event-text')).to_have_text(f"{TEXT} [deploy]")

    # zoom in and pan through the address; the permalink reopens the very window
    timeline = page.locator("#timeline")
    page.locator('a[data-nav="zoom-in"]').click()
    page.wait_for_url("**/timeline/?from=*")
    zoomed = {k: v[0] for k, v in parse_qs(urlsplit(page.url).query).items()}
    assert set(zoomed) == {"from", "to"}
    expect(timeline).to_have_attribute("data-window-live", "false")
    expect(timeline).to_have_attribute("data-window-start", zoomed["from"].replace("Z", "+00:00"))
    page.locator('a[data-nav="earlier"]').click()
    page.wait_for_url(lambda url: "from=" in url and parse_qs(urlsplit(url).query)["from"][0] < zoomed["from"])
    shown_start = timeline.get_attribute("data-window-start")
    shown_end = timeline.get_attribute("data-window-end")
    permalink = page.locator('a[data-nav="permalink"]').get_attribute("href")
    fresh = page.context.new_page()
    fresh.goto(permalink)
    expect(fresh.locator("#timeline")).to_have_attribute("data-window-start", shown_start)
    expect(fresh.locator("#timeline")).to_have_attribute("data-window-end", shown_end)
    fresh.close()
    assert page.dialogs == []
