"""What ``/reports/`` shows, read from the rollup tables the pipeline loads.

Every query is bounded (a window of hours, a LIMIT), and everything is computed from the rollups in
the database: the page never touches Redis or the lake.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import F, Max, Min, Q, QuerySet, Sum

from pipeline.signatures import normalize_error
from streams_app.lake.models import (
    AnomalyRollup,
    ErrorSignatureRollup,
    LagTrendRollup,
    LatencyRollup,
    PipelineRun,
    RetryRollup,
    ThroughputRollup,
)
from streams_app.masking.apply import MASKED, Masker, rules_load
from streams_app.metrics import charts
from streams_app.metrics.charts import format_duration_ms
from streams_app.redis_ops.client import connections

HEATMAP_DAYS = 28
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
LATENCY_ROWS = 50
SIGNATURE_ROWS = 30
TOP_PER_STREAM = 5
ANOMALY_ROWS = 30
LAG_CHARTS = 6


@dataclass(frozen=True, slots=True)
class PartialHour:
    """An hour the data covers only in part: where it starts or ends inside the hour.

    ``minutes`` is None when the hour's per-minute rows are not in the database (only the last
    ``BUSCONSOLE_PIPELINE_MINUTE_HOURS`` hours come in, so the first hour of an older lake): then how
    much of it is covered is not known here, and it is said so.
    """

    start: datetime
    entries: int
    minutes: int | None
    covered_from: datetime | None
    covered_to: datetime | None

    @property
    def text(self) -> str:
        day = f"{WEEKDAYS[self.start.weekday()]} {self.start:%Y-%m-%d %H}:00"
        if self.minutes is None:
            return f"{day}: {self.entries} entries in a partial hour (its minutes are not in the database)"
        return (
            f"{day}: {self.entries} entries in {self.minutes} of 60 minutes "
            f"({self.covered_from:%H:%M}–{self.covered_to:%H:%M} UTC)"
        )


@dataclass(frozen=True, slots=True)
class Cell:
    """One weekday and hour of day: its entries over the hours of that slot the data covers.

    Nothing is scaled: ``label`` gives the count and the span it was measured over (full hours, and
    the minutes of a partial one); an average per hour is given over full hours only.
    """

    entries: int
    full_hours: int
    full_entries: int
    partial: tuple[PartialHour, ...]
    covered_minutes: int  # full hours and the known minutes of partial ones: what the shade divides by
    level: float  # 0..1, the cell's shade: entries per covered minute, against the darkest cell
    label: str

    @property
    def covered(self) -> bool:
        return bool(self.full_hours or self.partial)


@dataclass(frozen=True, slots=True)
class Heatmap:
    """Entries by weekday (rows) and hour of day (columns), UTC, over the hours the data covers."""

    rows: list[tuple[str, list[Cell]]]
    start: datetime | None
    end: datetime | None
    hours: int  # hour slots from start to end, partial ones included
    partial: tuple[PartialHour, ...]
    peak: str  # the darkest cell, said with its count and span


def _cell_label(day: str, hour: int, entries: int, full_hours: int, full_entries: int,
                partial: list[PartialHour]) -> str:
    head = f"{day} {hour:02d}:00 UTC: "
    if not full_hours and not partial:
        return head + "not covered by the data"
    parts = []
    if full_hours:
        text = f"{full_entries} entries in {full_hours} full hour{'s' if full_hours != 1 else ''}"
        if full_hours > 1:
            text += f" (average {full_entries / full_hours:.1f} per hour)"
        parts.append(text)
    for part in partial:
        if part.minutes is None:
            parts.append(f"{part.entries} entries in a partial hour (minutes covered not known)")
        else:
            parts.append(f"{part.entries} entries in a partial hour, {part.minutes} of 60 minutes covered "
                         f"({part.covered_from:%H:%M}–{part.covered_to:%H:%M} on {part.start:%Y-%m-%d})")
    total = f"{entries} entries in all: " if len(parts) > 1 else ""
    return head + total + "; ".join(parts)


def _coverage(minutes: QuerySet, *, oldest: datetime, newest: datetime) -> tuple[datetime | None, datetime | None]:
    """(first minute, end of the last minute) the data covers, each None when it cannot be told.

    The per-minute rows say where data starts inside the oldest hour (when they reach back to it) and
    where it ends inside the newest.
    """
    span = minutes.aggregate(first=Min("bucket"), last=Max("bucket"))
    first, last = span["first"], span["last"]
    begins = first if first is not None and first < oldest + timedelta(hours=1) else None
    ends = last + timedelta(minutes=1) if last is not None and last >= newest else None
    return begins, ends


def heatmap(*, stream_hash: str | None = None) -> Heatmap:
    """The last :data:`HEATMAP_DAYS` days of hourly throughput up to the newest hour loaded.

    Each cell sums the entries of its weekday and hour over the window and says over how many full
    hours, and which partial ones, they were counted: the data's first and last hours are usually
    partial (a young lake may hold 12 minutes of one hour), and an hour covered for 12 minutes is
    shown as such, never scaled to a rate per hour. The shade compares entries per covered minute.
    """
    scope: dict[str, str] = {"scope": ThroughputRollup.Scope.STREAM}
    if stream_hash:
        scope["stream_hash"] = stream_hash
    hours = ThroughputRollup.objects.filter(resolution=ThroughputRollup.Resolution.HOUR, **scope)
    span = hours.aggregate(oldest=Min("bucket"), newest=Max("bucket"))
    end = span["newest"]
    if end is None:
        return Heatmap(rows=[], start=None, end=None, hours=0, partial=(), peak="")
    start = max(span["oldest"], end - timedelta(days=HEATMAP_DAYS) + timedelta(hours=1))
    minutes = ThroughputRollup.objects.filter(resolution=ThroughputRollup.Resolution.MINUTE, **scope)
    begins, ends = _coverage(minutes, oldest=span["oldest"], newest=end)
    counts: dict[datetime, int] = defaultdict(int)
    for bucket, entries in hours.filter(bucket__gte=start).values("bucket").annotate(n=Sum("entries")).values_list(
        "bucket", "n"
    ):
        counts[bucket] += entries
    slots: dict[tuple[int, int], dict] = defaultdict(lambda: {"full": 0, "full_entries": 0, "partial": []})
    partials: list[PartialHour] = []
    moment = start
    while moment <= end:
        slot = slots[(moment.weekday(), moment.hour)]
        low = begins if moment == span["oldest"] else moment
        high = ends if moment == end else moment + timedelta(hours=1)
        if low == moment and high == moment + timedelta(hours=1):
            slot["full"] += 1
            slot["full_entries"] += counts[moment]
        else:
            part = PartialHour(
                start=moment, entries=counts[moment],
                minutes=round((high - low).total_seconds() / 60) if low is not None and high is not None else None,
                covered_from=low, covered_to=high,
            )
            slot["partial"].append(part)
            partials.append(part)
        moment += timedelta(hours=1)

    def covered_minutes(slot: dict) -> int:
        return slot["full"] * 60 + sum(p.minutes if p.minutes is not None else 60 for p in slot["partial"])

    rates = {key: (slot["full_entries"] + sum(p.entries for p in slot["partial"])) / covered_minutes(slot)
             for key, slot in slots.items() if covered_minutes(slot)}
    top = max(rates.values(), default=0.0)
    rows = []
    cells: dict[tuple[int, int], Cell] = {}
    for day in range(7):
        row = []
        for hour in range(24):
            slot = slots.get((day, hour), {"full": 0, "full_entries": 0, "partial": []})
            entries = slot["full_entries"] + sum(p.entries for p in slot["partial"])
            cell = Cell(
                entries=entries, full_hours=slot["full"], full_entries=slot["full_entries"],
                partial=tuple(slot["partial"]), covered_minutes=covered_minutes(slot),
                level=rates.get((day, hour), 0.0) / top if top else 0.0,
                label=_cell_label(WEEKDAYS[day], hour, entries, slot["full"], slot["full_entries"], slot["partial"]),
            )
            cells[(day, hour)] = cell
            row.append(cell)
        rows.append((WEEKDAYS[day], row))
    peak = ""
    if top:
        darkest = next(cells[key] for key, rate in rates.items() if rate == top)
        peak = darkest.label
    return Heatmap(
        rows=rows, start=begins or start, end=ends or end + timedelta(hours=1),
        hours=int((end - start).total_seconds() // 3600) + 1,
        partial=tuple(partials), peak=peak,
    )


def throughput_streams() -> list[tuple[str, str]]:
    """(stream_hash, "conn: stream") of the streams with hourly throughput, for the heat map's filter."""
    rows = (
        ThroughputRollup.objects.filter(scope="stream", resolution="hour")
        .values_list("stream_hash", "connection", "stream_text")
        .distinct()
        .order_by("connection", "stream_text")[:500]
    )
    return [(digest, f"{conn}: {text}") for digest, conn, text in rows]


