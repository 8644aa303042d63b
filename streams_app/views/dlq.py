"""Dead-letter queues: the list of a connection's DLQs, and one DLQ's entries with their buttons."""

from __future__ import annotations

from dataclasses import dataclass

from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from eventbus.conventions import DlqEntry
from eventbus.decoding import DecodedField, decode_fields
from eventbus.text import display_text
from streams_app import services
from streams_app.masking.apply import search_mask
from streams_app.redis_ops import conventions
from streams_app.redis_ops.reads import dlq as dlq_reads
from streams_app.redis_ops.reads import streams as stream_reads
from streams_app.triage.counts import ShownDeadLetters
from streams_app.views import links
from streams_app.views.action_forms import DlqPageForm
from streams_app.views.actions import requeued_links_take
from streams_app.views.common import connection_context, is_htmx, render_screen
from streams_app.views.dlq_triage import filter_query, triage_context
from streams_app.views.forms import validated
from streams_app.views.masking import masking_context, request_masker
from streams_app.views.presenters import RowPreview, row_preview


@dataclass(frozen=True, slots=True)
class DlqEntryView:
    """One DLQ entry as its row shows it: the parsed facts and the payload a requeue writes back."""

    id: str
    entry: DlqEntry
    fields: list[DecodedField]
    preview: RowPreview  # the row's one line: the payload's type and start, masked as ``fields`` are
    url: str  # the raw entry on the stream page (all fields, raw downloads)
    original_stream_text: str | None
    original_stream_url: str | None


def dlq_entry_view(conn: str, key: bytes, entry: DlqEntry) -> DlqEntryView:
    stream = entry.original_stream
    return DlqEntryView(
        id=entry.id,
        entry=entry,
        fields=decode_fields(entry.payload_fields),
        preview=row_preview(entry.payload_fields),
        url=links.entry_url(conn, key, entry.id),
        original_stream_text=display_text(stream) if stream else None,
        original_stream_url=links.stream_url(conn, stream) if stream else None,
    )


@require_GET
def dlq_list(request: HttpRequest, conn: str) -> HttpResponse:
    context = connection_context(request, conn)
    # each DLQ's sample masked as anyone sees it: the convention and origin names read from it are shown
    listing = dlq_reads.dlq_list(conn, mask_for=lambda key: search_mask(None, conn, key))
    context.update(
        listing=listing,
        rows=[
            {
                "dlq": dlq,
                "key_text": display_text(dlq.key),
                "url": links.dlq_url(conn, dlq.key),
                "sources": [(display_text(s), links.stream_url(conn, s)) for s in dlq.source_streams],
            }
            for dlq in listing.dlqs
        ],
    )
    return render_screen(request, "streams_app/dlq_list.html", context)


@require_GET
def dlq_detail(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    context = connection_context(request, conn)
    params = validated(DlqPageForm, request.GET)
    kind = services.dlq_require(conn=conn, key=key)
    masker = request_masker(request, conn, key)
    shown = ShownDeadLetters(masker)  # a triage count's signature, •••• too for an error a rule removed
    info = stream_reads.stream_info(conn, key)
    entries, older = dlq_reads.dlq_entries(
        conn,
        key,
        before=params["before"],
        count=params["count"],
        error_contains=params["error"],
        where=shown.where(params["filter"]),  # a triage count's dead letters
        mask=shown.mask,
    )
    # Masked before the parse and the error filter: a rule on the error hides it and cannot be searched.
    rows = [dlq_entry_view(conn, key, entry) for entry in entries]
    context.update(
        key=key,
        key_text=display_text(key),
        kind=kind,
        convention=dlq_reads.dlq_convention_of(kind.convention, entries),
        info=info,
        params=params,
        rows=rows,
        older=older,
        # "Requeue all up to the newest entry on screen": entries dead-lettered after this page was
        # rendered have newer IDs and are never touched by that button.
        newest_on_screen=rows[0].id if rows else None,
        filtered=bool(params["error"] or params["filter"]),
        # the counts by signature, group and origin the page opens with (not on the entries' live refresh)
        triage=None if is_htmx(request) else triage_context(request, conn, key, before=params["triage_before"]),
        requeue_these_url=(
            f"{links.dlq_url(conn, key)}triage/requeue/confirm/?{filter_query(params['filter'])}"
            if params["filter"] else None
        ),
        sources=[
            (display_text(s), links.stream_url(conn, s)) for s in conventions.dlq_source_streams(key, entries)
        ],
        stream_page=links.stream_url(conn, key),
        api_url=links.api_dlq_url(conn, key),
        # Where the buttons come back to, filters kept (built from the key: request.path is decoded).
        here=links.with_query(links.dlq_url(conn, key), request),
        # The new entries of the requeue that just came back here, linked (the flash is text only).
        requeued=None if is_htmx(request) else requeued_links_take(request, conn, key),
        **masking_context(request, masker, links.dlq_url(conn, key)),
    )
    masker.reveal_record()
    return render_screen(request, "streams_app/dlq.html", context, partial="entries")
