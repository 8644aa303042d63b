"""The admin buttons of the HTML pages: delete a consumer or a group, trim a stream, delete entries.

Same shape as the operator buttons (:mod:`streams_app.views.actions`): POST only, CSRF-protected, role,
read-only and audit handled by :mod:`streams_app.services`. Each destructive action has a confirm
step: a preview page saying what will go (a consumer's pending entries, the entries a trim removes
and the groups still waiting for some of them, which IDs exist), or the group's name typed. A confirm
page keeps the ``next`` it was posted with (the page the operator pressed the button on, filters and
all) for its Cancel link and its button, so the action returns there, as rewind and purge do.
"""

from __future__ import annotations

from urllib.parse import urlencode

from django.contrib import messages
from django.http import HttpRequest, HttpResponse, HttpResponseRedirect
from django.shortcuts import render

from eventbus.text import display_text
from streams_app import services
from streams_app.views import action_forms as af
from streams_app.views import links
from streams_app.views.actions import (
    _back,
    _group_page,
    _ids_text,
    _plural,
    _preview_context,
    _stream_page,
    action_view,
)
from streams_app.views.forms import action_data

PREVIEW_TEMPLATE = "streams_app/admin_action_preview.html"


def _consumer_url(conn: str, key: bytes, group: bytes, consumer: bytes) -> str:
    return f"{links.group_url(conn, key, group)}consumers/{links.segment(consumer)}/"


# ---------------------------------------------------------------------------------- consumers


def _consumer_group_page(conn: str, key: bytes, group: bytes, consumer: bytes) -> str:
    """Where a consumer's buttons return to: its group's page."""
    return links.group_url(conn, key, group)


@action_view(_consumer_group_page)
def consumer_delete_preview(request: HttpRequest, conn: str, key: bytes, group: bytes, consumer: bytes) -> HttpResponse:
    """How many pending entries the consumer owns, with the way to claim them first, then the button."""
    action_data(request, conn, "consumer.delete.preview", af.ConsumerDeleteForm, request.POST, key=key, group=group)
    plan = services.consumer_delete_preview(user=request.user, conn=conn, key=key, group=group, consumer=consumer)
    group_page = links.group_url(conn, key, group)
    back = _back(request, group_page)
    context = _preview_context(
        conn, key, what="consumer.delete", group=group, group_text=display_text(group), plan=plan,
        consumer_text=display_text(consumer),
        claim_url=f"{group_page}?{urlencode({'consumer': display_text(consumer)})}#pending",
        confirm_url=_consumer_url(conn, key, group, consumer) + "delete/",
        back_url=back,
        next=back,
    )
    return render(request, PREVIEW_TEMPLATE, context)


@action_view(_consumer_group_page)
def consumer_delete(request: HttpRequest, conn: str, key: bytes, group: bytes, consumer: bytes) -> str:
    data = action_data(request, conn, "consumer.delete", af.ConsumerDeleteForm, request.POST, key=key, group=group)
    result = services.consumer_delete(
        user=request.user, conn=conn, key=key, group=group, consumer=consumer, force=data["force"]
    )
    text = f"Deleted consumer {display_text(consumer)} from group {display_text(group)}."
    if result.pending_dropped:
        text += (
            f" {_plural(result.pending_dropped, 'pending entry was', 'pending entries were')} dropped "
            "from the group with it and will not be delivered again."
        )
    return text


# ------------------------------------------------------------------------------------- groups


@action_view(_group_page)
def group_delete(request: HttpRequest, conn: str, key: bytes, group: bytes) -> HttpResponse:
    """Typed confirmation on the group page; success lands on the stream page (the group is gone)."""
    data = action_data(request, conn, "group.delete", af.GroupDeleteForm, request.POST, key=key, group=group)
    result = services.group_delete(user=request.user, conn=conn, key=key, group=group, confirm=data["confirm"])
    messages.success(
        request,
        f"Deleted group {display_text(group)} with its {_plural(result.consumers, 'consumer')} and "
        f"{_plural(result.pending_dropped, 'pending entry', 'pending entries')}; the stream's entries are untouched.",
    )
    return HttpResponseRedirect(links.stream_url(conn, key))


# -------------------------------------------------------------------------------------- trim


@action_view(_stream_page)
def trim_preview(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    data = action_data(request, conn, "stream.trim.preview", af.TrimForm, request.POST, key=key)
    plan = services.stream_trim_preview(user=request.user, conn=conn, key=key, maxlen=data["maxlen"], minid=data["minid"])
    back = _back(request, links.stream_url(conn, key))
    context = _preview_context(
        conn, key, what="trim", plan=plan, given=data["minid"],
        confirm_url=links.stream_url(conn, key) + "trim/", back_url=back, next=back,
    )
    return render(request, PREVIEW_TEMPLATE, context)


@action_view(_stream_page)
def trim(request: HttpRequest, conn: str, key: bytes) -> str:
    data = action_data(request, conn, "stream.trim", af.TrimForm, request.POST, key=key)
    result = services.stream_trim(user=request.user, conn=conn, key=key, maxlen=data["maxlen"], minid=data["minid"])
    how = f"to about {result.maxlen} entries" if result.strategy == "maxlen" else f"before {result.minid}"
    return f"Trimmed {how}: removed {_plural(result.removed, 'entry', 'entries')}, {result.length} left."


# ----------------------------------------------------------------------------------- entries


@action_view(_stream_page)
def entries_delete_preview(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    data = action_data(request, conn, "stream.delete.preview", af.EntriesDeleteForm, request.POST, key=key)
    plan = services.stream_entries_delete_preview(user=request.user, conn=conn, key=key, ids=data["ids"])
    back = _back(request, links.stream_url(conn, key))
    context = _preview_context(
        conn, key, what="entries.delete", plan=plan,
        confirm_url=links.stream_url(conn, key) + "delete/", back_url=back, next=back,
    )
    return render(request, PREVIEW_TEMPLATE, context)


@action_view(_stream_page)
def entries_delete(request: HttpRequest, conn: str, key: bytes) -> str:
    data = action_data(request, conn, "stream.delete", af.EntriesDeleteForm, request.POST, key=key)
    result = services.stream_entries_delete(user=request.user, conn=conn, key=key, ids=data["ids"])
    text = f"Deleted {_plural(len(result.deleted), 'entry', 'entries')}."
    if result.missing:
        text += f" {_plural(len(result.missing), 'ID was', 'IDs were')} not in the stream: {_ids_text(result.missing)}."
    for hit in result.pending:
        text += (
            f" Still pending in group {display_text(hit.group)}: {_ids_text(hit.ids)} (ack them away on the group page)."
        )
    return text
