"""One stream: its facts, groups (one ranked page of them) and entries (newest first, paged by exclusive
cursors)."""

from __future__ import annotations

import json

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET

from eventbus.decoding import decode_value
from eventbus.text import display_text
from streams_app.accounts.roles import Role, role_of
from streams_app.redis_ops import conventions
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.reads import entries as entry_reads
from streams_app.redis_ops.reads import groups as group_reads
from streams_app.redis_ops.reads import pending as pending_reads
from streams_app.views import links
from streams_app.views.common import connection_context, is_htmx, render_screen
from streams_app.views.forms import entries_params
from streams_app.views.masking import masking_context, request_masker
from streams_app.views.paging import ranked_window, ranking
from streams_app.views.presenters import dlq_convention, entry_view, entry_views


@require_GET
def stream_detail(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    context = connection_context(request, conn)
    params = entries_params(request.GET)
    masker = request_masker(request, conn, key)
    # The live refresh re-renders the entries section only: the stream's facts, its groups (a thousand
    # of them are parsed and ranked) and its DLQs are read for the whole page, not for every new entry.
    # The whole page reads them with its entries in one round trip.
    where = {k: params[k] for k in ("order", "after", "before", "at", "count")}
    if is_htmx(request):
        page = entry_reads.entries_page(conn, key, **where, mask=masker.entry)
    else:
        # The groups' own parameters are prefixed: the entries already take ``order``.
        groups_rank = ranking(request.GET, sorts=group_reads.GROUP_SORTS, prefix="groups")
        # The DLQ may live on another node of a cluster: one that does not answer is named, not fatal.
        page, (info, dlq_keys, dlq_missed) = entry_reads.entries_page_with_facts(conn, key, **where, mask=masker.entry)
        context.update(
            info=info,
            groups=ranked_window(info.groups, groups_rank, sorts=group_reads.GROUP_SORTS),
            dlq=dlq_convention(key),
            dlq_missed=dlq_missed,
            dead_letters=[
                {"text": display_text(k), "page": links.dlq_url(conn, k), "stream": links.stream_url(conn, k)}
                for k in dlq_keys
            ],
            api_url=links.api_stream_url(conn, key),
        )
    stream_page = links.stream_url(conn, key)  # the page's own address: its links and forms start with it
    context.update(
        key=key,
        key_text=display_text(key),
        params=params,
        page=page,
        entries=entry_views(conn, key, page.entries),
        # Ticking entries for the delete form; decided once here, not once per row in the template.
        entries_selectable=role_of(request.user) >= Role.ADMIN and not settings.BUSCONSOLE_READ_ONLY,
        stream_page=stream_page,
        here=links.with_query(stream_page, request),
        **masking_context(request, masker, stream_page),
    )
    masker.reveal_record()
    return render_screen(request, "streams_app/stream.html", context, partial="entries")


@require_GET
def entry_detail(request: HttpRequest, conn: str, key: bytes, entry_id: str) -> HttpResponse:
    """One entry: its fields decoded, the groups that have it pending (consumer, idle, deliveries), copy
    buttons for its ID and payload and, when the stream is a DLQ, the way to the dead letter's own page."""
    context = connection_context(request, conn)
    masker = request_masker(request, conn, key)
    entry = entry_reads.entry_get(conn, key, entry_id, mask=masker.entry)
    groups = group_reads.groups(conn, key)
    pending = pending_reads.entry_pending(conn, key, entry.id, [g.name for g in groups])
    context.update(
        key=key,
        key_text=display_text(key),
        e=entry_view(conn, key, entry),
        group_count=len(groups),
        pending=[
            {
                "group": display_text(p.group),
                "group_url": links.group_url(conn, key, p.group),
                "consumer": display_text(p.consumer),
                "idle_ms": p.idle_ms,
                "deliveries": p.deliveries,
            }
            for p in pending
        ],
        # What "Copy payload" copies: the fields as stored, one JSON object of texts (bytes that are not
        # UTF-8 as \xNN), so a JSON value comes out exactly as the producer wrote it.
        payload_json=json.dumps(
            {display_text(name): display_text(value) for name, value in entry.fields}, ensure_ascii=False, indent=2
        ),
        dead_letter_url=links.dlq_entry_url(conn, key, entry.id) if conventions.detect_dlq(key) else None,
        **masking_context(request, masker, links.entry_url(conn, key, entry.id)),
    )
    masker.reveal_record()
    return render_screen(request, "streams_app/entry.html", context)


@require_GET
def entry_raw(request: HttpRequest, conn: str, key: bytes, entry_id: str) -> HttpResponse:
    """One field's value as it is stored, as a download (big values are only previewed on pages)."""
    connection_context(request, conn)
    try:
        index = int(request.GET.get("field", ""))
    except ValueError:
        raise InvalidArgument("field must be the index of a field of the entry.") from None
    # The masked entry, as the page that links here shows it (a removed field shifts the indexes with it).
    masker = request_masker(request, conn, key)
    entry = entry_reads.entry_get(conn, key, entry_id, mask=masker.entry)
    if not 0 <= index < len(entry.fields):
        raise InvalidArgument(f"This entry has {len(entry.fields)} fields; there is no field {index}.")
    name, value = entry.fields[index]
    masker.reveal_record()
    response = HttpResponse(value, content_type="application/octet-stream")
    filename = f"{entry_id}-{index}.bin"
    response["Content-Disposition"] = f'attachment; filename="{filename}"'
    response["X-Content-Type-Options"] = "nosniff"
    response["X-Field-Format"] = decode_value(value[:4096]).format
    return response
