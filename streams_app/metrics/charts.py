"""Server-rendered SVG charts: series of (time, value) points in, numbers for ``_chart.html`` out.

No chart library and no JavaScript: a chart is a handful of numbers (a viewBox, a path string, tick
positions) that Python computes from floats, and text labels that the template autoescapes. The
path strings hold only numbers and the SVG path letters ``M``, ``L``, ``H``, ``V``, ``Z``, so nothing
that came from Redis (stream keys, group names) can reach an attribute unescaped.

Choices that make a chart readable at a glance:

* the y axis starts at zero for non-negative metrics (lag, depth, rates): a line that hugs the
  bottom means "nothing", not "the smallest value seen", and the top is a round number;
* a missing sample (``None``) or a hole in time (the snapshot job was down) breaks the line instead
  of drawing a straight segment across the outage;
* more points than pixels are reduced per time bucket to the bucket's maximum, so a short spike
  stays visible on the 24 h and 7 d views;
* time ticks fall on round times (every 10 minutes, 3 hours, or day), in UTC like the rest of the UI;
* a sparkline (no time axis, a cell wide) spans the part of the window that has samples, at least
  :data:`SPARK_MIN_SPAN`: ten minutes of history drawn over a 24 h width would be a sliver at its right
  edge. Its summary says since when it runs. The template stretches it to its cell's width at a fixed
  height (``preserveAspectRatio="none"``, strokes that do not scale), so a narrow cell never shrinks it
  to a sliver either.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Literal

Point = tuple[datetime, float | None]
Size = Literal["spark", "full", "wide"]
Unit = Literal["count", "rate", "ms"]


@dataclass(frozen=True, slots=True)
class Window:
    """A time range a chart can show, with how its time axis is labelled."""

    name: str
    seconds: int
    tick_seconds: int
    tick_format: str
    label: str

    @property
    def delta(self) -> timedelta:
        return timedelta(seconds=self.seconds)


WINDOWS: dict[str, Window] = {
    "1h": Window("1h", 3600, 600, "%H:%M", "1 hour"),
    "24h": Window("24h", 86400, 3 * 3600, "%H:%M", "24 hours"),
    "7d": Window("7d", 7 * 86400, 86400, "%a %d", "7 days"),
}
DEFAULT_WINDOW = "1h"


def window_of(name: str | None) -> Window:
    """The named window, or the default one for anything else (a query parameter is untrusted)."""
    return WINDOWS.get(name or "", WINDOWS[DEFAULT_WINDOW])


@dataclass(frozen=True, slots=True)
class Geometry:
    """The viewBox and the plot area inside it (room left for y labels, below for time labels)."""

    width: int
    height: int
    left: int
    right: int
    top: int
    bottom: int
    max_points: int

    @property
    def plot_width(self) -> int:
        return self.width - self.left - self.right

    @property
    def plot_height(self) -> int:
        return self.height - self.top - self.bottom

    @property
    def plot_right(self) -> int:
        return self.width - self.right

    @property
    def plot_bottom(self) -> int:
        return self.height - self.bottom

    @property
    def middle_x(self) -> float:
        return self.left + self.plot_width / 2

    @property
    def middle_y(self) -> float:
        return self.top + self.plot_height / 2

    @property
    def label_y(self) -> int:
        """Baseline of the time labels, under the plot."""
        return self.height - 6


GEOMETRY: dict[str, Geometry] = {
    "spark": Geometry(width=160, height=32, left=1, right=3, top=3, bottom=2, max_points=60),
    # About one viewBox unit per CSS pixel where three charts share a row, so 10-unit labels read as 10px.
    "full": Geometry(width=440, height=140, left=40, right=8, top=10, bottom=20, max_points=220),
    # The incident timeline's rows: one per line of the page, all on the same time axis.
    "wide": Geometry(width=900, height=110, left=48, right=12, top=10, bottom=20, max_points=450),
}


@dataclass(frozen=True, slots=True)
class Note:
    """An annotation as a chart is handed it: a moment (``end == at``) or a span, with its words."""

    at: datetime
    end: datetime
    text: str
    tags: tuple[str, ...] = ()
    ident: int = 0

    @property
    def summary(self) -> str:
        """What the marker says on hover and to a screen reader: when, what, and its tags."""
        when = f"{self.at:%Y-%m-%d %H:%M:%S}"
        if self.end > self.at:
            when += f" to {self.end:%Y-%m-%d %H:%M:%S}" if self.end.date() != self.at.date() else f"–{self.end:%H:%M:%S}"
        tags = f" [{', '.join(self.tags)}]" if self.tags else ""
        return f"{when} UTC: {self.text}{tags}"


@dataclass(frozen=True, slots=True)
class Mark:
    """A :class:`Note` placed on a chart: a line at ``x``, or a band from ``x`` to ``x2`` (viewBox units,
    clipped to the plot), and ``hit_x``/``hit_width``: the wider strip that answers the pointer."""

    x: float
    x2: float
    note: Note

    @property
    def span(self) -> bool:
        return self.x2 > self.x

    @property
    def width(self) -> float:
        return round(self.x2 - self.x, 1)

    @property
    def hit_x(self) -> float:
        return round(self.x - 4, 1)

    @property
    def hit_width(self) -> float:
        return round(self.x2 - self.x + 8, 1)


def marks_place(notes: Sequence[Note], *, start: datetime, end: datetime, geo: Geometry) -> tuple[Mark, ...]:
    """The notes that meet ``[start, end]``, placed on the plot of ``geo``; a span is clipped to it."""
    span_s = (end - start).total_seconds()
    if span_s <= 0:
        return ()

    def x_of(t: datetime) -> float:
        seconds = min(max((t - start).total_seconds(), 0.0), span_s)
        return round(geo.left + seconds / span_s * geo.plot_width, 1)

    return tuple(Mark(x=x_of(n.at), x2=x_of(n.end), note=n) for n in notes if n.at <= end and n.end >= start)


#: The shortest time a sparkline spans: a stream seen for a few seconds gets a minute's width, not the whole.
SPARK_MIN_SPAN = timedelta(minutes=1)


@dataclass(frozen=True, slots=True)
class Tick:
    pos: float  # x for time ticks, y for value ticks, in viewBox units
    label: str
    anchor: str = "middle"  # SVG text-anchor: the last time label is right-aligned so it stays inside


@dataclass(frozen=True, slots=True)
class Chart:
    """Everything ``_chart.html`` draws; ``empty`` charts show their ``empty_text`` instead."""

    title: str
    size: str
    window: Window
    geometry: Geometry
    line_path: str = ""
    area_path: str = ""
    x_ticks: tuple[Tick, ...] = ()
    y_ticks: tuple[Tick, ...] = ()
    last_dot: tuple[float, float] | None = None
    points: int = 0
    min_label: str = ""
    max_label: str = ""
    last_label: str = ""
    last_at: datetime | None = None
    empty_text: str = ""
    tone: str = "accent"
    since: datetime | None = None  # a sparkline fitted to its samples: where it starts (None: the window's start)
    latest_missing: bool = False  # the newest sample has no value (a lag Redis cannot tell now): not the last known
    #: what ``last_label`` is, said beside it with ``last_at``: the newest snapshot, or the newest rollup
    last_what: str = "last snapshot"
    #: the annotations whose time falls in the window, placed on the plot (full-size charts only)
    marks: tuple[Mark, ...] = ()

    @property
    def empty(self) -> bool:
        return self.points == 0

    @property
    def summary(self) -> str:
        """One sentence for screen readers and the SVG tooltip."""
        if self.empty:
            return f"{self.title}: {self.empty_text}"
        span = f"since {self.since:%Y-%m-%d %H:%M} UTC" if self.since else f"over the last {self.window.label}"
        return (
            f"{self.title} {span}: last {self.last_label}, "
            f"max {self.max_label}, min {self.min_label}"
        )


# ------------------------------------------------------------------------------------ value labels


def format_value(value: float | None, unit: Unit = "count") -> str:
    """A value as a person reads it: ``1.2k``, ``3.5/s``, ``2m 5s``."""
    if value is None:
        return "—"
    if unit == "ms":
        return format_duration_ms(value)
    text = _compact(value)
    return f"{text}/s" if unit == "rate" else text


def _compact(value: float) -> str:
    magnitude = abs(value)
    for threshold, suffix in ((1e9, "G"), (1e6, "M"), (1e3, "k")):
        if magnitude >= threshold:
            return f"{value / threshold:.3g}{suffix}"
    if value == int(value):
        return str(int(value))
    if magnitude >= 10:
        return f"{value:.0f}"
    return f"{value:.2g}" if magnitude < 1 else f"{value:.1f}"


def format_duration_ms(ms: float) -> str:
    """``93784000`` -> ``1d 2h``: a duration at a glance (its two largest units)."""
    if ms < 1000:
        return f"{ms:.0f} ms"
    seconds = int(ms // 1000)
    parts = []
    for unit, size in (("d", 86400), ("h", 3600), ("m", 60), ("s", 1)):
        if seconds >= size:
            parts.append(f"{seconds // size}{unit}")
            seconds %= size
    return " ".join(parts[:2])


#: Axis tops: round numbers whose halves (the middle tick) are round too, close enough together that
#: the line uses most of the chart's height (546 gets 600, not 1000).
_NICE_STEPS = (1, 1.5, 2, 2.5, 3, 4, 5, 6, 8, 10)


def nice_ceiling(value: float) -> float:
    """The smallest of 1, 1.5, 2, 2.5, 3, 4, 5, 6, 8 times a power of ten that is >= ``value`` (> 0)."""
    if value <= 0:
        return 1.0
    exponent = math.floor(math.log10(value))
    for step in _NICE_STEPS:
        candidate = round(step * 10.0**exponent, max(0, -exponent) + 2)  # 3 x 0.1 is 0.3, not 0.30000000000000004
        if candidate >= value * (1 - 1e-12):
            return candidate
    return 10.0 ** (exponent + 1)


# ------------------------------------------------------------------------------------ the geometry


def reduce_points(points: Sequence[Point], *, start: datetime, end: datetime, buckets: int) -> list[Point]:
    """At most ``buckets`` points, then the newest point as it is: each time bucket's maximum, at the
    time of its last point.

    Only used when there are more points than the chart has room for. A bucket whose points are
    all ``None`` yields ``None`` (a gap); an empty bucket yields nothing. The newest point is kept on its
    own, so the line ends at the newest sample and the chart's headline figure is that sample, not the
    maximum of the last bucket (a DLQ at 45 then 44 read 45 on its chart beside a live 44).
    """
    if len(points) <= buckets:
        return list(points)
    *points, newest = points
    span = (end - start).total_seconds()
    out: list[Point] = []
    current: int | None = None
    best: float | None = None
    at: datetime | None = None
    for t, v in points:
        index = min(buckets - 1, max(0, int((t - start).total_seconds() / span * buckets)))
        if index != current:
            if current is not None and at is not None:
                out.append((at, best))
            current, best = index, None
        at = t
        if v is not None and (best is None or v > best):
            best = v
    if current is not None and at is not None:
        out.append((at, best))
    out.append(newest)
    return out


def gap_threshold(points: Sequence[Point]) -> float:
    """Seconds between two samples beyond which the line breaks: three typical intervals.

    The typical interval is the median spacing of the points themselves, so the rule holds whatever
    resolution the series came from (10 s raw samples, 1-minute or 1-hour rollups).
    """
    spacings = sorted(
        (b[0] - a[0]).total_seconds() for a, b in zip(points, points[1:], strict=False) if b[0] > a[0]
    )
    if not spacings:
        return math.inf
    return 3 * spacings[len(spacings) // 2]


def _num(value: float) -> str:
    """A coordinate as it goes into a path: one decimal, no ``-0.0``."""
    text = f"{value:.1f}"
    return "0.0" if text == "-0.0" else text


def chart_build(
    points: Sequence[Point],
    *,
    title: str,
    window: Window,
    end: datetime,
    size: Size = "full",
    unit: Unit = "count",
    empty_text: str = "no samples in this window yet",
    tone: str = "accent",
    last_what: str = "last snapshot",
    notes: Sequence[Note] = (),
) -> Chart:
    """The chart of ``points`` (sorted by time) over ``window`` ending at ``end``; ``last_what`` says what
    a point is (a snapshot, or a rollup of them), shown with the newest one's time. ``notes`` (annotations)
    are drawn where they fall on the time axis; a sparkline has no room for them and draws none."""
    geo = GEOMETRY[size]
    start = end - window.delta
    marks = marks_place(notes, start=start, end=end, geo=geo) if size != "spark" else ()
    inside = [(t, v) for t, v in points if start <= t <= end]
    since = None
    if size == "spark" and inside and inside[0][0] > start:
        since = start = min(inside[0][0], end - SPARK_MIN_SPAN)
    inside = reduce_points(inside, start=start, end=end, buckets=geo.max_points)
    values = [v for _, v in inside if v is not None]
    if not values:
        return Chart(title=title, size=size, window=window, geometry=geo, empty_text=empty_text,
                     x_ticks=_time_ticks(window, start, end, geo) if size != "spark" else (), tone=tone, marks=marks)

    lo = min(0.0, min(values))
    hi = nice_ceiling(max(values)) if max(values) > 0 else 1.0
    if hi <= lo:
        hi = lo + 1.0
    span_s = (end - start).total_seconds()

    def x_of(t: datetime) -> float:
        return geo.left + (t - start).total_seconds() / span_s * geo.plot_width

    def y_of(v: float) -> float:
        return geo.top + geo.plot_height - (v - lo) / (hi - lo) * geo.plot_height

    base = y_of(max(lo, 0.0))
    threshold = gap_threshold(inside)
    segments: list[list[tuple[float, float]]] = []
    current: list[tuple[float, float]] = []
    previous: datetime | None = None
    for t, v in inside:
        if v is None:
            if current:
                segments.append(current)
            current, previous = [], None
            continue
        if previous is not None and (t - previous).total_seconds() > threshold and current:
            segments.append(current)
            current = []
        current.append((x_of(t), y_of(v)))
        previous = t
    if current:
        segments.append(current)

    line: list[str] = []
    area: list[str] = []
    for seg in segments:
        (x0, y0), rest = seg[0], seg[1:]
        line.append(f"M{_num(x0)},{_num(y0)}")
        if rest:
            line.extend(f"L{_num(x)},{_num(y)}" for x, y in rest)
        else:
            line.append("h0")  # a lone sample: a round-capped zero-length stroke draws a dot
        area.append(f"M{_num(x0)},{_num(base)}")
        area.extend(f"L{_num(x)},{_num(y)}" for x, y in seg)
        area.append(f"L{_num(seg[-1][0])},{_num(base)}Z")

    last_t, last_v = next((t, v) for t, v in reversed(inside) if v is not None)
    y_ticks: tuple[Tick, ...] = ()
    if size != "spark":
        y_ticks = tuple(Tick(pos=round(y_of(v), 1), label=format_value(v, unit)) for v in (lo, (lo + hi) / 2, hi))
    return Chart(
        title=title,
        size=size,
        window=window,
        geometry=geo,
        line_path=" ".join(line),
        area_path=" ".join(area),
        x_ticks=_time_ticks(window, start, end, geo) if size != "spark" else (),
        y_ticks=y_ticks,
        last_dot=(round(x_of(last_t), 1), round(y_of(last_v), 1)),
        points=len(values),
        min_label=format_value(min(values), unit),
        max_label=format_value(max(values), unit),
        last_label=format_value(last_v, unit),
        last_at=last_t,
        empty_text=empty_text,
        tone=tone,
        since=since,
        latest_missing=inside[-1][1] is None,
        last_what=last_what,
        marks=marks,
    )


def _time_ticks(window: Window, start: datetime, end: datetime, geo: Geometry) -> tuple[Tick, ...]:
    """Ticks on round UTC times inside (start, end]: the first multiple of the step after start."""
    step = window.tick_seconds
    start_s = start.timestamp()
    first = math.floor(start_s / step) * step + step
    span_s = (end - start).total_seconds()
    ticks = []
    t = first
    while t <= end.timestamp():
        x = geo.left + (t - start_s) / span_s * geo.plot_width
        label = datetime.fromtimestamp(t, UTC).strftime(window.tick_format)
        anchor = "end" if x > geo.plot_right - 16 else "start" if x < geo.left + 16 else "middle"
        ticks.append(Tick(pos=round(x, 1), label=label, anchor=anchor))
        t += step
    return tuple(ticks)
