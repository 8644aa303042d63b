"""The chart panels on the overview, stream, group and DLQ pages, fed by real snapshots of a real Redis,
and the chart endpoint answering htmx with the panel and a plain GET with a page.

Expected points and values come from the entries the test added between snapshots (lag after tick i is
1 + 3 * (i + 1)) and from the rollup rows it wrote.
"""

from __future__ import annotations

import re
from datetime import datetime, timedelta

import redis
from django.test import Client
from django.utils import timezone

from streams_app.metrics import snapshots
from streams_app.metrics.models import StreamMirror, StreamSample
from tests.console.metrics.helpers import path_points


def snapshot_series(r: redis.Redis, *, ticks: int, step_s: int = 10) -> list[datetime]:
    """``orders`` with group ``billing`` gaining 3 entries between snapshots; returns the ticks used."""
    now = timezone.now().replace(microsecond=0)
    first = now - timedelta(seconds=step_s * ticks)
    used = []
    r.xadd("orders", {"n": "0"})
    r.xgroup_create("orders", "billing", id="0")
    for i in range(ticks):
        for _ in range(3):
            r.xadd("orders", {"n": str(i)})
        tick = first + timedelta(seconds=step_s * i)
        snapshots.snapshot_take(tick=tick)
        used.append(tick)
    return used


def test_group_page_charts_lag_from_the_snapshots(r: redis.Redis, viewer_client: Client) -> None:
    ticks = snapshot_series(r, ticks=5)
    html = viewer_client.get("/c/default/streams/orders/groups/billing/").content.decode()
    assert "No data yet" not in html
    figure = re.search(r'<figure class="chart tone-warn" data-chart="lag-entries-not-yet-delivered">(.*?)</figure>', html, re.S)
    assert figure is not None
    # Lag after tick i is 1 + 3 * (i + 1): every entry so far, none delivered. One point per tick.
    assert 'data-points="5"' in figure.group(1)
    assert f">{1 + 3 * len(ticks)}</span>" in figure.group(1)  # the latest value, in the caption
    d = re.search(r'class="chart-line" d="([^"]+)"', figure.group(1)).group(1)
    assert [len(s) for s in path_points(d)] == [5]
    ys = [y for _, y in path_points(d)[0]]
    assert ys == sorted(ys, reverse=True)  # lag grows: the line climbs (y decreases)


def test_stream_page_without_a_mirror_row_says_snapshots_start_soon(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd("fresh", {"a": "1"})
    html = viewer_client.get("/c/default/streams/fresh/").content.decode()
    assert "No data yet: snapshots start within a minute." in html


def test_chart_endpoint_answers_htmx_with_the_panel_and_a_plain_get_with_a_page(r: redis.Redis, viewer_client: Client) -> None:
    snapshot_series(r, ticks=3)
    partial = viewer_client.get("/c/default/streams/orders/charts/?window=24h", HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<section class="chart-panel"') and "<html" not in partial
    assert 'hx-get="/c/default/streams/orders/charts/?window=24h"' in partial
    assert re.search(r'<a href="\?window=24h"[^>]* class="active" aria-current="true"', partial)
    assert 'data-chart="entries-added-per-second"' in partial and 'data-chart="length"' in partial
    page = viewer_client.get("/c/default/streams/orders/charts/").content.decode()
    assert "<html" in page and 'href="?window=7d"' in page


def test_a_bogus_window_falls_back_to_one_hour(r: redis.Redis, viewer_client: Client) -> None:
    snapshot_series(r, ticks=2)
    html = viewer_client.get("/c/default/streams/orders/groups/billing/charts/?window=<x>", HTTP_HX_REQUEST="true").content.decode()
    assert 'hx-get="/c/default/streams/orders/groups/billing/charts/?window=1h"' in html


def test_seven_days_read_the_minute_rollups(r: redis.Redis, viewer_client: Client) -> None:
    """Raw samples are kept 48 h, so a 7-day chart reads the 1-minute rollups (kept 14 days)."""
    r.xadd("orders", {"n": "0"})
    snapshots.snapshot_take(tick=timezone.now().replace(microsecond=0) - timedelta(seconds=30))
    stream = StreamMirror.objects.get(key_hash=StreamMirror.objects.get().key_hash)
    minute = timezone.now().replace(second=0, microsecond=0)
    StreamSample.objects.bulk_create(
        [StreamSample(stream=stream, at=minute - timedelta(days=h), resolution="1m", length=100 + h, rate_per_s=1.5) for h in range(1, 6)]
    )
    week = viewer_client.get("/c/default/streams/orders/charts/?window=7d", HTTP_HX_REQUEST="true").content.decode()
    length = re.search(r'data-chart="length">(.*?)</figure>', week, re.S).group(1)
    assert 'data-points="5"' in length and "max 105" in length  # the five rollup rows, not the raw one
    hour_view = viewer_client.get("/c/default/streams/orders/charts/?window=1h", HTTP_HX_REQUEST="true").content.decode()
    assert 'data-points="1"' in re.search(r'data-chart="length">(.*?)</figure>', hour_view, re.S).group(1)


def test_dlq_page_charts_depth(r: redis.Redis, viewer_client: Client) -> None:
    now = timezone.now().replace(microsecond=0)
    for i, depth in enumerate((2, 5, 9)):
        while r.xlen("orders:dlq") < depth:
            r.xadd("orders:dlq", {"type": "x", "dlq_error": "boom", "dlq_original_stream": "orders"})
        snapshots.snapshot_take(tick=now - timedelta(seconds=30 - 10 * i))
    html = viewer_client.get("/c/default/dlq/orders%3Adlq/").content.decode()
    figure = re.search(r'data-chart="dead-letters-waiting">(.*?)</figure>', html, re.S).group(1)
    assert 'data-points="3"' in figure and "max 9 · min 2" in figure


def test_overview_lists_busiest_streams_dlqs_and_open_alerts(r: redis.Redis, viewer_client: Client) -> None:
    assert "No data yet: snapshots start within a minute." in viewer_client.get("/").content.decode()
    now = timezone.now().replace(microsecond=0)
    r.xadd("quiet", {"a": "1"})
    r.xadd("<b>busy</b>", {"a": "1"})
    r.xadd("orders:dlq", {"dlq_error": "x"})
    snapshots.snapshot_take(tick=now - timedelta(seconds=20))
    for _ in range(50):
        r.xadd("<b>busy</b>", {"a": "1"})
    r.xadd("quiet", {"a": "2"})
    snapshots.snapshot_take(tick=now - timedelta(seconds=10))
    html = viewer_client.get("/").content.decode()
    busiest = re.search(r"Busiest streams(.*?)</table>", html, re.S).group(1)
    names = re.findall(r'<a href="[^"]+" title="([^"]+)">', busiest)
    assert names == ["&lt;b&gt;busy&lt;/b&gt;", "quiet"]  # by entries added in the last minute, escaped
    assert "5/s" in busiest  # 50 entries in 10 s
    assert "orders:dlq" in re.search(r"Dead-letter queues(.*?)</table>", html, re.S).group(1)
    assert "No open alerts." in html
