"""The live tail page of one stream (DLQ streams included): a shell that ``static/js/tail.js`` fills.

The page opens the websocket ``/ws/c/<conn>/streams/<key>/tail/?after=<id>`` with ``after`` set so that
the newest ``BACKLOG`` entries are replayed first: the operator sees recent traffic at once, through
the same code path (replay, then live) that a reconnect uses.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from streams_app.redis_ops import reads
from streams_app.redis_ops.decoding import display_text
from streams_app.views import links
from streams_app.views.common import connection_context
from streams_app.views.presenters import dlq_convention

#: Entries already in the stream that the page shows when it opens.
BACKLOG = 50


@require_GET
def tail(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    context = connection_context(request, conn)
    exists = context["health"].ok and reads.is_stream(conn, key)
    start_after = "0-0"
    if exists:
        newest = reads.entries_page(conn, key, order="desc", count=BACKLOG + 1).entries
        if len(newest) > BACKLOG:
            start_after = newest[BACKLOG].id  # exclusive: the replay starts with the BACKLOG newest
    stream_url = links.stream_url(conn, key)
    context.update(
        key=key,
        key_text=display_text(key),
        exists=exists,
        dlq=dlq_convention(key),
        stream_url=stream_url,
        ws_path="/ws" + stream_url + "tail/",
        start_after=start_after,
    )
    return render(request, "streams_app/tail.html", context)
