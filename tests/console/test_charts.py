"""Server-rendered SVG charts: geometry checked against plain-Python arithmetic, and the chart panels
on the overview, stream, group and DLQ pages, fed by real snapshots of a real Redis.
"""

from __future__ import annotations

import asyncio
import json
import math
import re
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

import pytest
import redis
from channels.layers import get_channel_layer
from django.template.loader import render_to_string
from django.test import Client
from django.utils import timezone
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from streams_app.live.broadcast import SNAPSHOT_EVENT
from streams_app.live.groups import snapshot_group
from streams_app.metrics import snapshots
from streams_app.metrics.charts import WINDOWS, chart_build, format_value, nice_ceiling, reduce_points
from streams_app.metrics.models import StreamMirror, StreamSample
from streams_app.redis_ops import client as redis_client
from tests.conftest import session_cookie

END = datetime(2026, 3, 5, 12, 34, 56, tzinfo=UTC)
HOUR = WINDOWS["1h"]

# The "full" chart's layout: viewBox 440 x 140, plot area from x=40 to x=432 and from y=10 to y=120.
X0, X1, Y0, Y1 = 40, 432, 10, 120


def expected_xy(t: datetime, v: float, *, start: datetime, span_s: float, top_value: float) -> tuple[str, str]:
    x = X0 + (t - start).total_seconds() / span_s * (X1 - X0)
    y = Y1 - v / top_value * (Y1 - Y0)
    return f"{x:.1f}", f"{y:.1f}"


def path_points(d: str) -> list[list[tuple[float, float]]]:
    """The segments of an SVG path made of M/L commands (and the lone-point ``h0``)."""
    segments: list[list[tuple[float, float]]] = []
    for command, x, y in re.findall(r"([ML])(-?[\d.]+),(-?[\d.]+)", d):
        if command == "M":
            segments.append([])
        segments[-1].append((float(x), float(y)))
    return segments


@pytest.fixture(autouse=True)
def _fresh_clients() -> Iterator[None]:
    redis_client.reset()
    yield
    redis_client.reset()


# --------------------------------------------------------------------------------------- geometry


def test_line_path_coordinates_match_a_plain_computation() -> None:
    start = END - timedelta(hours=1)
    points = [(start + timedelta(minutes=m), v) for m, v in ((5, 0.0), (20, 30.0), (35, 45.0), (50, 20.0))]
    chart = chart_build(points, title="Lag", window=HOUR, end=END)

    # 45 is the largest value: the axis tops out at the next "nice" number, 50; it starts at 0.
    expected = [expected_xy(t, v, start=start, span_s=3600, top_value=50) for t, v in points]
    assert chart.line_path == "M{},{} ".format(*expected[0]) + " ".join(f"L{x},{y}" for x, y in expected[1:])
    baseline = f"{Y1:.1f}"
    assert chart.area_path == (
        f"M{expected[0][0]},{baseline} " + " ".join(f"L{x},{y}" for x, y in expected) + f" L{expected[-1][0]},{baseline}Z"
    )
    assert [t.label for t in chart.y_ticks] == ["0", "25", "50"]
    assert chart.points == 4
    assert (chart.min_label, chart.max_label, chart.last_label) == ("0", "45", "20")
    assert chart.last_dot == (float(expected[-1][0]), float(expected[-1][1]))


def test_missing_values_and_holes_in_time_break_the_line() -> None:
    start = END - timedelta(hours=1)
    every_10s = [start + timedelta(minutes=10, seconds=10 * i) for i in range(7)]
    points: list[tuple[datetime, float | None]] = [(t, 5.0) for t in every_10s]
    points[3] = (points[3][0], None)  # a sample whose value is unknown
    later = every_10s[-1] + timedelta(minutes=15)  # the snapshot job was down for 15 minutes
    points += [(later, 7.0), (later + timedelta(seconds=10), 8.0)]

    segments = path_points(chart_build(points, title="Lag", window=HOUR, end=END).line_path)

    # Typical spacing is 10 s, so 15 minutes without samples is a gap, and so is the None.
    assert [len(s) for s in segments] == [3, 3, 2]
    assert segments[2][0][0] == pytest.approx(X0 + (later - start).total_seconds() / 3600 * (X1 - X0), abs=0.05)


def test_a_lone_sample_is_drawn_as_a_dot() -> None:
    chart = chart_build([(END - timedelta(minutes=5), 3.0)], title="x", window=HOUR, end=END)
    assert chart.line_path.endswith(" h0") and chart.line_path.count("M") == 1


