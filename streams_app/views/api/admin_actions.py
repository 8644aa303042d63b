"""The admin side of the JSON API: delete a consumer or a group, trim a stream, delete entries.

Validated by the same forms as the pages; :mod:`streams_app.services` checks the role (admin) and
read-only mode and writes the audit row. Errors become JSON through the middleware: 400 for bad input,
403 for a refusal, 404, 409 when a consumer still has pending entries and ``force`` was not given.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_POST

from streams_app import services
from streams_app.redis_ops import actions, client
from streams_app.redis_ops.decoding import display_text
from streams_app.views import action_forms as af
from streams_app.views.api.actions import _body, _flag
from streams_app.views.forms import action_data


def _pending_json(pending: tuple[actions.GroupPending, ...]) -> dict[str, list[str]]:
    return {display_text(hit.group): list(hit.ids) for hit in pending}


@require_POST
def consumer_delete(request: HttpRequest, conn: str, key: bytes, group: bytes, consumer: bytes) -> JsonResponse:
    """``{"force": bool}``: refused with 409 while the consumer has pending entries, unless forced."""
    client.connection(conn)
    data = action_data(request, conn, "consumer.delete", af.ConsumerDeleteForm, _body(request), key=key, group=group)
    result = services.consumer_delete(
        user=request.user, conn=conn, key=key, group=group, consumer=consumer, force=data["force"]
    )
    return JsonResponse(
        {"consumer": display_text(result.consumer), "deleted": True, "pending_dropped": result.pending_dropped}
    )


@require_POST
def group_delete(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    """``{"confirm": "<the group's name>"}``."""
    client.connection(conn)
    data = action_data(request, conn, "group.delete", af.GroupDeleteForm, _body(request), key=key, group=group)
    result = services.group_delete(user=request.user, conn=conn, key=key, group=group, confirm=data["confirm"])
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


@require_POST
def trim(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """``{"maxlen": n}`` or ``{"minid": id or ISO time}``, with ``"dry_run": true`` for the preview."""
    client.connection(conn)
    body = _body(request)
    action = "stream.trim.preview" if _flag(body.get("dry_run")) else "stream.trim"
    data = action_data(request, conn, action, af.TrimForm, body, key=key)
    if data["dry_run"]:
        plan = services.stream_trim_preview(
            user=request.user, conn=conn, key=key, maxlen=data["maxlen"], minid=data["minid"]
        )
        return JsonResponse({**_trim_plan_json(plan), "dry_run": True})
    result = services.stream_trim(user=request.user, conn=conn, key=key, maxlen=data["maxlen"], minid=data["minid"])
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


@require_POST
def entries_delete(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """``{"ids": [...]}``, with ``"dry_run": true`` to see which exist and which are pending."""
    client.connection(conn)
    body = _body(request)
    action = "stream.delete.preview" if _flag(body.get("dry_run")) else "stream.delete"
    data = action_data(request, conn, action, af.EntriesDeleteForm, body, key=key)
    if _flag(body.get("dry_run")):
        plan = services.stream_entries_delete_preview(user=request.user, conn=conn, key=key, ids=data["ids"])
        return JsonResponse(
            {"existing": list(plan.existing), "missing": list(plan.missing), "pending": _pending_json(plan.pending),
             "dry_run": True}
        )
    result = services.stream_entries_delete(user=request.user, conn=conn, key=key, ids=data["ids"])
    return JsonResponse(
        {
            "deleted": len(result.deleted),
            "deleted_ids": list(result.deleted),
            "missing": list(result.missing),
            "still_pending": _pending_json(result.pending),
            "dry_run": False,
        }
    )
