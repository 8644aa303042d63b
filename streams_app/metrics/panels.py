"""Chart panels as data: which charts a stream, group, DLQ or the overview shows, read from the mirror
and the samples.

A page's (connection, key[, group]) is found in the mirror by the SHA-256 of the key (and group
name); with no mirror row yet the panel says so (``no_data``) and the page tells the user that
snapshots start within a minute. The geometry of each chart is :mod:`streams_app.metrics.charts`'s job;
where the panel sits on a page, its URLs and the open alerts shown beside it are the display layer's
(``streams_app.templatetags.metrics``), so this module knows neither pages nor alerts.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.conf import settings
from django.db.models import Avg
from django.utils import timezone

from eventbus.conventions import is_internal_stream
from streams_app.annotations.models import Annotation
from streams_app.metrics import series
from streams_app.metrics.charts import WINDOWS, Chart, Note, Unit, Window, chart_build, format_value
from streams_app.metrics.models import (
    GroupMirror,
    Resolution,
    SnapshotRun,
    StreamMirror,
    StreamSample,
    name_hash,
)

#: How many streams the overview charts (busiest, deepest DLQs).
OVERVIEW_ROWS = 8
#: The most annotations one panel draws (the newest of a busier window are left out, and the panel says so).
NOTES_MAX = 50
#: How far back "busiest" looks (at least one snapshot interval): the rate every row shows and is ranked by.
BUSIEST_SPAN = timedelta(minutes=1)


class _WindowSwitch:
    """The window switch a panel draws: the windows to choose from and the URL that reloads it."""

    url: str  # the htmx endpoint (without ?window=)
    window: Window

    @property
    def windows(self) -> list[Window]:
        return list(WINDOWS.values())

    @property
    def refresh_url(self) -> str:
        return f"{self.url}?window={self.window.name}"


@dataclass
class Panel(_WindowSwitch):
    """One block of charts with its window switch, as ``{% stream_charts %}`` and its kind draw it
    (``streams_app/templatetags/metrics.py``)."""

    title: str
    url: str
    window: Window
    charts: list[Chart] = field(default_factory=list)
    no_data: bool = False
    note: str = ""
    as_of: datetime | None = None
    notes: list[Note] = field(default_factory=list)  # the annotations in the window, drawn on every chart
    notes_left_out: int = 0


@dataclass
class OverviewRow:
    """One stream of the overview's lists: its sparkline over the window, and the figure the list is
    ordered by (``figure``, shown beside the sparkline as ``figure_label``), so what is shown is what ranks."""

    mirror: StreamMirror
    chart: Chart
    figure: float = 0.0
    figure_label: str = ""
    internal: bool = False


@dataclass
class OverviewPanel(_WindowSwitch):
    """The overview's activity block: busiest streams and deepest DLQs (``_overview_panel.html``)."""

    url: str
    window: Window
    busiest: list[OverviewRow]
    dlqs: list[OverviewRow]
    as_of: datetime | None
    no_data: bool
    include_internal: bool = False  # the bus's own streams (its metrics) in "busiest", off by default
    internal_left_out: int = 0  # internal streams busy enough to be listed, left out

    @property
    def refresh_url(self) -> str:
        return f"{self.url}?window={self.window.name}{'&internal=1' if self.include_internal else ''}"


@dataclass(frozen=True, slots=True)
class _Spec:
    """One chart of a panel: which series of the panel's object, and how it is drawn."""

    kind: str
    metric: str
    title: str
    unit: Unit = "count"
    tone: str = "accent"


#: What a chart's newest point is, by the resolution its window reads (said beside its figure).
LAST_WHAT: dict[str, str] = {
    Resolution.RAW: "last snapshot",
    Resolution.MINUTE: "last 1-minute rollup",
    Resolution.HOUR: "last 1-hour rollup",
}


def _as_of() -> datetime | None:
    return (
        SnapshotRun.objects.filter(finished_at__isnull=False)
        .order_by("-tick")
        .values_list("tick", flat=True)
        .first()
    )


