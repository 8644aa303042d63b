"""What the incident timeline draws, read from what the console already keeps: the metric snapshots
(DLQ depth, lag and pending per group), the mirror (consumers holding entries and idle), the alerts,
the audit trail and the annotations. Nothing here reads Redis.

Every read is bounded before it runs: the window spans at most a week and is read at the finest
resolution whose retention reaches back (as the charts read it, then reduced to the chart's width), at
most :data:`DLQS_MAX` DLQs and :data:`GROUPS_MAX` groups (the deepest and busiest, as the mirror last
saw them), at most :data:`EVENTS_MAX` events of each kind (the newest); each cut is counted and the page
says "N of M".

Operator actions are shown by who, what, where and how it ended, never by their parameters: those hold
what people typed (a search expression, a filter) and are read on the audit page, under its own rules.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from typing import Any

from django.db.models import F, Q, QuerySet, Sum

from streams_app.alerts.models import FAMILY_KINDS, Alert
from streams_app.audit.models import AuditEvent
from streams_app.metrics import series as metric_series
from streams_app.metrics.charts import (
    Chart,
    Geometry,
    Mark,
    Note,
    chart_build,
    format_duration_ms,
    marks_place,
)
from streams_app.metrics.models import ConsumerMirror, DlqSample, GroupMirror, StreamMirror, name_hash
from streams_app.metrics.panels import LAST_WHAT, notes_in
from streams_app.timeline.window import TimeWindow

DLQS_MAX = 10
GROUPS_MAX = 6
EVENTS_MAX = 200
#: A consumer holding entries and idle this long is stuck (the default "entries stuck" alert's time).
STUCK_IDLE = timedelta(minutes=5)
#: The DLQ mirror rows looked at to find a stream's DLQs (by their origin streams).
DLQ_SCAN_MAX = 1000
#: A row of events: the charts' left and right margins, so that a time has the same x on both.
LANE = Geometry(width=900, height=30, left=48, right=12, top=5, bottom=5, max_points=0)

Points = list[tuple[datetime, float | None]]


@dataclass
class Lane:
    """One row of events on the axis: each a line (or a band) with its words."""

    kind: str
    title: str
    marks: tuple[Mark, ...]
    total: int

    @property
    def geometry(self) -> Geometry:
        return LANE


@dataclass(frozen=True)
class Event:
    """One line of the list under the axis."""

    at: datetime
    kind: str
    text: str


@dataclass
class GroupTrack:
    """One group's lag and pending: the samples read (``series``, by metric) and their charts."""

    stream: StreamMirror
    group: GroupMirror
    lag: Chart
    pending: Chart
    series: dict[str, Points] = field(default_factory=dict)


@dataclass
class Timeline:
    window: TimeWindow
    conn: str
    key: bytes | None
    dlqs: list[StreamMirror] = field(default_factory=list)
    dlqs_total: int = 0
    dlq_depth: Chart | None = None
    dlq_growth: Chart | None = None
    dlq_points: Points = field(default_factory=list)  # the shown DLQs' depth summed per snapshot
    growth_points: Points = field(default_factory=list)
    groups: list[GroupTrack] = field(default_factory=list)
    groups_total: int = 0
    lanes: list[Lane] = field(default_factory=list)
    events: list[Event] = field(default_factory=list)
    notes_left_out: int = 0


def _dlqs(conn: str, key: bytes | None) -> tuple[list[StreamMirror], int]:
    """The DLQs shown: a stream's own (the stream itself when it is one, and those whose dead letters
    come from it), or the connection's deepest; and how many there are."""
    rows = StreamMirror.objects.filter(connection=conn, is_dlq=True, deleted_at__isnull=True)
    if key is None:
        return list(rows.order_by("-length", "key_text")[:DLQS_MAX]), rows.count()
    text = StreamMirror.objects.filter(connection=conn, key_hash=name_hash(key)).values_list("key_text", flat=True).first()
    candidates = rows.order_by("-length", "key_text")[:DLQ_SCAN_MAX]
    mine = [m for m in candidates if m.key_bytes == key or (text is not None and text in (m.dlq_sources or []))]
    return mine[:DLQS_MAX], len(mine)


