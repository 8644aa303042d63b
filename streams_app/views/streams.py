"""The streams of one connection: filter by glob, sort by length, page by SCAN cursor."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from streams_app.forms import StreamsForm, validated
from streams_app.presenters import dlq_convention
from streams_app.redis_ops import reads
from streams_app.views.common import connection_context, render_screen


@require_GET
def streams_list(request: HttpRequest, conn: str) -> HttpResponse:
    context = connection_context(request, conn)
    params = validated(StreamsForm, request.GET)
    match = params["match"].encode()
    if params["sort"] == "length":
        rows, seen, complete = reads.streams_by_length(
            conn, match=match, count=params["count"], offset=params["offset"]
        )
        next_cursor = None
        next_offset = params["offset"] + params["count"] if params["offset"] + len(rows) < seen else None
        context.update(sorted_among=seen, scan_complete=complete, next_offset=next_offset)
    else:
        page = reads.streams_scan(conn, match=match, cursor=params["cursor"], count=params["count"])
        rows, next_cursor = list(page.streams), page.next_cursor or None
    context.update(
        params=params,
        rows=[{"s": s, "dlq": dlq_convention(s.key)} for s in rows],
        next_cursor=next_cursor,
        scan_budget=settings.BUSCONSOLE_SCAN_BUDGET,
    )
    return render_screen(request, "streams_app/streams.html", context, partial="streams-table")