def _chart(
    kind: str,
    obj_id: int,
    metric: str,
    *,
    title: str,
    window: Window,
    now: datetime,
    unit: Unit = "count",
    size: str = "full",
    tone: str = "accent",
    notes: Sequence[Note] = (),
) -> Chart:
    points = series.series(kind=kind, obj_id=obj_id, metric=metric, since=now - window.delta, until=now)
    resolution = series.series_resolution(since=now - window.delta, now=now)
    return chart_build(
        points, title=title, window=window, end=now, size=size, unit=unit, tone=tone,  # type: ignore[arg-type]  # tone and unit are the chart's literal names, checked by chart_build at run time
        last_what=LAST_WHAT.get(resolution, LAST_WHAT[Resolution.RAW]), notes=notes,
    )


def notes_in(
    *, conn: str, keys: Sequence[bytes] | None, start: datetime, end: datetime, limit: int = NOTES_MAX
) -> tuple[list[Note], int]:
    """The annotations the charts of ``keys`` on ``conn`` (``None``: of the whole connection, every
    stream's included) show over ``[start, end]``, oldest first: at most ``limit`` (the newest of them),
    and how many more there were."""
    shown = Annotation.objects.shown_on(conn=conn, keys=keys or (), every_stream=keys is None)
    rows = shown.overlapping(start, end)
    newest = list(rows.order_by("-at", "-pk")[: limit + 1])
    notes = [Note(at=a.at, end=a.end_at, text=a.text, tags=tuple(a.tags), ident=a.pk) for a in reversed(newest[:limit])]
    return notes, (rows.count() - limit if len(newest) > limit else 0)


def _stream_mirror(conn: str, key: bytes) -> StreamMirror | None:
    return StreamMirror.objects.filter(connection=conn, key_hash=name_hash(key)).first()


def _panel(
    title: str,
    url: str,
    window: Window,
    mirror: StreamMirror | GroupMirror | None,
    what: str,
    specs: Sequence[_Spec],
) -> Panel:
    """The panel of ``mirror`` (``what``: "stream" or "group") with one chart per spec; ``no_data``
    without a mirror row. A deleted object keeps its charts, with a note saying its history is kept."""
    panel = Panel(title=title, url=url, window=window)
    if mirror is None:
        panel.no_data = True
        return panel
    now = timezone.now()
    stream = mirror.stream if isinstance(mirror, GroupMirror) else mirror
    # A DLQ's charts show its origin streams' annotations too: a deploy of the service is why it grew.
    keys = [stream.key_bytes, *(str(k).encode() for k in (stream.dlq_sources or [])[:10])]
    panel.notes, panel.notes_left_out = notes_in(conn=stream.connection, keys=keys, start=now - window.delta, end=now)
    panel.charts = [
        _chart(
            spec.kind,
            mirror.pk,
            spec.metric,
            title=spec.title,
            window=window,
            now=now,
            unit=spec.unit,
            tone=spec.tone,
            notes=panel.notes,
        )
        for spec in specs
    ]
    if mirror.deleted_at is not None:
        panel.note = f"This {what} was last seen {mirror.deleted_at:%Y-%m-%d %H:%M} UTC; its history is kept."
    panel.as_of = _as_of()
    return panel


_STREAM_CHARTS = (
    _Spec("stream", "rate", "Entries added per second", unit="rate"),
    _Spec("stream", "length", "Length", tone="muted"),
)
_STREAM_DLQ_CHART = _Spec("dlq", "depth", "DLQ depth", tone="bad")
_GROUP_CHARTS = (
    _Spec("group", "lag", "Lag (entries not yet delivered)", tone="warn"),
    _Spec("group", "pending", "Pending (delivered, not acked)"),
    _Spec(
        "group",
        "oldest_pending_idle_ms",
        "Longest pending idle (max over the pending list)",
        unit="ms",
        tone="bad",
    ),
)
_DLQ_CHARTS = (
    _Spec("dlq", "depth", "Dead letters waiting", tone="bad"),
    _Spec("stream", "rate", "Dead-lettered per second", unit="rate", tone="warn"),
)


#: ``mirror=`` of :func:`stream_panel` and :func:`dlq_panel` when the caller has not read the mirror row.
UNREAD: Any = object()


