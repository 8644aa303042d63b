"""The live tail page of one stream (DLQ streams included): a shell that ``static/js/tail.js`` fills.

The page opens the websocket ``/ws/c/<conn>/streams/<key>/tail/?after=<id>`` with ``after`` set so that
the newest ``BACKLOG`` entries are replayed first: the operator sees recent traffic at once, through
the same code path (replay, then live) that a reconnect uses.

The page keeps its state in its own address (``?filter=...&paused=1&after=<last id>&keep=...``), so a
reload or a shared link resumes the same view: the ``BACKLOG`` entries up to ``after`` are replayed
as context, then everything after it, once; ``paused`` holds the page at ``after`` until Resume.

The filter is search's language, evaluated by the websocket on the server (``?filter=`` on its URL,
:mod:`streams_app.views.tail_socket`); the page's help is the search box's own partial.
"""

from __future__ import annotations

from django import forms
from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from eventbus.search.query import MAX_QUERY
from eventbus.text import display_text
from streams_app.redis_ops.reads import entries as entry_reads
from streams_app.redis_ops.reads import streams as stream_reads
from streams_app.views import links
from streams_app.views.action_forms import EntryIdField
from streams_app.views.common import connection_context
from streams_app.views.forms import validated
from streams_app.views.presenters import dlq_convention

#: Entries already in the stream that the page shows when it opens.
BACKLOG = 50
#: Rows the page keeps, the choices of its "Keep" menu (the first default one is 500).
KEEP_CHOICES = (100, 500, 2000)
DEFAULT_KEEP = 500


class TailForm(forms.Form):
    """The page's address: what the script wrote there with ``history.replaceState``, or a shared link."""

    filter = forms.CharField(required=False, max_length=MAX_QUERY, strip=False)
    paused = forms.BooleanField(required=False)
    after = EntryIdField(required=False, allow_bare=True)  # the newest ID the page had shown
    keep = forms.TypedChoiceField(
        required=False, coerce=int, empty_value=DEFAULT_KEEP, choices=[(str(n), str(n)) for n in KEEP_CHOICES]  # type: ignore[arg-type]  # the field returns empty_value as it is; django-stubs want a str
    )


@require_GET
def tail(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    params = validated(TailForm, request.GET)  # a malformed after or keep is a 400 naming it
    context = connection_context(request, conn)
    exists = context["health"].ok and stream_reads.is_stream(conn, key)
    start_after, hold = "0-0", params["after"] or ""
    if exists:
        # The newest BACKLOG entries (up to ``after`` when the address has one) are replayed as context.
        newest = entry_reads.newest_ids(conn, key, count=BACKLOG + 1, at=params["after"] or None)
        if len(newest) > BACKLOG:
            start_after = newest[BACKLOG]  # exclusive: the replay starts with the BACKLOG newest
        if params["paused"] and not hold and newest:
            hold = newest[0]  # a paused link without a position holds at what is newest now
    stream_url = links.stream_url(conn, key)
    context.update(
        key=key,
        key_text=display_text(key),
        exists=exists,
        dlq=dlq_convention(key),
        stream_url=stream_url,
        ws_path="/ws" + stream_url + "tail/",
        start_after=start_after,
        hold=hold if params["paused"] else "",
        paused=params["paused"],
        filter_text=params["filter"],
        filter_max=MAX_QUERY,
        replay_max=settings.BUSCONSOLE_TAIL_REPLAY_MAX,
        keep_choices=KEEP_CHOICES,
        keep=params["keep"],
    )
    return render(request, "streams_app/tail.html", context)
