"""The htmx endpoints of the chart panels on the overview, stream, group and DLQ pages.

A page shows its panel in place (``{% load metrics %}{% stream_charts %}``, so charts are there without
JavaScript) and htmx swaps the panel for a fresh one from the endpoints below: after each snapshot
(``metrics-snapshot``, raised by ``static/js/metrics.js`` from the channel-layer event, or by its 10 s
poll when the websocket is down) and when the 1 h / 24 h / 7 d switch is pressed. Each endpoint also
answers a plain GET with a whole page, so every ``hx-get`` keeps a real ``href``. That page draws its
panel with the same template tags as the pages it serves (``templates/streams_app/charts.html``), so a
panel is built in one place (:mod:`streams_app.templatetags.metrics`, from
:mod:`streams_app.metrics.panels`).
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from eventbus.text import display_text
from streams_app.redis_ops import client
from streams_app.views import links
from streams_app.views.common import render_screen


def _render_panel(request: HttpRequest, context: dict) -> HttpResponse:
    return render_screen(request, "streams_app/charts.html", context, partial="panel")


@require_GET
def stream_charts(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    client.connection(conn)  # 404 for a connection that is not configured
    return _render_panel(request, {"charts": "stream", "conn": conn, "key": key, "key_text": display_text(key),
                                   "back": links.stream_url(conn, key)})


@require_GET
def group_charts(request: HttpRequest, conn: str, key: bytes, group: bytes) -> HttpResponse:
    client.connection(conn)
    return _render_panel(request, {"charts": "group", "conn": conn, "key": key, "group": group,
                                   "key_text": display_text(key), "group_text": display_text(group),
                                   "back": links.group_url(conn, key, group)})


@require_GET
def dlq_charts(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    client.connection(conn)
    return _render_panel(request, {"charts": "dlq", "conn": conn, "key": key, "key_text": display_text(key),
                                   "back": links.dlq_url(conn, key)})


@require_GET
def overview_charts(request: HttpRequest) -> HttpResponse:
    return render_screen(request, "streams_app/charts.html", {"overview": True, "back": "/"}, partial="overview")
