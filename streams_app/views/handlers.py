"""Handler metrics of one stream or group, from the event bus's metric streams (its own and the old shared one).

Loaded by htmx into the stream and group pages (``{% handler_metrics %}`` leaves the placeholder) and
refreshed after each snapshot; a plain GET shows it as a page of its own. An unreachable server is
reported inside the panel, not as an error page, since the panel lives inside another page.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from eventbus import keys as bus_keys
from eventbus.text import display_text
from streams_app.redis_ops import client
from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.handler_metrics import DEFAULT_WINDOW, WINDOWS_S, handler_metrics
from streams_app.views import links
from streams_app.views.common import render_screen


def _panel(request: HttpRequest, conn: str, key: bytes, group: bytes | None) -> HttpResponse:
    client.connection(conn)  # 404 for a connection that is not configured
    window = request.GET.get("window")
    if window not in WINDOWS_S:
        window = DEFAULT_WINDOW
    url = f"{links.group_url(conn, key, group) if group is not None else links.stream_url(conn, key)}handlers/"
    context: dict = {
        "conn": conn, "key": key, "key_text": display_text(key),
        "group_text": display_text(group) if group is not None else None,
        "url": url, "window": window, "windows": list(WINDOWS_S),
        "metrics_key": display_text(bus_keys.metrics_key(key)),
        "back": url.removesuffix("handlers/"),
    }
    try:
        metrics = handler_metrics(conn, window_s=WINDOWS_S[window], stream=key)
    except OpsError as exc:
        context["error"] = exc.message
    else:
        context.update(metrics=metrics, rows=metrics.for_stream(key, group))
    return render_screen(request, "streams_app/handlers.html", context, partial="panel")


@require_GET
def stream_handlers(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    return _panel(request, conn, key, None)


@require_GET
def group_handlers(request: HttpRequest, conn: str, key: bytes, group: bytes) -> HttpResponse:
    return _panel(request, conn, key, group)
