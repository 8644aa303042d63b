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

from typing import Any

from django import template

from streams_app.alerts.evaluation import alerts_for_page, alerts_open
from streams_app.alerts.models import Alert
from streams_app.metrics import panels
from streams_app.metrics.charts import format_value, window_of
from streams_app.metrics.models import name_hash
from streams_app.views import links

register = template.Library()

#: How many open alerts the overview lists.
OVERVIEW_ALERTS = 10


def _window(context: template.Context) -> Any:
    request = context.get("request")
    return window_of(request.GET.get("window") if request is not None else None)


def _stream_alerts(conn: str, key: bytes) -> list[Alert]:
    """:func:`alerts_for_page` of a stream, asked only when an EXISTS on the page's index says there is
    one: most pages have no open alert, and the ORM compiles the probe in a third of the time it takes
    to compile the ordered join with the rules (a tenth of a stream page's own work, measured)."""
    if not Alert.objects.filter(connection=conn, key_hash=name_hash(key), state=Alert.State.OPEN).exists():
        return []
    return alerts_for_page(conn=conn, key=key)


def _group_name(group: Any) -> bytes:
    """The group page's context holds a GroupInfo (``.name``); accept raw bytes too."""
    return group if isinstance(group, bytes) else group.name


@register.inclusion_tag("streams_app/_chart_panel.html", takes_context=True)
def stream_charts(context: template.Context) -> dict[str, Any]:
    conn, key = context["conn"], context["key"]
    url = f"{links.stream_url(conn, key)}charts/"
    return {
        "panel": panels.stream_panel(conn=conn, key=key, window=_window(context), url=url),
        "alerts": _stream_alerts(conn, key),
    }


@register.inclusion_tag("streams_app/_chart_panel.html", takes_context=True)
def group_charts(context: template.Context) -> dict[str, Any]:
    conn, key, group = context["conn"], context["key"], _group_name(context["group"])
    url = f"{links.group_url(conn, key, group)}charts/"
    return {
        "panel": panels.group_panel(conn=conn, key=key, group=group, window=_window(context), url=url),
        "alerts": alerts_for_page(conn=conn, key=key, group=group),
    }


@register.inclusion_tag("streams_app/_chart_panel.html", takes_context=True)
def dlq_charts(context: template.Context) -> dict[str, Any]:
    conn, key = context["conn"], context["key"]
    url = f"{links.dlq_url(conn, key)}charts/"
    return {
        "panel": panels.dlq_panel(conn=conn, key=key, window=_window(context), url=url),
        "alerts": _stream_alerts(conn, key),
    }


def _include_internal(context: template.Context) -> bool:
    """``?internal=1``: the overview's "busiest" includes the bus's own streams (left out by default)."""
    request = context.get("request")
    return request is not None and request.GET.get("internal") == "1"


@register.inclusion_tag("streams_app/_overview_panel.html", takes_context=True)
def overview_charts(context: template.Context) -> dict[str, Any]:
    open_alerts, open_count = alerts_open(limit=OVERVIEW_ALERTS)
    return {
        "panel": panels.overview_panel(window=_window(context), url="/charts/overview/",
                                       include_internal=_include_internal(context)),
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
    return {"url": url}


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
