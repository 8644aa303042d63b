"""The write side of the JSON API (SPEC section 4), plus DLQs, jobs and the audit trail.

Bodies are JSON objects validated by the same forms as the pages; the action layer
(:mod:`streams_app.services`) checks roles and read-only mode and writes the audit row. Errors are
raised and become JSON by the middleware: 400 for bad input, 403 for a refusal, 404, 503.
"""

from __future__ import annotations

import json
from typing import Any

from django.http import HttpRequest, JsonResponse
from django.shortcuts import get_object_or_404
from django.views.decorators.http import require_GET, require_POST

from streams_app import services
from streams_app.jobs.models import Job
from streams_app.redis_ops import actions, client, conventions
from streams_app.redis_ops.decoding import decode_fields, display_text
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.views import action_forms as af
from streams_app.views import links
from streams_app.views.audit import audit_events, audit_json
from streams_app.views.forms import action_data, validated
from streams_app.views.jobs import PAGE as JOBS_PAGE
from streams_app.views.jobs import job_links
from streams_app.views.paging import newest_first


def _body(request: HttpRequest) -> dict[str, Any]:
    """The request's JSON object; anything else is a 400 with a JSON error."""
    try:
        data = json.loads(request.body or b"{}")
    except (ValueError, UnicodeDecodeError):
        raise InvalidArgument("The request body must be a JSON object.") from None
    if not isinstance(data, dict):
        raise InvalidArgument("The request body must be a JSON object.")
    return data


def _flag(value: Any) -> bool:
    """A JSON flag as the forms read it (true, "true", 1): decides which action is audited."""
    return value is True or value == 1 or (isinstance(value, str) and value.lower() in ("true", "1", "on"))


def _claim_json(result: actions.ClaimResult, *, sweep: bool = False) -> dict[str, Any]:
    out: dict[str, Any] = {
        "claimed": list(result.claimed),
        "skipped": list(result.skipped),
        "deleted": list(result.deleted),
    }
    if sweep:
        out["next"] = result.next
    return out


def job_json(job: Job) -> dict[str, Any]:
    return {**job.to_api(), "url": links.job_url(job.pk), "api_url": f"/api/v1/jobs/{job.pk}"}


def _job_created(job: Job) -> JsonResponse:
    return JsonResponse({"job": job.pk, "url": links.job_url(job.pk), "api_url": f"/api/v1/jobs/{job.pk}"}, status=202)


# ------------------------------------------------------------------------------ pending entries


