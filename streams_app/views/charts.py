"""Chart panels of the overview, stream, group and DLQ pages, and their htmx endpoints.

A page shows its panel in place (``{% load metrics %}{% stream_charts %}``, so charts are there without
JavaScript) and htmx swaps the panel for a fresh one from the endpoints below: after each snapshot
(``metrics-snapshot``, raised by ``static/js/metrics.js`` from the channel-layer event, or by its 10 s
poll when the websocket is down) and when the 1 h / 24 h / 7 d switch is pressed. Each endpoint also
answers a plain GET with a whole page, so every ``hx-get`` keeps a real ``href``.

A page's (connection, key[, group]) is found in the mirror by the SHA-256 of the key (and group
name); with no mirror row yet the panel says that snapshots start within a minute.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime, timedelta

from django.db.models import Sum
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET

from streams_app.alerts import evaluation as alerts
from streams_app.alerts.models import Alert
from streams_app.metrics import snapshots
from streams_app.metrics.charts import WINDOWS, Chart, Unit, Window, chart_build, window_of
from streams_app.metrics.models import GroupMirror, SnapshotRun, StreamMirror, StreamSample, name_hash
from streams_app.redis_ops import client
from streams_app.redis_ops.decoding import display_text
from streams_app.views import links
from streams_app.views.common import render_screen

NO_DATA = "No data yet: snapshots start within a minute."
#: How many streams the overview charts (busiest, deepest DLQs) and open alerts it lists.
OVERVIEW_ROWS = 8
OVERVIEW_ALERTS = 10


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
    alerts: list[Alert] = field(default_factory=list)

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


def stream_mirror(conn: str, key: bytes) -> StreamMirror | None:
    return StreamMirror.objects.filter(connection=conn, key_hash=name_hash(key)).first()


def _deleted_note(mirror: StreamMirror) -> str:
    if mirror.deleted_at is None:
        return ""
    return f"This stream was last seen {mirror.deleted_at:%Y-%m-%d %H:%M} UTC; its history is kept."


def stream_panel(*, conn: str, key: bytes, window: Window) -> Panel:
    panel = Panel(title="Throughput and length", url=f"{links.stream_url(conn, key)}charts/", window=window,
                  alerts=alerts.alerts_for_page(conn=conn, key=key))
    mirror = stream_mirror(conn, key)
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


def group_panel(*, conn: str, key: bytes, group: bytes, window: Window) -> Panel:
    panel = Panel(title="Lag, pending and oldest pending", url=f"{links.group_url(conn, key, group)}charts/",
                  window=window, alerts=alerts.alerts_for_page(conn=conn, key=key, group=group))
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


def dlq_panel(*, conn: str, key: bytes, window: Window) -> Panel:
    panel = Panel(title="Depth", url=f"{links.dlq_url(conn, key)}charts/", window=window,
                  alerts=alerts.alerts_for_page(conn=conn, key=key))
    mirror = stream_mirror(conn, key)
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


@dataclass
class OverviewRow:
    mirror: StreamMirror
    url: str
    chart: Chart


@dataclass
class OverviewPanel:
    window: Window
    busiest: list[OverviewRow]
    dlqs: list[OverviewRow]
    open_alerts: list[Alert]
    open_count: int
    as_of: datetime | None
    no_data: bool
    url: str = "/charts/overview/"

    @property
    def windows(self) -> list[Window]:
        return list(WINDOWS.values())

    @property
    def refresh_url(self) -> str:
        return f"{self.url}?window={self.window.name}"


def overview_panel(*, window: Window) -> OverviewPanel:
    """The busiest streams (entries added over the last minute of snapshots), the deepest DLQs, open alerts.

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
            busiest.append(OverviewRow(m, links.stream_url(m.connection, m.key_bytes), chart))
        for m in StreamMirror.objects.filter(is_dlq=True, deleted_at__isnull=True).order_by("-length", "key_text")[:OVERVIEW_ROWS]:
            chart = _chart("dlq", m.pk, "depth", title=m.key_text, window=window, now=now, size="spark", tone="bad")
            dlqs.append(OverviewRow(m, links.dlq_url(m.connection, m.key_bytes), chart))
    open_alerts = Alert.objects.filter(state=Alert.State.OPEN).select_related("rule")
    return OverviewPanel(
        window=window,
        busiest=busiest,
        dlqs=dlqs,
        open_alerts=list(open_alerts.order_by("-opened_at")[:OVERVIEW_ALERTS]),
        open_count=open_alerts.count(),
        as_of=as_of,
        no_data=as_of is None,
    )


# ------------------------------------------------------------------------------------------- views


def _render_panel(request: HttpRequest, panel: Panel, context: dict) -> HttpResponse:
    return render_screen(request, "streams_app/charts.html", {"panel": panel, **context}, partial="panel")


@require_GET
def stream_charts(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    client.connection(conn)  # 404 for a connection that is not configured
    panel = stream_panel(conn=conn, key=key, window=window_of(request.GET.get("window")))
    return _render_panel(request, panel, {"conn": conn, "key": key, "key_text": display_text(key),
                                          "back": links.stream_url(conn, key)})


@require_GET
def group_charts(request: HttpRequest, conn: str, key: bytes, group: bytes) -> HttpResponse:
    client.connection(conn)
    panel = group_panel(conn=conn, key=key, group=group, window=window_of(request.GET.get("window")))
    return _render_panel(request, panel, {"conn": conn, "key": key, "key_text": display_text(key),
                                          "group_text": display_text(group), "back": links.group_url(conn, key, group)})


@require_GET
def dlq_charts(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    client.connection(conn)
    panel = dlq_panel(conn=conn, key=key, window=window_of(request.GET.get("window")))
    return _render_panel(request, panel, {"conn": conn, "key": key, "key_text": display_text(key),
                                          "back": links.dlq_url(conn, key)})


@require_GET
def overview_charts(request: HttpRequest) -> HttpResponse:
    panel = overview_panel(window=window_of(request.GET.get("window")))
    return render_screen(request, "streams_app/charts.html", {"overview": panel, "back": "/"}, partial="overview")
