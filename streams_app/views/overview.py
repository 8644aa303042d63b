"""The overview: every configured Redis server, its health and a few facts."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from streams_app.metrics.health import snapshot_health
from streams_app.redis_ops import client
from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.reads import server as server_reads
from streams_app.views.common import render_screen


@require_GET
def overview(request: HttpRequest) -> HttpResponse:
    servers = []
    for connection in client.connections():
        health = client.health(connection.name)
        facts: server_reads.ServerOverview | None = None
        if health.ok:
            try:
                facts = server_reads.server_overview(connection.name)
            except OpsError as exc:
                health = client.Health(name=connection.name, ok=False, redis_version=None, error=exc.message)
        servers.append({"connection": connection, "health": health, "facts": facts})
    context = {"servers": servers, "snapshots": snapshot_health()}  # skipped or late ticks get a notice
    return render_screen(request, "streams_app/overview.html", context, partial="servers")


def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness for the container healthcheck: the process answers; Redis is not consulted."""
    return HttpResponse("ok", content_type="text/plain")
