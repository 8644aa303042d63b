"""Small helpers the screen modules share."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render

from streams_app.redis_ops import client


def is_htmx(request: HttpRequest) -> bool:
    return request.headers.get("HX-Request") == "true" and request.headers.get("HX-History-Restore-Request") != "true"


def render_screen(
    request: HttpRequest, template: str, context: dict, *, partial: str | None = None, status: int = 200
) -> HttpResponse:
    """The whole page, or only ``partial`` of it when htmx asks (django-htmx's pattern)."""
    if partial and is_htmx(request):
        template = f"{template}#{partial}"
    return render(request, template, context, status=status)


def connection_context(request: HttpRequest, conn: str) -> dict:
    """Checks that ``conn`` is configured (404 otherwise) and reports its health for the banner."""
    request.console_conn = conn  # type: ignore[attr-defined]  # the error middleware reads it back (getattr) to name the connection
    return {"conn": conn, "connection": client.connection(conn), "health": client.health(conn)}
