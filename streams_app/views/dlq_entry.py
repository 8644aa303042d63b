"""One dead letter's own page: the error and traceback, where it came from, its payload, its buttons.

Every DLQ convention the console knows is read by the one parser,
:func:`streams_app.redis_ops.conventions.parse_dlq_entry`, into the one :class:`DlqEntry`; this page
shows that and the payload a requeue would write back, decoded. Requeue and Delete post to the DLQ's
own action routes (operator and admin) and come back to the DLQ's list, since the entry has left.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from eventbus.conventions import DlqEntry
from eventbus.text import display_text
from streams_app import services
from streams_app.redis_ops import conventions
from streams_app.redis_ops.errors import InvalidArgument, NotFound, Unreachable
from streams_app.redis_ops.reads import entries as entry_reads
from streams_app.views import links
from streams_app.views.common import connection_context, render_screen
from streams_app.views.dlq import dlq_entry_view
from streams_app.views.masking import masking_context, request_masker


def origin_state(conn: str, entry: DlqEntry) -> str:
    """Whether the message the dead letter was made from is still in its stream: ``exists``,
    ``gone`` (trimmed, deleted, or the stream is gone), ``unknown`` (the entry does not say, or names
    something that is no stream ID) or ``unreachable`` (its node, on a cluster, did not answer)."""
    if not entry.original_stream or not entry.original_id:
        return "unknown"
    try:
        found = entry_reads.entry_exists(conn, entry.original_stream, entry.original_id)
    except InvalidArgument:
        return "unknown"
    except NotFound:
        return "gone"
    except Unreachable:
        return "unreachable"
    return "exists" if found else "gone"


@require_GET
def dlq_entry_detail(request: HttpRequest, conn: str, key: bytes, entry_id: str) -> HttpResponse:
    context = connection_context(request, conn)
    services.dlq_require(conn=conn, key=key)
    masker = request_masker(request, conn, key)
    shown = entry_reads.entry_get(conn, key, entry_id, mask=masker.entry)
    row = dlq_entry_view(conn, key, conventions.parse_dlq_entry(key, shown.id, shown.fields))
    origin = origin_state(conn, row.entry)
    dlq_page = links.dlq_url(conn, key)
    context.update(
        key=key,
        key_text=display_text(key),
        r=row,
        origin=origin,
        origin_entry_url=(
            links.entry_url(conn, row.entry.original_stream, row.entry.original_id)
            if origin == "exists" and row.entry.original_stream and row.entry.original_id
            else None
        ),
        dlq_page=dlq_page,
        # The buttons come back to the DLQ's list: a requeued or deleted entry has no page any more.
        back=dlq_page,
        **masking_context(request, masker, links.dlq_entry_url(conn, key, shown.id)),
    )
    masker.reveal_record()
    return render_screen(request, "streams_app/dlq_entry.html", context)