@dataclass(frozen=True, slots=True)
class LatencyRow:
    newest: LatencyRollup
    worst_p99_ms: float


def latency_rows() -> list[LatencyRow]:
    """Per stream, group and event type: its newest hour, and the worst p99 of the last 24 hours."""
    newest_hour = LatencyRollup.objects.aggregate(newest=Max("hour"))["newest"]
    if newest_hour is None:
        return []
    recent = LatencyRollup.objects.filter(hour__gt=newest_hour - timedelta(hours=24)).order_by("hour")[:20_000]
    newest: dict[tuple[str, str, str, str], LatencyRollup] = {}
    worst: dict[tuple[str, str, str, str], float] = defaultdict(float)
    for row in recent:
        key = (row.connection, row.stream, row.group, row.event_type)
        newest[key] = row
        worst[key] = max(worst[key], row.p99_ms)
    rows = [LatencyRow(newest=row, worst_p99_ms=worst[key]) for key, row in newest.items()]
    rows.sort(key=lambda r: -r.worst_p99_ms)
    return rows[:LATENCY_ROWS]


@dataclass(frozen=True, slots=True)
class SignatureRow:
    rollup: ErrorSignatureRollup
    connected: bool  # its connection is configured, so its DLQ can be opened (the page links it)
    signature: str  # the rollup's signature and example as the DLQ's masking rules let them show now
    example: str


