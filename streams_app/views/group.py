"""One consumer group: its consumers (one ranked page of them) and its pending entries (PEL)."""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from streams_app.redis_ops import reads
from streams_app.redis_ops.decoding import display_text
from streams_app.views import links
from streams_app.views.common import connection_context, is_htmx, render_screen
from streams_app.views.forms import PendingForm, validated
from streams_app.views.masking import masking_context, request_masker
from streams_app.views.paging import ranked_window, ranking
from streams_app.views.presenters import pending_previews

#: Up to this many consumers with pending entries, the pending filter is a list to pick from; beyond
#: it, a text field (a select of 10,000 names alone weighs hundreds of kilobytes).
CONSUMER_CHOICES = 100


@require_GET
def group_detail(request: HttpRequest, conn: str, key: bytes, group: bytes) -> HttpResponse:
    context = connection_context(request, conn)
    params = validated(PendingForm, request.GET)
    masker = request_masker(request, conn, key)
    rank = ranking(request.GET, sorts=reads.CONSUMER_SORTS)
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
        # The live refresh re-renders the pending section only: no need to read every consumer for it.
        consumers=None if is_htmx(request) else ranked_window(
            reads.consumers(conn, key, group), rank, sorts=reads.CONSUMER_SORTS
        ),
        consumer_choices=len(pending.summary.consumers) <= CONSUMER_CHOICES,
        pending=pending,
        # The message of each row (its type, or the start of its payload): one pipelined read per page.
        pending_rows=list(zip(pending.entries, pending_previews(conn, key, pending.entries, masker=masker), strict=True)),
        params=params,
        here=links.with_query(links.group_url(conn, key, group), request),
        **masking_context(request, masker, links.group_url(conn, key, group)),
    )
    masker.reveal_record()
    return render_screen(request, "streams_app/group.html", context, partial="pending")
