"""A progress stream served as Server-Sent Events, resumable with ``Last-Event-ID``.

``GET /c/<conn>/progress/<key>/events/`` replays the stream's events after the client's
position and then follows it live until its terminal event (``done`` or ``error``), when the
response ends. Each SSE message carries the entry ID as ``id:``, so a browser's EventSource that
loses the connection reconnects with ``Last-Event-ID`` and receives exactly the events it missed.
``?after=<id>`` sets the first position; on a reconnect the header wins (EventSource repeats the
original URL). A client resuming after the terminal event gets 204, which tells EventSource to
stop reconnecting.

Payloads are the stream's data (JSON text for eventbus progress streams), masked as every other
output of entry bytes is (:mod:`streams_app.masking`), sent as ``data:`` lines. SSE is text, so other
bytes are replaced rather than passed through.
"""

from __future__ import annotations

import logging
import re
from collections.abc import AsyncIterator

from django.http import HttpRequest, HttpResponse, StreamingHttpResponse
from django.http.response import HttpResponseBase
from django.views.decorators.http import require_GET

from eventbus.progress import ProgressEvent
from streams_app.masking.apply import search_mask
from streams_app.redis_ops import progress
from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.ids import StreamId, parse_id
from streams_app.redis_ops.types import EntryMask

log = logging.getLogger(__name__)

#: Milliseconds a browser waits before reconnecting after the connection drops.
RECONNECT_MS = 3_000
_LINE_BREAKS = re.compile(r"\r\n|\r|\n")


@require_GET
def progress_events(request: HttpRequest, conn: str, key: bytes) -> HttpResponseBase:
    after = _resume_point(request)
    head = progress.progress_head(conn, key)
    if head.finished_by(after):
        return HttpResponse(status=204)
    # Masked as the API shows the same entries; a stream of events never reveals (as the tail does not).
    mask = search_mask(request.user, conn, key)
    response = StreamingHttpResponse(
        _messages(conn, key, after, mask), content_type="text/event-stream; charset=utf-8"
    )
    response["Cache-Control"] = "no-cache"
    response["X-Accel-Buffering"] = "no"  # nginx: pass each message on at once
    return response


def _resume_point(request: HttpRequest) -> StreamId:
    """``Last-Event-ID``, else ``?after=``, else the beginning; 400 when it is not an entry ID."""
    raw = request.headers.get("Last-Event-ID") or request.GET.get("after") or "0-0"
    return parse_id(raw, what="Last-Event-ID" if "Last-Event-ID" in request.headers else "after")


async def _messages(conn: str, key: bytes, after: StreamId, mask: EntryMask | None) -> AsyncIterator[bytes]:
    yield f"retry: {RECONNECT_MS}\n\n".encode()
    try:
        async for event in progress.progress_follow(conn, key, after=after, mask=mask):
            # An idle block: a comment line keeps proxies from timing out and lets the server
            # notice a client that has gone.
            yield b": keepalive\n\n" if event is None else sse_message(event)
    except OpsError as exc:
        # The response has started, so no error status can be sent: end it, and the browser
        # reconnects with Last-Event-ID once Redis is back.
        log.warning("progress stream %r on %s ended early: %s", key, conn, exc.message)


def sse_message(event: ProgressEvent) -> bytes:
    """One SSE message; data with line breaks becomes several ``data:`` lines, as the format wants."""
    name = _LINE_BREAKS.sub(" ", event.event) or "message"
    lines = [f"id: {event.id}", f"event: {name}"]
    lines += [f"data: {line}" for line in _LINE_BREAKS.split(event.data)]
    return ("\n".join(lines) + "\n\n").encode()