def stream_panel(
    *, conn: str, key: bytes, window: Window, url: str, mirror: StreamMirror | None = UNREAD
) -> Panel:
    """The stream's panel; ``mirror`` is its mirror row when the caller read it already (None: there is
    none), in the same query as something else the page needs."""
    if mirror is UNREAD:
        mirror = _stream_mirror(conn, key)
    specs = (*_STREAM_CHARTS, _STREAM_DLQ_CHART) if mirror is not None and mirror.is_dlq else _STREAM_CHARTS
    return _panel("Throughput and length", url, window, mirror, "stream", specs)


def group_panel(*, conn: str, key: bytes, group: bytes, window: Window, url: str) -> Panel:
    mirror = GroupMirror.objects.filter(
        stream__connection=conn, stream__key_hash=name_hash(key), name_hash=name_hash(group)
    ).first()
    return _panel("Lag, pending and longest pending idle", url, window, mirror, "group", _GROUP_CHARTS)


def dlq_panel(
    *, conn: str, key: bytes, window: Window, url: str, mirror: StreamMirror | None = UNREAD
) -> Panel:
    """The DLQ's panel; ``mirror`` as for :func:`stream_panel`."""
    if mirror is UNREAD:
        mirror = _stream_mirror(conn, key)
    return _panel("Depth", url, window, mirror, "stream", _DLQ_CHARTS)


def overview_panel(*, window: Window, url: str, include_internal: bool = False) -> OverviewPanel:
    """The busiest streams and the deepest DLQs, each with a sparkline over ``window``.

    "Busiest" ranks by the mean rate of entries added over the newest minute of snapshots (at least one
    snapshot interval), whatever the window: summing a whole window over ten thousand streams would read
    millions of samples for one page. Each row shows that same rate beside its sparkline, so the list is
    ordered by the figure it shows at every window (the sparkline's own last point is a bucket of the
    window: a 24-minute maximum at 24 h). The bus's own streams (:func:`is_internal_stream`: its metrics
    streams move with every handled event) are left out unless ``include_internal``. DLQs are ranked by
    their depth now, which is the figure they show.
    """
    now = timezone.now()
    as_of = _as_of()
    panel = OverviewPanel(
        url=url,
        window=window,
        busiest=[],
        dlqs=[],
        as_of=as_of,
        no_data=as_of is None,
        include_internal=include_internal,
    )
    if as_of is None:
        return panel
    span = max(BUSIEST_SPAN, timedelta(seconds=settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S))
    ranked = (
        StreamSample.objects.filter(
            resolution="raw",
            at__gt=as_of - span,
            at__lte=as_of,
            stream__deleted_at__isnull=True,
            stream__is_dlq=False,
        )
        .values("stream_id", "stream__key")
        .annotate(rate=Avg("rate_per_s"))
        .filter(rate__gt=0)
        .order_by("-rate", "stream_id")
    )
    picked: list[tuple[int, float, bool]] = []
    # Internal streams are told by their key's bytes (no column says it), so the ranking is read in order
    # until enough application streams are found: at most every stream that added an entry in the span.
    for row in ranked.iterator(chunk_size=4 * OVERVIEW_ROWS):
        internal = is_internal_stream(bytes(row["stream__key"]))
        if internal and not include_internal:
            panel.internal_left_out += 1
            continue
        picked.append((row["stream_id"], row["rate"], internal))
        if len(picked) == OVERVIEW_ROWS:
            break
    mirrors = StreamMirror.objects.in_bulk([sid for sid, _, _ in picked])
    for sid, rate, internal in picked:
        m = mirrors[sid]
        chart = _chart(
            "stream", sid, "rate", title=m.key_text, window=window, now=now, unit="rate", size="spark"
        )
        panel.busiest.append(
            OverviewRow(m, chart, figure=rate, figure_label=format_value(rate, "rate"), internal=internal)
        )
    for m in StreamMirror.objects.filter(is_dlq=True, deleted_at__isnull=True).order_by(
        "-length", "key_text"
    )[:OVERVIEW_ROWS]:
        chart = _chart(
            "dlq", m.pk, "depth", title=m.key_text, window=window, now=now, size="spark", tone="bad"
        )
        panel.dlqs.append(OverviewRow(m, chart, figure=m.length, figure_label=format_value(m.length)))
    return panel
