"""The write side of the JSON API (docs/api.md#addresses), plus DLQs, jobs and the audit trail.

Bodies are JSON objects read by :func:`~streams_app.views.api.endpoint.read_json` and validated by the
typed models of :mod:`streams_app.views.api.schemas`; the action layer (:mod:`streams_app.services`)
checks roles and read-only mode and writes the audit row. Errors are raised and become JSON by the
middleware: 400 for bad input, 403 for a refusal, 404, 413 for an oversized body, 503.
"""

from __future__ import annotations

from typing import Any

from django.http import Http404, HttpRequest, JsonResponse

from eventbus.conventions import DlqEntry
from eventbus.decoding import decode_fields
from eventbus.text import display_text
from streams_app import services
from streams_app.jobs.models import Job
from streams_app.masking.apply import search_mask
from streams_app.redis_ops import actions, client
from streams_app.redis_ops.reads import dlq as dlq_reads
from streams_app.triage.counts import ShownDeadLetters, TriageFilter
from streams_app.views import links, presenters
from streams_app.views.api import replies
from streams_app.views.api import schemas as s
from streams_app.views.api.endpoint import api_endpoint, body_input, flag, read_json
from streams_app.views.audit import audit_events, audit_json
from streams_app.views.jobs import PAGE as JOBS_PAGE
from streams_app.views.jobs import job_links
from streams_app.views.masking import request_masker
from streams_app.views.paging import newest_first


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


@api_endpoint(method="POST", summary="Claim pending entries (XCLAIM, guarded by idle time)", tag="groups",
              body=s.ClaimBody, action="claim", replies={200: replies.ClaimReply})
def claim(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    client.connection(conn)
    data = body_input(request, conn, "claim", s.ClaimBody, read_json(request), key=key, group=group)
    result = services.pending_claim(
        user=request.user, conn=conn, key=key, group=group, ids=data.ids, consumer=data.consumer,
        min_idle_ms=data.min_idle_ms,
    )
    return JsonResponse(_claim_json(result))


@api_endpoint(method="POST", summary="Sweep idle pending entries to a consumer (XAUTOCLAIM)", tag="groups",
              body=s.AutoclaimBody, action="autoclaim", replies={200: replies.AutoclaimReply})
def autoclaim(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    client.connection(conn)
    data = body_input(request, conn, "autoclaim", s.AutoclaimBody, read_json(request), key=key, group=group)
    result = services.pending_autoclaim(
        user=request.user, conn=conn, key=key, group=group, consumer=data.consumer, min_idle_ms=data.min_idle_ms,
        count=data.count,
    )
    return JsonResponse(_claim_json(result, sweep=True))


@api_endpoint(method="POST", summary="Acknowledge pending entries (XACK)", tag="groups", body=s.AckBody,
              action="ack", replies={200: replies.AckReply})
def ack(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    """``acked`` counts the entries that were pending; the others are ignored."""
    client.connection(conn)
    data = body_input(request, conn, "ack", s.AckBody, read_json(request), key=key, group=group)
    return JsonResponse({"acked": services.pending_ack(user=request.user, conn=conn, key=key, group=group, ids=data.ids)})


@api_endpoint(method="POST", summary="Rewind a group (XGROUP SETID), or preview it", tag="groups",
              body=s.RewindBody, action=("rewind", "rewind.preview"), replies={200: replies.RewindReply})
def rewind(request: HttpRequest, conn: str, key: bytes, group: bytes) -> JsonResponse:
    client.connection(conn)
    body = read_json(request)
    action = "rewind.preview" if flag(body, "dry_run") else "rewind"
    data = body_input(request, conn, action, s.RewindBody, body, key=key, group=group)
    do = services.group_rewind_preview if data.dry_run else services.group_rewind
    plan = do(user=request.user, conn=conn, key=key, group=group, to=data.to)
    return JsonResponse(
        {
            "last_delivered_id": plan.last_delivered_id,
            "will_redeliver": plan.will_redeliver,
            "entries_read": plan.entries_read,
            "previous_last_delivered_id": plan.current_last_delivered_id,
            "lag_known": plan.lag_known,
            "dry_run": data.dry_run,
        }
    )


# ---------------------------------------------------------------------------------------- DLQs


@api_endpoint(method="GET", summary="List dead-letter queues", tag="dlq", replies={200: replies.DlqListReply})
def dlq_list(request: HttpRequest, conn: str) -> JsonResponse:
    """Streams that follow a DLQ convention, with their depth and the streams their entries came from."""
    client.connection(conn)
    # each DLQ's sample masked as anyone sees it: the convention and origin names read from it are shown
    listing = dlq_reads.dlq_list(conn, mask_for=lambda key: search_mask(None, conn, key))
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
                    "source_streams": [display_text(src) for src in dlq.source_streams],
                }
                for dlq in listing.dlqs
            ],
            "complete": listing.complete,
            "missed": list(listing.missed),
        }
    )


