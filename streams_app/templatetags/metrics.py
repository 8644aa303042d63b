"""Chart panels, alert strips and handler metrics placed on existing pages with one tag each.

``{% load metrics %}`` then ``{% stream_charts %}``, ``{% group_charts %}``, ``{% dlq_charts %}`` or
``{% overview_charts %}``: each renders its panel server-side from the page's own context (``conn``,
``key``, ``group``), so the stream, group and DLQ views need no change and the charts are there
without JavaScript; htmx then refreshes the panel from its endpoint (``streams_app.views.charts``, whose
page uses these same tags). Each tag puts the charts (:mod:`streams_app.metrics.panels`) beside the
open alerts of what the page shows, and gives the panel the URL of its endpoint.
``{% handler_metrics %}`` leaves a placeholder that htmx fills on load, because reading the bus's
metrics stream costs a bounded but real Redis read that should not delay the page.
"""

from __future__ import annotations

import functools
from typing import Any

from django import template
from django.db import connections, router
from django.db.models import BooleanField, Value
from django.template import Context, Engine
from django.template.defaultfilters import date as date_filter
from django.utils.html import format_html, format_html_join
from django.utils.safestring import SafeString, mark_safe
from django.utils.timezone import template_localtime  # type: ignore[attr-defined]  # public in Django (the template engine imports it from here); django-stubs leave it out

from eventbus import keys as bus_keys
from eventbus.text import display_text
from streams_app.alerts.evaluation import alerts_for_page, alerts_open
from streams_app.alerts.models import Alert
from streams_app.metrics import panels
from streams_app.metrics.charts import format_value, window_of
from streams_app.metrics.models import StreamMirror, name_hash
from streams_app.perf.compiled import Compiled, compile_once
from streams_app.views import links

register = template.Library()

#: How many open alerts the overview lists.
OVERVIEW_ALERTS = 10


def _window(context: template.Context) -> Any:
    request = context.get("request")
    return window_of(request.GET.get("window") if request is not None else None)


# Values no page has: where the connection and the key's hash go in the compiled SQL.
_MARKERS = {"conn": "\x00connection\x00", "digest": "\x00key-hash\x00"}


@functools.cache
def _mirror_and_marker(alias: str) -> Compiled | None:
    """The query of :func:`_stream_mirror_and_alerts`, compiled once per database (see
    :mod:`streams_app.perf.compiled`: compiling this UNION cost twice what the two queries it replaces took
    to run, on every page). None when Django's compiler is not as expected: the two ORM queries run."""
    conn, digest = _MARKERS["conn"], _MARKERS["digest"]
    open_alerts = Alert.objects.using(alias).filter(connection=conn, key_hash=digest, state=Alert.State.OPEN)
    fields = StreamMirror._meta.concrete_fields
    mirror_side = (
        StreamMirror.objects.using(alias)
        .filter(connection=conn, key_hash=digest)
        .order_by()
        .annotate(open_alert=Value(False, output_field=BooleanField()))
        .values_list(*(f.attname for f in fields), "open_alert")
    )
    marker_side = open_alerts.order_by().values_list(
        *(Value(None, output_field=f) for f in fields), Value(True, output_field=BooleanField())
    )
    return compile_once(mirror_side.union(marker_side), _MARKERS, expect={"conn": 2, "digest": 2})


@functools.cache
def _mirror_converters(alias: str) -> list[tuple[int, list[Any], Any]]:
    """Per column of the mirror side of the compiled query that needs one, the backend's and the field's
    converters from database values, as ``raw()`` and every ORM read apply them (JSON, dates on SQLite)."""
    connection = connections[alias]
    out = []
    for pos, field in enumerate(StreamMirror._meta.concrete_fields):
        column = field.get_col(StreamMirror._meta.db_table)
        converters = connection.ops.get_db_converters(column) + column.get_db_converters(connection)
        if converters:
            out.append((pos, converters, column))
    return out


def _mirror_of_row(alias: str, row: tuple[Any, ...]) -> StreamMirror:
    """The mirror side of a row of the compiled query as the model, its values converted as an ORM read
    converts them (``Model.from_db``, the ORM's own way in, so the instance is as loaded from the database)."""
    values, connection = list(row[: len(StreamMirror._meta.concrete_fields)]), connections[alias]
    for pos, converters, column in _mirror_converters(alias):
        for converter in converters:
            values[pos] = converter(values[pos], column, connection)
    names = [f.attname for f in StreamMirror._meta.concrete_fields]
    return StreamMirror.from_db(alias, names, values)


