"""One consumer group: its consumers (one ranked page of them) and its pending entries (PEL).

A claim or an ack that is refused (the confirmation box not ticked, a bad consumer name, an error from
Redis) returns to this page with the entries it named still ticked: :func:`selection_kept` leaves them
in the session, the page takes them once. Without it the operator, told to tick the box, found the
selection gone. The session rather than the address: a selection may name 1,000 IDs.
"""

from __future__ import annotations

import time
from collections.abc import Iterator
from contextlib import contextmanager

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from eventbus.text import display_text
from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.reads import groups as group_reads
from streams_app.redis_ops.reads import pending as pending_reads
from streams_app.views import links
from streams_app.views.common import connection_context, is_htmx, render_screen
from streams_app.views.forms import PendingForm, validated
from streams_app.views.masking import masking_context, request_masker
from streams_app.views.paging import ranked_window, ranking
from streams_app.views.presenters import pending_previews

#: Up to this many consumers with pending entries, the pending filter is a list to pick from; beyond
#: it, a text field (a select of 10,000 names alone weighs hundreds of kilobytes).
CONSUMER_CHOICES = 100

#: Session key of a refused claim's or ack's selection, and how long it is worth ticking again: it
#: belongs to the redirect right after the refusal.
KEPT_SELECTION_KEY = "busconsole.pending-selection"
KEPT_SELECTION_FRESH_S = 120
#: IDs kept at most (a form names at most this many: ``action_forms.MAX_SELECTION``), each of at most
#: this many characters (an entry ID is at most 41): what a hostile post can leave in the session.
KEPT_SELECTION_MAX, KEPT_ID_MAX = 1000, 48


@contextmanager
def selection_kept(request: HttpRequest, conn: str, key: bytes, group: bytes) -> Iterator[None]:
    """Around a claim or ack: when it is refused (OpsError), keep the posted ``ids`` for the group page."""
    try:
        yield
    except OpsError:
        ids = [i for i in request.POST.getlist("ids")[:KEPT_SELECTION_MAX] if len(i) <= KEPT_ID_MAX]
        request.session[KEPT_SELECTION_KEY] = {"page": links.group_url(conn, key, group), "at": time.time(), "ids": ids}
        raise


def _kept_selection(request: HttpRequest, conn: str, key: bytes, group: bytes) -> frozenset[str]:
    """The IDs :func:`selection_kept` left for this group's page, once, while fresh."""
    kept = request.session.pop(KEPT_SELECTION_KEY, None)
    if not isinstance(kept, dict) or kept.get("page") != links.group_url(conn, key, group):
        return frozenset()
    if time.time() - float(kept.get("at", 0)) > KEPT_SELECTION_FRESH_S:
        return frozenset()
    return frozenset(i for i in kept.get("ids", ()) if isinstance(i, str))


@require_GET
def group_detail(request: HttpRequest, conn: str, key: bytes, group: bytes) -> HttpResponse:
    context = connection_context(request, conn)
    params = validated(PendingForm, request.GET)
    masker = request_masker(request, conn, key)
    rank = ranking(request.GET, sorts=group_reads.CONSUMER_SORTS)
    info = group_reads.group_info(conn, key, group)
    consumer = params["consumer"].encode() if params["consumer"] else None
    # Each row's message comes with the existence check's read (one pipeline), masked for this reader.
    pending, messages = pending_reads.pending_page_messages(
        conn, key, group, consumer=consumer, min_idle_ms=params["min_idle_ms"],
        after=params["after"], count=params["count"], mask=masker.entry,
    )
    context.update(
        key=key,
        key_text=display_text(key),
        group=info,
        group_text=display_text(group),
        # The live refresh re-renders the pending section only: no need to read every consumer for it.
        consumers=None if is_htmx(request) else ranked_window(
            group_reads.consumers(conn, key, group), rank, sorts=group_reads.CONSUMER_SORTS
        ),
        consumer_choices=len(pending.summary.consumers) <= CONSUMER_CHOICES,
        pending=pending,
        # What each row's message holds: its type and the start of its payload, masked, or "deleted".
        pending_rows=list(zip(pending.entries, pending_previews(messages), strict=True)),
        params=params,
        # A live refresh never runs while a box is ticked, so only the whole page takes the selection.
        kept_selection=frozenset() if is_htmx(request) else _kept_selection(request, conn, key, group),
        here=links.with_query(links.group_url(conn, key, group), request),
        **masking_context(request, masker, links.group_url(conn, key, group)),
    )
    masker.reveal_record()
    return render_screen(request, "streams_app/group.html", context, partial="pending")
