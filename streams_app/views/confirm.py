"""Confirm pages of the bulk actions that act on a set nobody ticked: requeue all of a DLQ up to an ID,
and the sweep (XAUTOCLAIM) of a group's idle pending entries.

The page's button is a plain GET form to one of these pages, which counts in Redis what the action
would touch now and shows that number with the POST button that does it (the operator confirms with
the number, as the rewind preview does). A GET changes nothing, so these are reads: any signed-in
reader may see the count, the button is offered to the roles that may press it, and the action view
it posts to checks the role, honours read-only mode and writes the audit row, as before.
"""

from __future__ import annotations

from django.http import HttpRequest, HttpResponse
from django.shortcuts import render
from django.views.decorators.http import require_GET

from eventbus.text import display_text
from streams_app import services
from streams_app.views import action_forms as af
from streams_app.views import links
from streams_app.views.actions import local_next
from streams_app.views.common import connection_context
from streams_app.views.forms import validated

TEMPLATE = "streams_app/action_preview.html"


@require_GET
def dlq_requeue_all_confirm(request: HttpRequest, conn: str, key: bytes) -> HttpResponse:
    """How many entries "requeue all up to ``up_to``" moves, and the button that starts the job."""
    context = connection_context(request, conn)
    data = validated(af.RequeueAllConfirmForm, request.GET)
    preview = services.dlq_requeue_all_preview(conn=conn, key=key, up_to=data["up_to"])
    dlq_page = links.dlq_url(conn, key)
    context.update(
        key=key,
        key_text=display_text(key),
        what="requeue_all",
        preview=preview,
        confirm_url=dlq_page + "requeue/",
        back_url=local_next(request, data["next"], dlq_page),
    )
    return render(request, TEMPLATE, context)


@require_GET
def autoclaim_confirm(request: HttpRequest, conn: str, key: bytes, group: bytes) -> HttpResponse:
    """How many idle entries the sweep claims to the consumer (at most ``count``), and its button."""
    context = connection_context(request, conn)
    data = validated(af.AutoclaimConfirmForm, request.GET)
    preview = services.pending_autoclaim_preview(
        conn=conn, key=key, group=group, min_idle_ms=data["min_idle_ms"], limit=data["count"]
    )
    group_page = links.group_url(conn, key, group)
    back = local_next(request, data["next"], group_page)
    context.update(
        key=key,
        key_text=display_text(key),
        group=group,
        group_text=display_text(group),
        what="sweep",
        preview=preview,
        consumer_text=display_text(data["consumer"]),
        count=data["count"],
        consumer_value=data["consumer"].decode(),  # as typed: NameField encoded it as UTF-8
        confirm_url=group_page + "autoclaim/",
        back_url=back,
        next=back,
    )
    return render(request, TEMPLATE, context)