def _groups(conn: str, key: bytes | None) -> tuple[QuerySet[GroupMirror], int]:
    rows = GroupMirror.objects.filter(stream__connection=conn, deleted_at__isnull=True, stream__deleted_at__isnull=True)
    if key is not None:
        rows = rows.filter(stream__key_hash=name_hash(key))
    ordered = rows.select_related("stream").order_by(F("pending").desc(), F("lag").desc(nulls_last=True), "name_text")
    return ordered[:GROUPS_MAX], rows.count()


def _dlq_series(ids: Sequence[int], window: TimeWindow) -> Points:
    """The DLQs' depth summed per snapshot, at the resolution the charts would read."""
    resolution = metric_series.series_resolution(since=window.start)
    rows = (
        DlqSample.objects.filter(stream_id__in=ids, resolution=resolution, at__gte=window.start, at__lte=window.end)
        .values("at")
        .annotate(depth=Sum("depth"))
        .order_by("at")
    )
    return [(row["at"], float(row["depth"])) for row in rows]


def _growth(points: Points) -> Points:
    """The change of each point from the one before (the first has none to compare with)."""
    return [(t, None if v is None or p is None else v - p) for (_, p), (t, v) in zip(points, points[1:], strict=False)]


def _newest(rows: QuerySet, *, by: str) -> tuple[list, int]:
    """At most :data:`EVENTS_MAX` rows, the newest, oldest first; and how many there are."""
    picked = list(rows.order_by(f"-{by}", "-pk")[: EVENTS_MAX + 1])
    total = rows.count() if len(picked) > EVENTS_MAX else len(picked)
    return list(reversed(picked[:EVENTS_MAX])), total


def _alerts(conn: str, keys: Sequence[bytes], window: TimeWindow) -> tuple[list[Alert], int]:
    rows = Alert.objects.filter(connection=conn, opened_at__lte=window.end).filter(
        Q(resolved_at__isnull=True) | Q(resolved_at__gte=window.start)
    )
    if keys:
        rows = rows.filter(key_hash__in=[name_hash(k) for k in keys])
    return _newest(rows.select_related("rule"), by="opened_at")


def _actions(conn: str, keys: Sequence[bytes], window: TimeWindow) -> tuple[list[AuditEvent], int]:
    """Actions taken on the connection (on the streams ``keys``) in the window: the changes, not the
    previews and counts that change nothing, nor the annotations' own rows (the annotations are shown)."""
    rows = (
        AuditEvent.objects.filter(connection=conn, at__gte=window.start, at__lte=window.end)
        .exclude(action__endswith=".preview")
        .exclude(action__endswith=".count")
        .exclude(action="annotation.create")
    )
    if keys:
        rows = rows.filter(target_stream__in=list(keys))
    return _newest(rows, by="at")


def _stuck(groups: Sequence[GroupMirror], window: TimeWindow) -> list[tuple[ConsumerMirror, datetime, datetime]]:
    """Consumers of ``groups`` holding entries and idle at least :data:`STUCK_IDLE` when the mirror last
    saw them: idle since (last seen - idle) until then. The mirror keeps the latest state only, so a
    consumer that was stuck and recovered before the last sync is not known here (its group's longest
    pending idle, in the snapshots, is)."""
    rows = ConsumerMirror.objects.filter(
        group__in=list(groups), deleted_at__isnull=True, pending__gt=0, idle_ms__gte=STUCK_IDLE.total_seconds() * 1000
    ).select_related("group").order_by("-idle_ms")[:EVENTS_MAX]
    found = []
    for c in rows:
        since = c.last_seen - timedelta(milliseconds=c.idle_ms)
        if since <= window.end and c.last_seen >= window.start:
            found.append((c, since, c.last_seen))
    return found


def _chart(points: Sequence[tuple[datetime, float | None]], title: str, window: TimeWindow, notes: Sequence[Note],
           *, tone: str = "accent", unit: str = "count") -> Chart:
    resolution = metric_series.series_resolution(since=window.start)
    return chart_build(points, title=title, window=window.chart_window, end=window.end, size="wide", tone=tone,
                       unit=unit, notes=notes, last_what=LAST_WHAT.get(resolution, LAST_WHAT["raw"]),  # type: ignore[arg-type]  # tone and unit are the chart's literal names, checked by chart_build at run time
                       empty_text="no snapshots in this window")


def _who(event: AuditEvent) -> str:
    return event.username or "the console"


