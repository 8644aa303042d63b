"""The admin side of the JSON API: delete a consumer or a group, trim a stream, delete entries.

Bodies are validated by the typed models of :mod:`streams_app.views.api.schemas`;
:mod:`streams_app.services` checks the role (admin) and read-only mode and writes the audit row. Errors become JSON through the middleware: 400 for bad input,
403 for a refusal, 404, 409 when a consumer still has pending entries and ``force`` was not given.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse

from eventbus.text import display_text
from streams_app import services
from streams_app.redis_ops import actions, client
from streams_app.views.api import replies
from streams_app.views.api import schemas as s
from streams_app.views.api.endpoint import api_endpoint, body_input, flag, read_json


def _pending_json(pending: tuple[actions.GroupPending, ...]) -> dict[str, list[str]]:
    return {display_text(hit.group): list(hit.ids) for hit in pending}


@api_endpoint(method="POST", summary="Delete a consumer (XGROUP DELCONSUMER)", tag="admin",
              body=s.ConsumerDeleteBody, action="consumer.delete", replies={200: replies.ConsumerDeleted}, errors=(409,))
def consumer_delete(request: HttpRequest, conn: str, key: bytes, group: bytes, consumer: bytes) -> JsonResponse:
    """``{"force": true}`` drops its pending entries with it; without it, a consumer that still owns
    pending entries is refused with 409."""
    client.connection(conn)
    body = read_json(request)
    data = body_input(request, conn, "consumer.delete", s.ConsumerDeleteBody, body, key=key, group=group)
    result = services.consumer_delete(
        user=request.user, conn=conn, key=key, group=group, consumer=consumer, force=data.force
    )
    return JsonResponse(
        {"consumer": display_text(result.consumer), "deleted": True, "pending_dropped": result.pending_dropped}
    )


@api_endpoint(method="POST", summary="Delete a consumer group (XGROUP DESTROY)", tag="admin",
              body=s.GroupDeleteBody, action="group.delete", replies={200: replies.GroupDeleted})
def group_delete(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    """``{"confirm": "<the group's name>"}``; the stream keeps its entries."""
    client.connection(conn)
    data = body_input(request, conn, "group.delete", s.GroupDeleteBody, read_json(request), key=key, group=group)
    result = services.group_delete(user=request.user, conn=conn, key=key, group=group, confirm=data.confirm)
    return JsonResponse(
        {
            "group": display_text(result.group),
            "deleted": True,
            "consumers": result.consumers,
            "pending_dropped": result.pending_dropped,
            "last_delivered_id": result.last_delivered_id,
        }
    )


def _trim_plan_json(plan: actions.TrimPlan) -> dict[str, Any]:
    return {
        "strategy": plan.strategy,
        "maxlen": plan.maxlen,
        "minid": plan.minid,
        "length": plan.length,
        "will_remove": plan.will_remove,
        "approximate": plan.approximate,
        "pending": [
            {"group": display_text(p.group), "count": p.count, "more": p.more, "oldest_id": p.oldest_id}
            for p in plan.pending
        ],
    }


@api_endpoint(method="POST", summary="Trim a stream (XTRIM), or preview it", tag="admin", body=s.TrimBody,
              action=("stream.trim", "stream.trim.preview"), replies={200: replies.TrimReply})
def trim(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """``{"maxlen": n}`` or ``{"minid": id or ISO time}``, with ``"dry_run": true`` for the preview,
    which also names the groups with pending entries in the range that would go."""
    client.connection(conn)
    body = read_json(request)
    action = "stream.trim.preview" if flag(body, "dry_run") else "stream.trim"
    data = body_input(request, conn, action, s.TrimBody, body, key=key)
    if data.dry_run:
        plan = services.stream_trim_preview(user=request.user, conn=conn, key=key, maxlen=data.maxlen, minid=data.minid)
        return JsonResponse({**_trim_plan_json(plan), "dry_run": True})
    result = services.stream_trim(user=request.user, conn=conn, key=key, maxlen=data.maxlen, minid=data.minid)
    return JsonResponse(
        {
            "strategy": result.strategy,
            "maxlen": result.maxlen,
            "minid": result.minid,
            "removed": result.removed,
            "length": result.length,
            "dry_run": False,
        }
    )


@api_endpoint(method="POST", summary="Delete entries (XDEL), or preview it", tag="admin",
              body=s.EntriesDeleteBody, action=("stream.delete", "stream.delete.preview"), replies={200: replies.EntriesDeleteReply})
def entries_delete(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """``{"ids": [...]}``, with ``"dry_run": true`` to see which exist and which are pending."""
    client.connection(conn)
    body = read_json(request)
    action = "stream.delete.preview" if flag(body, "dry_run") else "stream.delete"
    data = body_input(request, conn, action, s.EntriesDeleteBody, body, key=key)
    if data.dry_run:
        plan = services.stream_entries_delete_preview(user=request.user, conn=conn, key=key, ids=data.ids)
        return JsonResponse(
            {"existing": list(plan.existing), "missing": list(plan.missing), "pending": _pending_json(plan.pending),
             "dry_run": True}
        )
    result = services.stream_entries_delete(user=request.user, conn=conn, key=key, ids=data.ids)
    return JsonResponse(
        {
            "deleted": len(result.deleted),
            "deleted_ids": list(result.deleted),
            "missing": list(result.missing),
            "still_pending": _pending_json(result.pending),
            "dry_run": False,
        }
    )