def test_no_points_in_the_window_is_the_empty_state() -> None:
    old = [(END - timedelta(hours=3), 5.0), (END - timedelta(hours=2), None)]
    chart = chart_build(old, title="Depth", window=HOUR, end=END, empty_text="nothing yet")
    assert chart.empty and chart.line_path == "" and chart.summary == "Depth: nothing yet"
    html = render_to_string("streams_app/_chart.html", {"chart": chart})
    assert "nothing yet" in html and "chart-line" not in html


def test_time_ticks_fall_on_round_times() -> None:
    one_hour = chart_build([], title="x", window=HOUR, end=END)
    assert [t.label for t in one_hour.x_ticks] == ["11:40", "11:50", "12:00", "12:10", "12:20", "12:30"]
    first = datetime(2026, 3, 5, 11, 40, tzinfo=UTC)
    assert one_hour.x_ticks[0].pos == round(X0 + (first - (END - timedelta(hours=1))).total_seconds() / 3600 * (X1 - X0), 1)

    day = chart_build([], title="x", window=WINDOWS["24h"], end=END)
    assert [t.label for t in day.x_ticks] == ["15:00", "18:00", "21:00", "00:00", "03:00", "06:00", "09:00", "12:00"]
    week = chart_build([], title="x", window=WINDOWS["7d"], end=END)
    assert [t.label for t in week.x_ticks] == ["Fri 27", "Sat 28", "Sun 01", "Mon 02", "Tue 03", "Wed 04", "Thu 05"]


def test_more_points_than_pixels_keep_each_buckets_peak() -> None:
    start = END - timedelta(hours=24)
    points = [(start + timedelta(seconds=10 * i), float(i % 7)) for i in range(1, 8641)]
    points[5000] = (points[5000][0], 999.0)  # one short spike
    spark = chart_build(points, title="x", window=WINDOWS["24h"], end=END, size="spark")
    assert spark.points <= 60 and spark.max_label == "999"
    # The reduction is a per-bucket maximum: recompute the buckets in plain Python.
    buckets: dict[int, float] = {}
    for t, v in points:
        index = min(59, int((t - start).total_seconds() / 86400 * 60))
        buckets[index] = max(buckets.get(index, -math.inf), v)
    assert [v for _, v in reduce_points(points, start=start, end=END, buckets=60)] == [buckets[i] for i in sorted(buckets)]


def test_value_labels_read_at_a_glance() -> None:
    assert [format_value(v) for v in (0, 7, 12.5, 1234, 2_500_000)] == ["0", "7", "12", "1.23k", "2.5M"]
    assert format_value(3.25, "rate") == "3.2/s"
    assert [format_value(v, "ms") for v in (450, 65_000, 93_784_000)] == ["450 ms", "1m 5s", "1d 2h"]
    assert [nice_ceiling(v) for v in (0.3, 1, 3, 45, 120, 546, 7000, 8001)] == [0.3, 1, 3, 50, 150, 600, 8000, 10000]


def test_labels_are_escaped_in_the_svg() -> None:
    chart = chart_build([(END - timedelta(minutes=1), 1.0)], title='<img src=x onerror="alert(1)">', window=HOUR, end=END)
    html = render_to_string("streams_app/_chart.html", {"chart": chart})
    assert "<img" not in html and "&lt;img src=x" in html


# ----------------------------------------------------------------------------------------- panels


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


# ------------------------------------------------------------------------------- live refresh socket


async def _metrics_socket(server, cookies: dict[str, str] | None, *, origin: str | None = None) -> ClientConnection:
    headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())} if cookies else {}
    return await connect(f"ws://127.0.0.1:{server.port}/ws/metrics/", origin=origin or server.url,
                         additional_headers=headers, proxy=None)


def test_the_metrics_socket_relays_snapshot_announcements(asgi_server, viewer) -> None:
    cookies = session_cookie(viewer)

    async def scenario() -> tuple[list[dict], int, int]:
        ws = await _metrics_socket(asgi_server, cookies)
        frames = [json.loads(await ws.recv())]  # "live" once it has joined the group
        await get_channel_layer().group_send(snapshot_group(), {"type": SNAPSHOT_EVENT, "tick": "2026-03-05T12:00:00+00:00"})
        frames.append(json.loads(await ws.recv()))
        await ws.close()
        anonymous = await _metrics_socket(asgi_server, None)
        with pytest.raises(ConnectionClosed) as closed:
            await anonymous.recv()
        with pytest.raises(InvalidStatus) as refused:
            await _metrics_socket(asgi_server, cookies, origin="http://evil.example")
        return frames, closed.value.rcvd.code, refused.value.response.status_code

    frames, anonymous_code, cross_origin = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert frames == [{"type": "status", "state": "live"}, {"type": "snapshot", "tick": "2026-03-05T12:00:00+00:00"}]
    assert (anonymous_code, cross_origin) == (4401, 403)