def top_signatures() -> list[SignatureRow]:
    """The top signatures, masked by today's rules: the lake is written masked (the exporter reads through
    the masker), but a rule made after a run must hide what that run's rows hold too."""
    configured = {c.name for c in connections()}
    rules = rules_load()
    rows = ErrorSignatureRollup.objects.filter(rank__lte=TOP_PER_STREAM).order_by("-count", "signature")[:SIGNATURE_ROWS]
    out = []
    for row in rows:
        signature, example = row.signature, row.example_error
        masker = Masker(rules, key=row.dlq_bytes, conn=row.connection)
        shown = masker.shown_error(example, origin=row.stream_bytes)
        if shown != example:  # a rule hides this DLQ's errors: the signature is made from the shown text
            example = shown or ""
            signature = normalize_error(shown) if shown else MASKED
        out.append(SignatureRow(rollup=row, connected=row.connection in configured, signature=signature, example=example))
    return out


def retries_histogram() -> list[tuple[str, int, float]]:
    """(label, dead letters, share of the largest bar) per retry count, over every stream."""
    counts = RetryRollup.objects.values_list("retries").annotate(n=Sum("count")).order_by("retries")
    peak = max((n for _, n in counts), default=0)
    return [("unknown" if retries < 0 else str(retries), n, n / peak if peak else 0.0) for retries, n in counts]


def anomalies() -> list[AnomalyRollup]:
    return list(AnomalyRollup.objects.order_by("-hour", "stream_text")[:ANOMALY_ROWS])


@dataclass(frozen=True, slots=True)
class LagChart:
    chart: charts.Chart
    note: str  # why the group is shown ahead of the peaks ("" when for its peak), plain text


_GROUP = ("connection", "stream_hash", "group_hash")


def _behind_note(row: LagTrendRollup) -> str:
    hour = f"{row.hour:%Y-%m-%d %H}:00 UTC"
    if row.last_lag is None:
        idle = f", the longest waiting {format_duration_ms(row.max_idle_ms)}" if row.max_idle_ms is not None else ""
        return (
            f"Lag unknown in the hour from {hour}, with {row.max_pending} pending{idle}: Redis cannot count "
            "a group's lag while an entry it has not read yet was deleted (XDEL, a trim inside its range); "
            "it is known again once the group reads past it."
        )
    return f"Not catching up: lag {row.last_lag} at the end of the hour from {hour}, {row.lag_change:+d} over that hour."


def lag_charts() -> list[LagChart]:
    """Mean lag per hour over the last 7 days: first the groups behind and not catching up in the
    newest hour, then those whose lag peaked highest.

    A group that stopped reading is what this trend is for, and ranking by peak alone hid it twice:
    its lag may be modest next to a busy group's bursts, and once an entry ahead of it is deleted
    Redis reports its lag as unknown (NULL), which the peak ranking put last. So a group whose newest
    hour ends with a lag above zero that did not fall over the hour, or with its lag unknown and
    entries pending, is shown first, with a line saying why.
    """
    newest = LagTrendRollup.objects.aggregate(newest=Max("hour"))["newest"]
    if newest is None:
        return []
    end = newest + timedelta(hours=1)
    window = charts.WINDOWS["7d"]
    recent = LagTrendRollup.objects.filter(hour__gt=end - window.delta)
    behind = (
        LagTrendRollup.objects.filter(hour=newest)
        .filter(Q(last_lag__gt=0, lag_change__gte=0) | Q(last_lag__isnull=True, max_pending__gt=0))
        .order_by(F("last_lag").desc(nulls_first=True), "stream_text", "group_text")[:LAG_CHARTS]
    )
    chosen: dict[tuple[str, str, str], str] = {}
    for row in behind:
        chosen[(row.connection, row.stream_hash, row.group_hash)] = _behind_note(row)
    peaks = (
        recent.values(*_GROUP).annotate(peak=Max("max_lag")).order_by(F("peak").desc(nulls_last=True), *_GROUP)
    )
    for group in peaks[: LAG_CHARTS * 2]:
        if len(chosen) >= LAG_CHARTS:
            break
        chosen.setdefault(tuple(group[k] for k in _GROUP), "")
    out = []
    for key, note in chosen.items():
        rows = list(recent.filter(**dict(zip(_GROUP, key, strict=True))).order_by("hour"))
        points = [(row.hour, row.mean_lag) for row in rows]
        title = f"{rows[0].stream_text} / {rows[0].group_text}"
        chart = charts.chart_build(points, title=title, window=window, end=end, unit="count",
                                   empty_text="lag unknown in every hour of this window")
        out.append(LagChart(chart=chart, note=note))
    return out


def last_runs() -> tuple[PipelineRun | None, PipelineRun | None]:
    """The newest successful run (the page's "as of") and the newest run of any state."""
    done = PipelineRun.objects.filter(state=PipelineRun.State.DONE).first()
    latest = PipelineRun.objects.first()
    return done, latest