def _stream_mirror_and_alerts(conn: str, key: bytes) -> tuple[StreamMirror | None, list[Alert]]:
    """The stream's mirror row (None without one) and its open alerts, in one query when it has none.

    Most pages have no open alert; a stream page asked for its mirror row and then probed the alert
    index, two round trips and two compiled queries for a page whose own work is a handful. Here the
    mirror row is UNIONed with a marker row per open alert (NULL columns, the flag set), which UNION
    folds into one: the mirror row comes back whether or not an alert is open, and the alerts with
    their rules are read only when the marker says there is one. Neither side assumes the other
    exists: an alert can outlive its stream's mirror row. The rows are read by a plain cursor and the
    mirror row, when there is one, made a model by :func:`_mirror_of_row` with the backend's
    converters: ``raw()`` spent longer setting itself up (columns, their order, converters for every
    column) than the query took to run, on every stream and DLQ page, and most often for no row at all.
    Without the compiled query (:mod:`streams_app.perf.compiled` found Django changed) the mirror row
    and the alerts are read by two plain ORM queries.
    """
    alias = router.db_for_read(StreamMirror)
    compiled = _mirror_and_marker(alias)
    if compiled is None:
        mirror = StreamMirror.objects.using(alias).filter(connection=conn, key_hash=name_hash(key)).first()
        return mirror, alerts_for_page(conn=conn, key=key)
    mirror, alerted = None, False
    with connections[alias].cursor() as cursor:
        cursor.execute(compiled.sql, compiled.args(conn=conn, digest=name_hash(key)))
        rows = cursor.fetchall()
    for row in rows:
        if row[-1]:  # the open_alert flag, the query's last column
            alerted = True
        else:
            mirror = _mirror_of_row(alias, row)
    return mirror, alerts_for_page(conn=conn, key=key) if alerted else []


def _group_name(group: Any) -> bytes:
    """The group page's context holds a GroupInfo (``.name``); accept raw bytes too."""
    return group if isinstance(group, bytes) else group.name


_ACTIVE = mark_safe(' class="active" aria-current="true"')  # a constant attribute of the shown window's link


@register.simple_tag
def window_links(panel: panels.Panel) -> SafeString:
    """The panel's window switch: a link per window (a real ``?window=`` link, and the panel's endpoint
    for htmx), the shown one marked. Built here, not by a template loop: some thirty template nodes on
    every stream, group and DLQ page for three links. Every value is escaped."""
    shown = panel.window.name
    return format_html_join(
        "",
        '<a href="?window={0}" hx-get="{1}?window={0}" hx-target="closest .chart-panel" hx-swap="outerHTML"{2}'
        ' title="The last {3}">{0}</a>',
        ((w.name, panel.url, _ACTIVE if w.name == shown else "", w.label) for w in panel.windows),
    )


_PANEL = """<section class="chart-panel" hx-get="{refresh}" hx-trigger="metrics-snapshot from:body" hx-swap="outerHTML" data-metrics-live>
  <div class="chart-head">
    <h2>{title}</h2>
    <nav class="window-switch" aria-label="Time window">{switch}</nav>
    {as_of}
  </div>
  {alerts}
  {note}
  {body}
</section>
"""
_ALERT = (
    '<li><span class="pill bad">alert</span> <strong>{rule}</strong>{target}: {message}'
    ' <span class="muted small">open since {since} UTC</span></li>'
)


def _when(value: Any, fmt: str) -> str:
    """What ``{{ value|date:fmt }}`` shows: the date filter, after the template's conversion to local time."""
    return date_filter(template_localtime(value), fmt)


def _alert_strip(alerts: list[Alert]) -> SafeString | str:
    if not alerts:
        return ""
    items = format_html_join(
        "",
        _ALERT,
        (
            {
                "rule": a.rule.name,
                "target": format_html(' · consumer <span class="mono">{}</span>', a.target_consumer)
                if a.target_consumer
                else format_html(' · group <span class="mono">{}</span>', a.target_group)
                if a.target_group
                else "",
                "message": a.message,
                "since": _when(a.opened_at, "M j, H:i"),
            }
            for a in alerts
        ),
    )
    return format_html('\n  <ul class="alert-strip" aria-label="Open alerts">\n    {}\n  </ul>\n  ', items)


