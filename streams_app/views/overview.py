"""The overview: every configured Redis server, its health and a few facts, and each connection's largest
stream families as the newest snapshot stored them (at most :data:`OVERVIEW_FAMILIES` rows each, read from
the database: the page costs the same at a million keys as at ten thousand)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from streams_app.metrics import family_rows as stored
from streams_app.metrics.health import snapshot_health
from streams_app.redis_ops import client
from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.reads import server as server_reads
from streams_app.views.common import render_screen
from streams_app.views.families import stored_row

#: Families per connection the overview shows (most keys first); the families page has every one.
OVERVIEW_FAMILIES = 10


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
        families = stored.family_rows(connection.name, count=OVERVIEW_FAMILIES)
        servers.append({
            "connection": connection, "health": health, "facts": facts, "families": families,
            "family_rows": [stored_row(connection.name, f) for f in families.rows] if families else [],
        })
    context = {"servers": servers, "snapshots": snapshot_health()}  # skipped or late ticks get a notice
    return render_screen(request, "streams_app/overview.html", context, partial="servers")


def healthz(request: HttpRequest) -> HttpResponse:
    """Liveness for the container healthcheck: the process answers; Redis is not consulted."""
    return HttpResponse("ok", content_type="text/plain")
