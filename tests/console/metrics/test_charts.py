"""Server-rendered SVG charts: ``chart_build``'s paths, ticks, gaps, reduction and labels, and the escaping
of the rendered chart.

Coordinates are checked against plain-Python arithmetic on the chart's layout (viewBox 440 x 140),
the reduction against a per-bucket maximum computed here, the labels against literal strings.
"""

from __future__ import annotations

import math
from datetime import UTC, datetime, timedelta

import pytest
from django.template.loader import render_to_string

from streams_app.metrics.charts import WINDOWS, chart_build, format_value, nice_ceiling, reduce_points
from tests.console.metrics.helpers import path_points

END = datetime(2026, 3, 5, 12, 34, 56, tzinfo=UTC)
HOUR = WINDOWS["1h"]

# The "full" chart's layout: viewBox 440 x 140, plot area from x=40 to x=432 and from y=10 to y=120.
X0, X1, Y0, Y1 = 40, 432, 10, 120


def expected_xy(t: datetime, v: float, *, start: datetime, span_s: float, top_value: float) -> tuple[str, str]:
    x = X0 + (t - start).total_seconds() / span_s * (X1 - X0)
    y = Y1 - v / top_value * (Y1 - Y0)
    return f"{x:.1f}", f"{y:.1f}"


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
    assert spark.points <= 61 and spark.max_label == "999"
    # The reduction is a per-bucket maximum of every point but the newest, which ends the line as it is
    # (the headline figure is the newest sample): recompute the buckets in plain Python.
    *older, newest = points
    buckets: dict[int, float] = {}
    for t, v in older:
        index = min(59, int((t - start).total_seconds() / 86400 * 60))
        buckets[index] = max(buckets.get(index, -math.inf), v)
    reduced = reduce_points(points, start=start, end=END, buckets=60)
    assert [v for _, v in reduced] == [buckets[i] for i in sorted(buckets)] + [newest[1]]
    assert spark.last_label == format_value(newest[1]) and spark.last_at == newest[0]


def test_value_labels_read_at_a_glance() -> None:
    assert [format_value(v) for v in (0, 7, 12.5, 1234, 2_500_000)] == ["0", "7", "12", "1.23k", "2.5M"]
    assert format_value(3.25, "rate") == "3.2/s"
    assert [format_value(v, "ms") for v in (450, 65_000, 93_784_000)] == ["450 ms", "1m 5s", "1d 2h"]
    assert [nice_ceiling(v) for v in (0.3, 1, 3, 45, 120, 546, 7000, 8001)] == [0.3, 1, 3, 50, 150, 600, 8000, 10000]


def test_labels_are_escaped_in_the_svg() -> None:
    chart = chart_build([(END - timedelta(minutes=1), 1.0)], title='<img src=x onerror="alert(1)">', window=HOUR, end=END)
    html = render_to_string("streams_app/_chart.html", {"chart": chart})
    assert "<img" not in html and "&lt;img src=x" in html
