"""What ``/reports/`` shows, read from the rollup tables the pipeline loads.

Every query is bounded (a window of hours, a LIMIT), and everything is computed from the rollups in
the database: the page never touches Redis or the lake.
"""

from __future__ import annotations

from collections import defaultdict
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.db.models import Max, Min, Sum

from streams_app.lake.models import (
    AnomalyRollup,
    ErrorSignatureRollup,
    LagTrendRollup,
    LatencyRollup,
    PipelineRun,
    RetryRollup,
    ThroughputRollup,
)
from streams_app.metrics import charts
from streams_app.redis_ops.client import connections

HEATMAP_DAYS = 28
WEEKDAYS = ("Mon", "Tue", "Wed", "Thu", "Fri", "Sat", "Sun")
LATENCY_ROWS = 50
SIGNATURE_ROWS = 30
TOP_PER_STREAM = 5
ANOMALY_ROWS = 30
LAG_CHARTS = 6


@dataclass(frozen=True, slots=True)
class Cell:
    average: float
    level: float  # 0..1, the cell's shade


@dataclass(frozen=True, slots=True)
class Heatmap:
    """Average entries per hour by weekday (rows) and hour of day (columns), UTC."""

    rows: list[tuple[str, list[Cell]]]
    start: datetime | None
    end: datetime | None
    peak: float


def heatmap(*, stream_hash: str | None = None) -> Heatmap:
    """The last :data:`HEATMAP_DAYS` days of hourly throughput up to the newest hour loaded.

    A cell is the total for that weekday and hour divided by how many such hours the window holds
    (from the oldest hour loaded, when that is later), so a window of three Mondays and four Tuesdays
    still compares fairly and a young lake is not averaged over weeks it does not cover.
    """
    hours = ThroughputRollup.objects.filter(scope=ThroughputRollup.Scope.STREAM, resolution=ThroughputRollup.Resolution.HOUR)
    if stream_hash:
        hours = hours.filter(stream_hash=stream_hash)
    span = hours.aggregate(oldest=Min("bucket"), newest=Max("bucket"))
    end = span["newest"]
    if end is None:
        return Heatmap(rows=[], start=None, end=None, peak=0.0)
    start = max(span["oldest"], end - timedelta(days=HEATMAP_DAYS) + timedelta(hours=1))
    totals: dict[tuple[int, int], int] = defaultdict(int)
    for bucket, entries in hours.filter(bucket__gte=start).values("bucket").annotate(n=Sum("entries")).values_list(
        "bucket", "n"
    ):
        totals[(bucket.weekday(), bucket.hour)] += entries
    occurrences: dict[tuple[int, int], int] = defaultdict(int)
    moment = start
    while moment <= end:
        occurrences[(moment.weekday(), moment.hour)] += 1
        moment += timedelta(hours=1)
    averages = {cell: totals[cell] / occurrences[cell] for cell in occurrences}
    peak = max(averages.values(), default=0.0)
    rows = [
        (
            WEEKDAYS[day],
            [Cell(average=averages.get((day, hour), 0.0), level=averages.get((day, hour), 0.0) / peak if peak else 0.0)
             for hour in range(24)],
        )
        for day in range(7)
    ]
    return Heatmap(rows=rows, start=start, end=end + timedelta(hours=1), peak=peak)


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


def top_signatures() -> list[SignatureRow]:
    configured = {c.name for c in connections()}
    rows = ErrorSignatureRollup.objects.filter(rank__lte=TOP_PER_STREAM).order_by("-count", "signature")[:SIGNATURE_ROWS]
    return [SignatureRow(rollup=row, connected=row.connection in configured) for row in rows]


def retries_histogram() -> list[tuple[str, int, float]]:
    """(label, dead letters, share of the largest bar) per retry count, over every stream."""
    counts = RetryRollup.objects.values_list("retries").annotate(n=Sum("count")).order_by("retries")
    peak = max((n for _, n in counts), default=0)
    return [("unknown" if retries < 0 else str(retries), n, n / peak if peak else 0.0) for retries, n in counts]


def anomalies() -> list[AnomalyRollup]:
    return list(AnomalyRollup.objects.order_by("-hour", "stream_text")[:ANOMALY_ROWS])


def lag_charts() -> list[charts.Chart]:
    """Mean lag per hour over the last 7 days of the groups whose lag peaked highest."""
    newest = LagTrendRollup.objects.aggregate(newest=Max("hour"))["newest"]
    if newest is None:
        return []
    end = newest + timedelta(hours=1)
    window = charts.WINDOWS["7d"]
    recent = LagTrendRollup.objects.filter(hour__gt=end - window.delta)
    worst = (
        recent.values("connection", "stream_hash", "group_hash")
        .annotate(peak=Max("max_lag"))
        .order_by("-peak")[:LAG_CHARTS]
    )
    out = []
    for group in worst:
        rows = list(recent.filter(**{k: group[k] for k in ("connection", "stream_hash", "group_hash")}).order_by("hour"))
        points = [(row.hour, row.mean_lag) for row in rows]
        title = f"{rows[0].stream_text} / {rows[0].group_text}"
        out.append(charts.chart_build(points, title=title, window=window, end=end, unit="count"))
    return out


def last_runs() -> tuple[PipelineRun | None, PipelineRun | None]:
    """The newest successful run (the page's "as of") and the newest run of any state."""
    done = PipelineRun.objects.filter(state=PipelineRun.State.DONE).first()
    latest = PipelineRun.objects.first()
    return done, latest
