"""Search results feeding bulk actions: "requeue the dead letters matching this" on the DLQ page,
"replay the entries matching this" on the stream page, "ack the pending entries matching this" on the
group page.

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

from eventbus.search.query import MAX_QUERY
from eventbus.text import display_text
from streams_app.services.dlq_search import dlq_requeue_matching, dlq_requeue_matching_preview
from streams_app.services.pending_search import pending_ack_matching, pending_ack_matching_preview
from streams_app.services.replay import stream_replay, stream_replay_matching_count
from streams_app.views import links
from streams_app.views.action_forms import EntryIdField, NameField, PositionField
from streams_app.views.actions import action_view
from streams_app.views.common import connection_context
from streams_app.views.forms import action_data, validated


class RequeueMatchingForm(forms.Form):
    """The search query (as typed) and, on the POST, the newest dead letter the count covered."""

    q = forms.CharField(max_length=MAX_QUERY, strip=False)
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


# ------------------------------------------------------------------- replay the entries matching this


class ReplayMatchingForm(forms.Form):
    """The search query and the range searched (default: the whole stream); on the POST, the exact
    IDs the count resolved and the target stream (default: the same stream)."""

    q = forms.CharField(max_length=MAX_QUERY, strip=False)
    start = PositionField(required=False, specials=("-", "0"))
    end = PositionField(required=False, specials=("+", "$"))
    target = NameField(required=False)


def _stream_page(conn: str, key: bytes) -> str:
    return links.stream_url(conn, key)


def _search_back(page: str, data: dict) -> str:
    values = {"q": data["q"], "from": data.get("start"), "to": data.get("end")}
    return f"{page}?{urlencode({k: v for k, v in values.items() if v})}#search"


@require_GET
def stream_replay_matching_confirm(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    """How many entries of the range match the search, and the form that replays exactly them."""
    context = connection_context(request, conn)
    data = validated(ReplayMatchingForm, request.GET)
    preview = stream_replay_matching_count(
        user=request.user, conn=conn, key=key, query=data["q"], start=data["start"], end=data["end"]
    )
    page = links.stream_url(conn, key)
    context.update(
        key=key,
        key_text=display_text(key),
        preview=preview,
        confirm_url=page + "search/replay/",
        back_url=_search_back(page, data),
    )
    return render(request, "streams_app/search_replay_confirm.html", context)


@action_view(_stream_page)
def stream_replay_matching_start(request: HttpRequest, conn: str, key: bytes) -> str | HttpResponse:
    data = action_data(request, conn, "replay", ReplayMatchingForm, request.POST, key=key)
    if not data["start"] or not data["end"]:
        return "Nothing to replay: the range was not counted."
    job = stream_replay(
        user=request.user, conn=conn, key=key, start=data["start"], end=data["end"], target=data["target"],
        query=data["q"],
    )  # fmt: skip
    messages.info(request, f"Replaying the entries matching the search in the background (job {job.pk}).")
    return HttpResponseRedirect(links.job_url(job.pk))


# ------------------------------------------------------------ ack the pending entries matching this


class AckMatchingForm(RequeueMatchingForm):
    """The search query and, on the POST, the highest pending ID the count covered."""


def _group_page(conn: str, key: bytes, group: bytes) -> str:
    return links.group_url(conn, key, group)


@require_GET
def group_ack_matching_confirm(request: HttpRequest, conn: str, key: bytes, group: bytes) -> HttpResponse:
    """How many of the group's pending entries match the search, and the button that acks them."""
    context = connection_context(request, conn)
    data = validated(AckMatchingForm, request.GET)
    preview = pending_ack_matching_preview(
        user=request.user, conn=conn, key=key, group=group, query=data["q"]
    )
    page = links.group_url(conn, key, group)
    context.update(
        key=key,
        key_text=display_text(key),
        group=group,
        group_text=display_text(group),
        preview=preview,
        confirm_url=page + "search/ack/",
        back_url=page + "#pending",
    )
    return render(request, "streams_app/search_ack_confirm.html", context)


@action_view(_group_page)
def group_ack_matching_start(request: HttpRequest, conn: str, key: bytes, group: bytes) -> str:
    data = action_data(request, conn, "ack", AckMatchingForm, request.POST, key=key, group=group)
    if not data["up_to"]:
        return "Nothing to acknowledge: nothing was pending when it was counted."
    result = pending_ack_matching(
        user=request.user, conn=conn, key=key, group=group, query=data["q"], up_to=data["up_to"]
    )
    text = (
        f"Acknowledged {result.acked} pending entr{'y' if result.acked == 1 else 'ies'} matching the search."
    )
    if result.matched > result.acked:
        text += f" {result.matched - result.acked} were no longer pending."
    if result.too_costly:
        text += (
            f" {result.too_costly} entr{'y' if result.too_costly == 1 else 'ies'} too costly to evaluate (their"
            " data makes the expression too costly) were left pending."
        )
    if not result.complete:
        text += f" The scan stopped after {result.scanned} pending entries: run it again for the rest."
    return text