def _panel_html(context: template.Context, panel: panels.Panel, alerts: list[Alert]) -> SafeString:
    """A panel of charts with its window switch and its open alerts, htmx-refreshed after each snapshot:
    the frame built here (it was an inclusion template on every stream, group and DLQ page), each chart
    and the annotations' list still drawn by their templates (``_chart.html``, ``_annotation_list.html``),
    in a context of their own values as the inclusion gave them. Every value is escaped."""
    engine = context.template.engine if context.template is not None else Engine.get_default()
    if panel.no_data:
        body: SafeString | str = mark_safe('<p class="chart-nodata">No data yet: snapshots start within a minute.</p>\n  ')
    else:
        chart = engine.get_template("streams_app/_chart.html")
        charts = mark_safe("".join(chart.render(Context({"chart": c})) for c in panel.charts))  # noqa: S308 - templates' output
        notes = (
            mark_safe(  # noqa: S308 - a template's output
                engine.get_template("streams_app/_annotation_list.html").render(
                    Context({"notes": panel.notes, "left_out": panel.notes_left_out})
                )
            )
            if panel.notes
            else ""
        )
        body = format_html('<div class="chart-grid">{}</div>\n  {}', charts, notes)
    return format_html(
        _PANEL,
        refresh=panel.refresh_url,
        title=panel.title,
        switch=window_links(panel),
        as_of=format_html('<span class="chart-asof">snapshot of {} UTC</span>', _when(panel.as_of, "H:i:s"))
        if panel.as_of
        else "",
        alerts=_alert_strip(alerts),
        note=format_html('<p class="muted small">{}</p>', panel.note) if panel.note else "",
        body=body,
    )


@register.simple_tag(takes_context=True)
def stream_charts(context: template.Context) -> SafeString:
    conn, key = context["conn"], context["key"]
    url = f"{links.stream_url(conn, key)}charts/"
    mirror, alerts = _stream_mirror_and_alerts(conn, key)
    panel = panels.stream_panel(conn=conn, key=key, window=_window(context), url=url, mirror=mirror)
    return _panel_html(context, panel, alerts)


@register.simple_tag(takes_context=True)
def group_charts(context: template.Context) -> SafeString:
    conn, key, group = context["conn"], context["key"], _group_name(context["group"])
    url = f"{links.group_url(conn, key, group)}charts/"
    panel = panels.group_panel(conn=conn, key=key, group=group, window=_window(context), url=url)
    return _panel_html(context, panel, alerts_for_page(conn=conn, key=key, group=group))


@register.simple_tag(takes_context=True)
def dlq_charts(context: template.Context) -> SafeString:
    conn, key = context["conn"], context["key"]
    url = f"{links.dlq_url(conn, key)}charts/"
    mirror, alerts = _stream_mirror_and_alerts(conn, key)
    panel = panels.dlq_panel(conn=conn, key=key, window=_window(context), url=url, mirror=mirror)
    return _panel_html(context, panel, alerts)


def _include_internal(context: template.Context) -> bool:
    """``?internal=1``: the overview's "busiest" includes the bus's own streams (left out by default)."""
    request = context.get("request")
    return request is not None and request.GET.get("internal") == "1"


@register.inclusion_tag("streams_app/_overview_panel.html", takes_context=True)
def overview_charts(context: template.Context) -> dict[str, Any]:
    open_alerts, open_count = alerts_open(limit=OVERVIEW_ALERTS)
    return {
        "panel": panels.overview_panel(
            window=_window(context), url="/charts/overview/", include_internal=_include_internal(context)
        ),
        "open_alerts": open_alerts,
        "open_count": open_count,
        "console_connections": context.get("console_connections", []),
    }


@register.inclusion_tag("streams_app/_handler_placeholder.html", takes_context=True)
def handler_metrics(context: template.Context) -> dict[str, Any]:
    conn, key = context["conn"], context["key"]
    group = context.get("group")
    if group is not None:
        url = f"{links.group_url(conn, key, _group_name(group))}handlers/"
    else:
        url = f"{links.stream_url(conn, key)}handlers/"
    # Where this stream's workers write their metrics (the panel also reads the old shared stream).
    return {"url": url, "metrics_key": display_text(bus_keys.metrics_key(key))}


@register.filter
def handler_ms(value: float | None) -> str:
    """A handler time: ``0.42 ms``, ``12.3 ms``, ``850 ms``, ``2.4 s``."""
    if value is None:
        return "—"
    if value >= 1000:
        return f"{value / 1000:.1f} s"
    if value >= 100:
        return f"{value:.0f} ms"
    if value >= 10:
        return f"{value:.1f} ms"
    return f"{value:.2f} ms"


@register.filter
def rate(value: float | None) -> str:
    """Events per second, to a readable precision."""
    return format_value(value, "count") if value else "0"