@require_POST
def claim(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    client.connection(conn)
    data = action_data(request, conn, "claim", af.ClaimForm, _body(request), key=key, group=group)
    return JsonResponse(_claim_json(services.pending_claim(user=request.user, conn=conn, key=key, group=group, **data)))


@require_POST
def autoclaim(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    client.connection(conn)
    data = action_data(request, conn, "autoclaim", af.AutoclaimForm, _body(request), key=key, group=group)
    result = services.pending_autoclaim(user=request.user, conn=conn, key=key, group=group, **data)
    return JsonResponse(_claim_json(result, sweep=True))


@require_POST
def ack(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    client.connection(conn)
    data = action_data(request, conn, "ack", af.AckForm, _body(request), key=key, group=group)
    return JsonResponse({"acked": services.pending_ack(user=request.user, conn=conn, key=key, group=group, **data)})


@require_POST
def rewind(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    client.connection(conn)
    body = _body(request)
    action = "rewind.preview" if _flag(body.get("dry_run")) else "rewind"
    data = action_data(request, conn, action, af.RewindForm, body, key=key, group=group)
    do = services.group_rewind_preview if data["dry_run"] else services.group_rewind
    plan = do(user=request.user, conn=conn, key=key, group=group, to=data["to"])
    return JsonResponse(
        {
            "last_delivered_id": plan.last_delivered_id,
            "will_redeliver": plan.will_redeliver,
            "entries_read": plan.entries_read,
            "previous_last_delivered_id": plan.current_last_delivered_id,
            "lag_known": plan.lag_known,
            "dry_run": data["dry_run"],
        }
    )


# ---------------------------------------------------------------------------------------- DLQs


@require_GET
def dlq_list(request: HttpRequest, conn: str) -> JsonResponse:
    client.connection(conn)
    listing = services.dlq_list(conn=conn)
    return JsonResponse(
        {
            "dlqs": [
                {
                    "key": display_text(dlq.key),
                    "url": links.dlq_url(conn, dlq.key),
                    "api_url": links.api_dlq_url(conn, dlq.key),
                    "convention": dlq.convention,
                    "depth": dlq.depth,
                    "last_id": dlq.last_id,
                    "source_streams": [display_text(s) for s in dlq.source_streams],
                }
                for dlq in listing.dlqs
            ],
            "complete": listing.complete,
        }
    )


def dlq_entry_json(entry: conventions.DlqEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "convention": entry.convention,
        "original_stream": display_text(entry.original_stream) if entry.original_stream else None,
        "original_id": entry.original_id,
        "group": entry.group,
        "error": entry.error,
        "retries": entry.retries,
        "failed_at_ms": entry.failed_at_ms,
        "payload": [
            {"name": f.name, "format": f.decoded.format, "value": f.decoded.value, "truncated": f.decoded.truncated}
            for f in decode_fields(entry.payload_fields)
        ],
    }


@require_GET
def dlq_entries(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """``GET /api/v1/c/<conn>/dlq/<key>/?error=&before=&count=``: entries newest first, parsed."""
    client.connection(conn)
    params = validated(af.DlqPageForm, request.GET)
    services.dlq_require(conn=conn, key=key)
    entries, older = actions.dlq_entries(
        conn, key, before=params["before"], count=params["count"], error_contains=params["error"]
    )
    return JsonResponse({"key": display_text(key), "entries": [dlq_entry_json(e) for e in entries], "next": older})


@require_POST
def dlq_requeue(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    client.connection(conn)
    body = _body(request)
    action = "dlq.requeue_all" if _flag(body.get("all")) else "dlq.requeue"
    data = action_data(request, conn, action, af.DlqRequeueForm, body, key=key)
    if data["all"]:
        job = services.dlq_requeue_all(user=request.user, conn=conn, key=key, up_to=data["up_to"], batch=data["batch"])
        return _job_created(job)
    result = services.dlq_requeue(user=request.user, conn=conn, key=key, ids=data["ids"])
    return JsonResponse(
        {
            "requeued": [
                {"dlq_id": r.dlq_id, "stream": display_text(r.stream), "new_id": r.new_id} for r in result.requeued
            ],
            "missing": list(result.missing),
            "failed": [{"dlq_id": f.dlq_id, "reason": f.reason} for f in result.failed],
        }
    )


@require_POST
def dlq_delete(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    client.connection(conn)
    data = action_data(request, conn, "dlq.delete", af.DlqDeleteForm, _body(request), key=key)
    return JsonResponse({"deleted": services.dlq_delete(user=request.user, conn=conn, key=key, ids=data["ids"])})


@require_POST
def dlq_purge(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """``{"up_to": id, "confirm": "<the DLQ's name>"}`` (admin)."""
    client.connection(conn)
    data = action_data(request, conn, "dlq.purge", af.DlqPurgeForm, _body(request), key=key)
    purged = services.dlq_purge(user=request.user, conn=conn, key=key, up_to=data["up_to"], confirm=data["confirm"])
    return JsonResponse({"purged": purged})


# -------------------------------------------------------------------------------------- replay


@require_POST
def replay(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    client.connection(conn)
    body = _body(request)
    action = "replay.count" if _flag(body.get("dry_run")) else "replay"
    data = action_data(request, conn, action, af.ReplayForm, body, key=key)
    common = {"start": data["start"], "end": data["end"], "target": data["target"], "match": data["match"]}
    if data["dry_run"]:
        preview = services.stream_replay_count(user=request.user, conn=conn, key=key, **common)
        return JsonResponse(
            {"count": preview.count, "start": preview.start, "end": preview.end, "target": display_text(preview.target)}
        )
    job = services.stream_replay(user=request.user, conn=conn, key=key, batch=data["batch"], **common)
    return _job_created(job)


# --------------------------------------------------------------------------------- jobs, audit


@require_GET
def job(request: HttpRequest, job_id: int) -> JsonResponse:
    found = get_object_or_404(Job, pk=job_id)
    return JsonResponse({**job_json(found), "links": job_links(found)})


@require_GET
def jobs(request: HttpRequest) -> JsonResponse:
    params = validated(af.JobsForm, request.GET)
    rows = Job.objects.all()
    if params["state"]:
        rows = rows.filter(state=params["state"])
    page = newest_first(rows, before=params["before"], size=JOBS_PAGE)
    return JsonResponse({"jobs": [job_json(j) for j in page.rows], "next": page.older})


@require_POST
def job_cancel(request: HttpRequest, job_id: int) -> JsonResponse:
    return JsonResponse(job_json(services.job_cancel(user=request.user, job=get_object_or_404(Job, pk=job_id))))


@require_POST
def job_resume(request: HttpRequest, job_id: int) -> JsonResponse:
    return JsonResponse(job_json(services.job_resume(user=request.user, job=get_object_or_404(Job, pk=job_id))))


@require_GET
def audit(request: HttpRequest) -> JsonResponse:
    """``GET /api/v1/audit/?action=&user=&connection=&outcome=&since=&before=&count=``, newest first."""
    params = validated(af.AuditFiltersForm, request.GET)
    events, older = audit_events(params)
    return JsonResponse({"events": [audit_json(e) for e in events], "next": older})