def dlq_entry_json(entry: DlqEntry) -> dict[str, Any]:
    return {
        "id": entry.id,
        "convention": entry.convention,
        "original_stream": display_text(entry.original_stream) if entry.original_stream else None,
        "original_id": entry.original_id,
        "first_id": entry.first_id,
        "group": entry.group,
        "error": entry.error,
        "retries": entry.retries,
        "failed_at_ms": entry.failed_at_ms,
        "payload": [
            {"name": f.name, "format": f.decoded.format, "value": f.decoded.value, "truncated": f.decoded.truncated}
            for f in decode_fields(entry.payload_fields)
        ],
        "preview": presenters.preview_json(presenters.row_preview(entry.payload_fields)),
    }


@api_endpoint(method="GET", summary="A DLQ's dead letters, parsed", tag="dlq", query=s.DlqEntriesQuery,
              replies={200: replies.DlqEntriesReply})
def dlq_entries(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """Entries newest first, each with its original stream and ID, error and payload."""
    client.connection(conn)
    params = s.query(s.DlqEntriesQuery, request.GET)
    services.dlq_require(conn=conn, key=key)
    masker = request_masker(request, conn, key)
    shown = ShownDeadLetters(masker)  # a triage count's signature, •••• too for an error a rule removed
    where = TriageFilter.from_params(params.triage_filter())  # a triage count's dead letters
    entries, older = dlq_reads.dlq_entries(
        conn, key, before=params.before, count=params.count, error_contains=params.error,
        where=shown.where(where), mask=shown.mask,
    )  # fmt: skip
    rows = [dlq_entry_json(e) for e in entries]
    masker.reveal_record()
    return JsonResponse({"key": display_text(key), "entries": rows, "next": older})


@api_endpoint(method="POST", summary="Requeue dead letters: some now, or all up to an ID as a job", tag="dlq",
              body=s.DlqRequeueBody, action=("dlq.requeue", "dlq.requeue_all"),
              replies={200: replies.RequeueReply, 202: replies.JobCreated})
def dlq_requeue(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """``ids``: done now (200). ``all`` with ``up_to``: a background job (202)."""
    client.connection(conn)
    body = read_json(request)
    action = "dlq.requeue_all" if flag(body, "all") else "dlq.requeue"
    data = body_input(request, conn, action, s.DlqRequeueBody, body, key=key)
    if data.all:
        assert data.up_to is not None  # DlqRequeueBody's validator: all comes with up_to
        job = services.dlq_requeue_all(user=request.user, conn=conn, key=key, up_to=data.up_to, batch=data.batch)
        return _job_created(job)
    assert data.ids is not None  # DlqRequeueBody's validator: ids, or all
    result = services.dlq_requeue(user=request.user, conn=conn, key=key, ids=data.ids)
    return JsonResponse(
        {
            "requeued": [
                {"dlq_id": r.dlq_id, "stream": display_text(r.stream), "new_id": r.new_id} for r in result.requeued
            ],
            "missing": list(result.missing),
            "failed": [{"dlq_id": f.dlq_id, "reason": f.reason} for f in result.failed],
        }
    )


@api_endpoint(method="POST", summary="Delete dead letters", tag="dlq", body=s.DlqDeleteBody, action="dlq.delete",
              replies={200: replies.DeletedReply})
def dlq_delete(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    client.connection(conn)
    data = body_input(request, conn, "dlq.delete", s.DlqDeleteBody, read_json(request), key=key)
    return JsonResponse({"deleted": services.dlq_delete(user=request.user, conn=conn, key=key, ids=data.ids)})


@api_endpoint(method="POST", summary="Purge a DLQ up to an ID", tag="dlq", body=s.DlqPurgeBody, action="dlq.purge",
              replies={200: replies.PurgedReply})
def dlq_purge(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """Entries up to ``up_to`` go; later arrivals stay. ``confirm`` must be the DLQ's name."""
    client.connection(conn)
    data = body_input(request, conn, "dlq.purge", s.DlqPurgeBody, read_json(request), key=key)
    purged = services.dlq_purge(user=request.user, conn=conn, key=key, up_to=data.up_to, confirm=data.confirm)
    return JsonResponse({"purged": purged})


# -------------------------------------------------------------------------------------- replay


@api_endpoint(method="POST", summary="Replay a range of a stream as a job, or count it", tag="streams",
              body=s.ReplayBody, action=("replay", "replay.count"),
              replies={200: replies.ReplayCountReply, 202: replies.JobCreated})
def replay(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """``dry_run``: the count of matching entries (200). Otherwise a background job (202)."""
    client.connection(conn)
    body = read_json(request)
    action = "replay.count" if flag(body, "dry_run") else "replay"
    data = body_input(request, conn, action, s.ReplayBody, body, key=key)
    common = {"start": data.start, "end": data.end, "target": data.target, "match": data.match}
    if data.dry_run:
        preview = services.stream_replay_count(user=request.user, conn=conn, key=key, **common)
        return JsonResponse(
            {"count": preview.count, "start": preview.start, "end": preview.end, "target": display_text(preview.target)}
        )
    job = services.stream_replay(user=request.user, conn=conn, key=key, batch=data.batch, **common)
    return _job_created(job)


# --------------------------------------------------------------------------------- jobs, audit


def _job(job_id: int) -> Job:
    """The job, or a 404: an ID beyond what the database holds is not found (not an overflow)."""
    if job_id > s.I64_MAX:
        raise Http404("No such job.")
    try:
        return Job.objects.get(pk=job_id)
    except Job.DoesNotExist:
        raise Http404("No such job.") from None


@api_endpoint(method="GET", summary="One background job", tag="jobs", replies={200: replies.JobReply},
              errors=(404,))
def job(request: HttpRequest, job_id: int) -> JsonResponse:
    found = _job(job_id)
    return JsonResponse({**job_json(found), "links": job_links(found)})


@api_endpoint(method="GET", summary="Background jobs, newest first", tag="jobs", query=s.JobsQuery,
              replies={200: replies.JobsReply})
def jobs(request: HttpRequest) -> JsonResponse:
    params = s.query(s.JobsQuery, request.GET)
    rows = Job.objects.all()
    if params.state:
        rows = rows.filter(state=params.state)
    page = newest_first(rows, before=params.before, size=JOBS_PAGE)
    return JsonResponse({"jobs": [job_json(j) for j in page.rows], "next": page.older})


@api_endpoint(method="POST", summary="Cancel a background job", tag="jobs",
              action=("job.cancel", "job.cancel.any"), replies={200: replies.Job}, errors=(400, 404))
def job_cancel(request: HttpRequest, job_id: int) -> JsonResponse:
    """Anyone may cancel a job they started; operators and admins anyone's (403 otherwise). The job
    stops within a second of its work; what it did stays done."""
    return JsonResponse(job_json(services.job_cancel(user=request.user, job=_job(job_id))))


@api_endpoint(method="POST", summary="Resume a stopped background job", tag="jobs", action="job.resume",
              replies={200: replies.Job}, errors=(400, 404, 409))
def job_resume(request: HttpRequest, job_id: int) -> JsonResponse:
    """A job that is done cannot be resumed (400); a stopped one is refused (409) while the user who
    started it holds their limit of jobs (``BUSCONSOLE_JOBS_PER_USER``)."""
    return JsonResponse(job_json(services.job_resume(user=request.user, job=_job(job_id))))


@api_endpoint(method="GET", summary="The audit trail, newest first", tag="audit", query=s.AuditQuery,
              replies={200: replies.AuditReply})
def audit(request: HttpRequest) -> JsonResponse:
    """Every action anyone attempted: who, what, where, outcome and how much it changed."""
    params = s.query(s.AuditQuery, request.GET)
    events, older = audit_events(params.model_dump())
    return JsonResponse({"events": [audit_json(e) for e in events], "next": older})
