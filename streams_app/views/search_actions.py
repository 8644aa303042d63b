"""Search results feeding a bulk action on the DLQ page: "requeue the dead letters matching this".

The search's status line links to the confirm page (a GET: it counts what would move, up to the newest
dead letter now, and shows the POST button to the roles that may press it); the POST checks the role,
honours read-only mode, writes the audit row and starts the job (:mod:`streams_app.services.dlq_search`).
"""

from __future__ import annotations

from urllib.parse import urlencode

from django import forms
from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render
from django.views.decorators.http import require_GET

from streams_app import search
from streams_app.redis_ops.decoding import display_text
from streams_app.services.dlq_search import dlq_requeue_matching, dlq_requeue_matching_preview
from streams_app.views import links
from streams_app.views.action_forms import EntryIdField
from streams_app.views.actions import action_view
from streams_app.views.common import connection_context
from streams_app.views.forms import action_data, validated


class RequeueMatchingForm(forms.Form):
    """The search query (as typed) and, on the POST, the newest dead letter the count covered."""

    q = forms.CharField(max_length=search.MAX_QUERY, strip=False)
    up_to = EntryIdField(required=False)


def _dlq_page(conn: str, key: bytes) -> str:
    return links.dlq_url(conn, key)


@require_GET
def dlq_requeue_matching_confirm(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    """How many dead letters match the search (up to the newest now), and the button that requeues them."""
    context = connection_context(request, conn)
    data = validated(RequeueMatchingForm, request.GET)
    preview = dlq_requeue_matching_preview(user=request.user, conn=conn, key=key, query=data["q"])
    dlq_page = links.dlq_url(conn, key)
    context.update(
        key=key,
        key_text=display_text(key),
        preview=preview,
        confirm_url=dlq_page + "search/requeue/",
        back_url=f"{dlq_page}?{urlencode({'q': data['q']})}#search",
    )
    return render(request, "streams_app/search_requeue_confirm.html", context)


@action_view(_dlq_page)
def dlq_requeue_matching_start(request: HttpRequest, conn: str, key: bytes) -> str | HttpResponse:
    data = action_data(request, conn, "dlq.requeue_matching", RequeueMatchingForm, request.POST, key=key)
    if not data["up_to"]:
        return "Nothing to requeue: the DLQ was empty when it was counted."
    job = dlq_requeue_matching(user=request.user, conn=conn, key=key, query=data["q"], up_to=data["up_to"])
    messages.info(
        request, f"Requeueing the dead letters matching the search in the background (job {job.pk})."
    )
    return HttpResponseRedirect(links.job_url(job.pk))
