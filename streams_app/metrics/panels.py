"""Chart panels as data: which charts a stream, group, DLQ or the overview shows, read from the mirror
and the samples.

A page's (connection, key[, group]) is found in the mirror by the SHA-256 of the key (and group
name); with no mirror row yet the panel says so (``no_data``) and the page tells the user that
snapshots start within a minute. The geometry of each chart is :mod:`streams_app.metrics.charts`'s job;
where the panel sits on a page, its URLs and the open alerts shown beside it are the display layer's
(``streams_app.templatetags.metrics``), so this module knows neither pages nor alerts.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Sum
from django.utils import timezone

from streams_app.metrics import snapshots
from streams_app.metrics.charts import WINDOWS, Chart, Unit, Window, chart_build
from streams_app.metrics.models import GroupMirror, SnapshotRun, StreamMirror, StreamSample, name_hash

#: How many streams the overview charts (busiest, deepest DLQs).
OVERVIEW_ROWS = 8


@dataclass
class Panel:
    """One block of charts with its window switch, as ``_chart_panel.html`` draws it."""

    title: str
    url: str  # the htmx endpoint (without ?window=)
    window: Window
    charts: list[Chart] = field(default_factory=list)
    no_data: bool = False
    note: str = ""
    as_of: datetime | None = None

    @property
    def windows(self) -> list[Window]:
        return list(WINDOWS.values())

    @property
    def refresh_url(self) -> str:
        return f"{self.url}?window={self.window.name}"


@dataclass
class OverviewRow:
    """One stream of the overview's lists, with its sparkline."""

    mirror: StreamMirror
    chart: Chart


@dataclass
class OverviewPanel:
    """The overview's activity block: busiest streams and deepest DLQs (``_overview_panel.html``)."""

    url: str  # the htmx endpoint (without ?window=)
    window: Window
    busiest: list[OverviewRow]
    dlqs: list[OverviewRow]
    as_of: datetime | None
    no_data: bool

    @property
    def windows(self) -> list[Window]:
        return list(WINDOWS.values())

    @property
    def refresh_url(self) -> str:
        return f"{self.url}?window={self.window.name}"


def _as_of() -> datetime | None:
    return SnapshotRun.objects.filter(finished_at__isnull=False).order_by("-tick").values_list("tick", flat=True).first()


def _chart(kind: str, obj_id: int, metric: str, *, title: str, window: Window, now: datetime, unit: Unit = "count",
           size: str = "full", tone: str = "accent") -> Chart:
    points = snapshots.series(kind=kind, obj_id=obj_id, metric=metric, since=now - window.delta, until=now)
    return chart_build(points, title=title, window=window, end=now, size=size, unit=unit, tone=tone)  # type: ignore[arg-type]


def _stream_mirror(conn: str, key: bytes) -> StreamMirror | None:
    return StreamMirror.objects.filter(connection=conn, key_hash=name_hash(key)).first()


def _deleted_note(mirror: StreamMirror) -> str:
    if mirror.deleted_at is None:
        return ""
    return f"This stream was last seen {mirror.deleted_at:%Y-%m-%d %H:%M} UTC; its history is kept."


def stream_panel(*, conn: str, key: bytes, window: Window, url: str) -> Panel:
    panel = Panel(title="Throughput and length", url=url, window=window)
    mirror = _stream_mirror(conn, key)
    if mirror is None:
        panel.no_data = True
        return panel
    now = timezone.now()
    panel.charts = [
        _chart("stream", mirror.pk, "rate", title="Entries added per second", window=window, now=now, unit="rate"),
        _chart("stream", mirror.pk, "length", title="Length", window=window, now=now, tone="muted"),
    ]
    if mirror.is_dlq:
        panel.charts.append(_chart("dlq", mirror.pk, "depth", title="DLQ depth", window=window, now=now, tone="bad"))
    panel.note, panel.as_of = _deleted_note(mirror), _as_of()
    return panel


def group_panel(*, conn: str, key: bytes, group: bytes, window: Window, url: str) -> Panel:
    panel = Panel(title="Lag, pending and oldest pending", url=url, window=window)
    mirror = GroupMirror.objects.filter(
        stream__connection=conn, stream__key_hash=name_hash(key), name_hash=name_hash(group)
    ).first()
    if mirror is None:
        panel.no_data = True
        return panel
    now = timezone.now()
    panel.charts = [
        _chart("group", mirror.pk, "lag", title="Lag (entries not yet delivered)", window=window, now=now, tone="warn"),
        _chart("group", mirror.pk, "pending", title="Pending (delivered, not acked)", window=window, now=now),
        _chart("group", mirror.pk, "oldest_pending_idle_ms", title="Oldest pending entry, idle for", window=window,
               now=now, unit="ms", tone="bad"),
    ]
    if mirror.deleted_at is not None:
        panel.note = f"This group was last seen {mirror.deleted_at:%Y-%m-%d %H:%M} UTC; its history is kept."
    panel.as_of = _as_of()
    return panel


def dlq_panel(*, conn: str, key: bytes, window: Window, url: str) -> Panel:
    panel = Panel(title="Depth", url=url, window=window)
    mirror = _stream_mirror(conn, key)
    if mirror is None:
        panel.no_data = True
        return panel
    now = timezone.now()
    panel.charts = [
        _chart("dlq", mirror.pk, "depth", title="Dead letters waiting", window=window, now=now, tone="bad"),
        _chart("stream", mirror.pk, "rate", title="Dead-lettered per second", window=window, now=now, unit="rate",
               tone="warn"),
    ]
    panel.note, panel.as_of = _deleted_note(mirror), _as_of()
    return panel


def overview_panel(*, window: Window, url: str) -> OverviewPanel:
    """The busiest streams (entries added over the last minute of snapshots) and the deepest DLQs.

    "Busiest" looks at the newest minute only: summing a whole window over ten thousand streams would
    read millions of samples for one page; the sparklines then show each one's whole window.
    """
    now = timezone.now()
    as_of = _as_of()
    busiest: list[OverviewRow] = []
    dlqs: list[OverviewRow] = []
    if as_of is not None:
        recent = (
            StreamSample.objects.filter(resolution="raw", at__gt=as_of - timedelta(minutes=1), at__lte=as_of,
                                        stream__deleted_at__isnull=True, stream__is_dlq=False)
            .values("stream_id")
            .annotate(total=Sum("added"))
            .filter(total__gt=0)
            .order_by("-total")[:OVERVIEW_ROWS]
        )
        ids = [r["stream_id"] for r in recent]
        mirrors = StreamMirror.objects.in_bulk(ids)
        for sid in ids:
            m = mirrors[sid]
            chart = _chart("stream", sid, "rate", title=m.key_text, window=window, now=now, unit="rate", size="spark")
            busiest.append(OverviewRow(m, chart))
        for m in StreamMirror.objects.filter(is_dlq=True, deleted_at__isnull=True).order_by("-length", "key_text")[:OVERVIEW_ROWS]:
            chart = _chart("dlq", m.pk, "depth", title=m.key_text, window=window, now=now, size="spark", tone="bad")
            dlqs.append(OverviewRow(m, chart))
    return OverviewPanel(url=url, window=window, busiest=busiest, dlqs=dlqs, as_of=as_of, no_data=as_of is None)