def timeline_build(*, conn: str, key: bytes | None, window: TimeWindow) -> Timeline:
    """The timeline of ``conn`` (of its stream ``key``) over ``window``."""
    line = Timeline(window=window, conn=conn, key=key)
    line.dlqs, line.dlqs_total = _dlqs(conn, key)
    keys = [key, *(m.key_bytes for m in line.dlqs)] if key is not None else []
    notes, line.notes_left_out = notes_in(
        conn=conn, keys=keys if key is not None else None, start=window.start, end=window.end, limit=EVENTS_MAX
    )

    line.dlq_points = _dlq_series([m.pk for m in line.dlqs], window) if line.dlqs else []
    line.growth_points = _growth(line.dlq_points)
    line.dlq_depth = _chart(line.dlq_points, "DLQ depth (dead letters waiting)", window, notes, tone="bad")
    line.dlq_growth = _chart(line.growth_points, "DLQ growth (change since the previous snapshot)", window, notes,
                             tone="warn")

    groups, line.groups_total = _groups(conn, key)
    for g in groups:
        series = {m: metric_series.series(kind="group", obj_id=g.pk, metric=m, since=window.start, until=window.end)
                  for m in ("lag", "pending")}
        line.groups.append(GroupTrack(
            stream=g.stream, group=g,
            lag=_chart(series["lag"], f"Lag · {g.name_text}", window, notes, tone="warn"),
            pending=_chart(series["pending"], f"Pending · {g.name_text}", window, notes),
            series=series,
        ))

    stuck = _stuck([t.group for t in line.groups], window)
    alerts, alerts_total = _alerts(conn, keys, window)
    actions, actions_total = _actions(conn, keys, window)
    stuck_notes = [Note(at=since, end=until, ident=c.pk, text=(
        f"consumer {c.name_text} of {c.group.name_text} holds {c.pending} pending, idle {format_duration_ms(c.idle_ms)} "
        f"when last seen")) for c, since, until in stuck]
    alert_notes = [Note(at=a.opened_at, end=a.resolved_at or window.end, ident=a.pk,
                        text=f"alert {a.rule.name} ({a.state}) on {_alert_target(a)}: {a.message}") for a in alerts]
    action_notes = [Note(at=e.at, end=e.at, ident=e.pk, text=_action_text(e)) for e in actions]
    place: dict[str, Any] = {"start": window.start, "end": window.end, "geo": LANE}
    line.lanes = [
        Lane("stuck", "Stuck consumers", marks_place(stuck_notes, **place), len(stuck_notes)),
        Lane("alerts", "Alerts", marks_place(alert_notes, **place), alerts_total),
        Lane("actions", "Operator actions", marks_place(action_notes, **place), actions_total),
        Lane("annotations", "Annotations", marks_place(notes, **place), len(notes) + line.notes_left_out),
    ]

    events = [Event(n.at, "annotation", n.text + (f" [{', '.join(n.tags)}]" if n.tags else "")) for n in notes]
    events += [Event(e.at, "action", n.text) for e, n in zip(actions, action_notes, strict=True)]
    events += [Event(a.opened_at, "alert opened", n.text) for a, n in zip(alerts, alert_notes, strict=True)]
    events += [Event(a.resolved_at, "alert resolved", f"alert {a.rule.name} on {_alert_target(a)} resolved")
               for a in alerts if a.resolved_at is not None and window.start <= a.resolved_at <= window.end]
    events += [Event(since, "stuck", n.text) for (_, since, _), n in zip(stuck, stuck_notes, strict=True)]
    line.events = sorted((e for e in events if e.at <= window.end), key=lambda e: e.at)
    return line


def _alert_target(alert: Alert) -> str:
    parts = [f"family {alert.target_text}" if alert.rule.kind in FAMILY_KINDS else alert.target_text]
    if alert.target_group:
        parts.append(f"group {alert.target_group}")
    if alert.target_consumer:
        parts.append(f"consumer {alert.target_consumer}")
    return " · ".join(parts)


def _action_text(event: AuditEvent) -> str:
    where = event.target_display or ""
    if event.target_group:
        where += f" · group {event.target_group}"
    ids = len(event.target_ids or [])
    count = event.parameters.get("ids_count", ids) if isinstance(event.parameters, dict) else ids
    detail = f", {count} ID{'s' if count != 1 else ''} named" if count else ""
    return f"{_who(event)}: {event.action}{' on ' + where if where else ''} ({event.outcome}, {event.affected} changed{detail})"
