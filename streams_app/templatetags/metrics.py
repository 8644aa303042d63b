"""Chart panels, alert strips and handler metrics placed on existing pages with one tag each.

``{% load metrics %}`` then ``{% stream_charts %}``, ``{% group_charts %}``, ``{% dlq_charts %}`` or
``{% overview_charts %}``: each renders its panel server-side from the page's own context (``conn``,
``key``, ``group``), so the stream, group and DLQ views need no change and the charts are there
without JavaScript; htmx then refreshes the panel from its endpoint (``streams_app.views.charts``).
``{% handler_metrics %}`` leaves a placeholder that htmx fills on load, because reading the bus's
metrics stream costs a bounded but real Redis read that should not delay the page.
"""

from __future__ import annotations

from typing import Any

from django import template

from streams_app.metrics.charts import format_value, window_of
from streams_app.views import charts as chart_views
from streams_app.views import links

register = template.Library()


def _window(context: template.Context) -> Any:
    request = context.get("request")
    return window_of(request.GET.get("window") if request is not None else None)


def _group_name(group: Any) -> bytes:
    """The group page's context holds a GroupInfo (``.name``); accept raw bytes too."""
    return group if isinstance(group, bytes) else group.name


@register.inclusion_tag("streams_app/_chart_panel.html", takes_context=True)
def stream_charts(context: template.Context) -> dict[str, Any]:
    return {"panel": chart_views.stream_panel(conn=context["conn"], key=context["key"], window=_window(context))}


@register.inclusion_tag("streams_app/_chart_panel.html", takes_context=True)
def group_charts(context: template.Context) -> dict[str, Any]:
    panel = chart_views.group_panel(
        conn=context["conn"], key=context["key"], group=_group_name(context["group"]), window=_window(context)
    )
    return {"panel": panel}


@register.inclusion_tag("streams_app/_chart_panel.html", takes_context=True)
def dlq_charts(context: template.Context) -> dict[str, Any]:
    return {"panel": chart_views.dlq_panel(conn=context["conn"], key=context["key"], window=_window(context))}


@register.inclusion_tag("streams_app/_overview_panel.html", takes_context=True)
def overview_charts(context: template.Context) -> dict[str, Any]:
    return {
        "panel": chart_views.overview_panel(window=_window(context)),
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
