"""One consumer group: its consumers and its pending entries (PEL)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from streams_app.redis_ops import reads
from streams_app.redis_ops.decoding import display_text
from streams_app.views.common import connection_context, render_screen
from streams_app.views.forms import PendingForm, validated


@require_GET
def group_detail(request: HttpRequest, conn: str, key: bytes, group: bytes) -> HttpResponse:
    context = connection_context(request, conn)
    params = validated(PendingForm, request.GET)
    info = reads.group_info(conn, key, group)
    consumer = params["consumer"].encode() if params["consumer"] else None
    pending = reads.pending_page(
        conn, key, group, consumer=consumer, min_idle_ms=params["min_idle_ms"],
        after=params["after"], count=params["count"],
    )
    context.update(
        key=key,
        key_text=display_text(key),
        group=info,
        group_text=display_text(group),
        consumers=reads.consumers(conn, key, group),
        pending=pending,
        params=params,
    )
    return render_screen(request, "streams_app/group.html", context, partial="pending")
