"""DLQ triage in the API: ``GET /api/v1/c/<conn>/dlq/<key>/triage/`` (the counts by error signature, group
and origin, bounded) and ``POST .../triage/requeue`` ("requeue these": a dry run counts, otherwise a job).

The twins of the DLQ page's triage panel and its confirm page (:mod:`streams_app.views.dlq_triage`),
through the same services (:mod:`streams_app.services.dlq_triage`): the same masking, role (operator for
the requeue), read-only rule and audit row.
"""

from __future__ import annotations

from typing import Any

from django.http import HttpRequest, JsonResponse

from eventbus.text import display_text
from streams_app.redis_ops import client
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.services.dlq_triage import (
    ACTION,
    dlq_requeue_filtered,
    dlq_requeue_filtered_preview,
    dlq_triage,
)
from streams_app.triage.counts import Bucket, TriageFilter
from streams_app.views import links
from streams_app.views.api import replies
from streams_app.views.api import schemas as s
from streams_app.views.api.endpoint import api_endpoint, body_input, read_json
from streams_app.views.api.replies import EntryIdText, Reply
from streams_app.views.dlq_triage import filter_query


class TriageFilterReply(Reply):
    """A count's filter: pass it to the DLQ's list (query string) or to ``triage/requeue`` (body)."""

    signature: str | None = None
    group: str | None = None
    origin: str | None = None
    no_group: bool | None = None
    no_origin: bool | None = None


class TriageBucket(Reply):
    """``count`` dead letters have this ``value`` (null: they record no group, or no origin)."""

    value: str | None
    count: int
    filter: TriageFilterReply
    list_url: str  # the API's list of these dead letters


class TriageReply(Reply):
    """Counts over the ``looked`` newest dead letters (older than ``before`` when given) of ``depth``;
    ``complete``: every dead letter was counted. ``next``: pass it as ``before`` to count the next older
    window. ``newest``: the newest dead letter counted (a requeue's ``up_to``)."""

    key: str
    depth: int
    looked: int
    limit: int
    complete: bool
    before: EntryIdText | None
    next: EntryIdText | None
    newest: EntryIdText | None
    oldest: EntryIdText | None
    signatures: list[TriageBucket]
    groups: list[TriageBucket]
    origins: list[TriageBucket]


class RequeueFilteredCountReply(Reply):
    """``count`` dead letters up to ``up_to`` (null: the DLQ is empty) match; when ``complete`` is false
    the count covered the ``looked`` newest of ``depth`` and is a lower bound."""

    count: int
    up_to: EntryIdText | None
    looked: int
    depth: int
    complete: bool


def _bucket(api_list: str, bucket: Bucket) -> dict[str, Any]:
    return {
        "value": bucket.value,
        "count": bucket.count,
        "filter": bucket.filter.params(),
        "list_url": f"{api_list}?{filter_query(bucket.filter)}",
    }


@api_endpoint(method="GET", summary="A DLQ's dead letters counted by error signature, group and origin",
              tag="dlq", query=s.DlqTriageQuery, replies={200: TriageReply})  # fmt: skip
def dlq_triage_route(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    """Bounded: the newest ``limit`` dead letters (``BUSCONSOLE_DLQ_TRIAGE_LIMIT``); masked values are
    counted as shown (a masked error's signature is the masked text)."""
    client.connection(conn)
    params = s.query(s.DlqTriageQuery, request.GET)
    counts = dlq_triage(user=request.user, conn=conn, key=key, before=params.before, limit=params.limit)
    api_list = links.api_dlq_url(conn, key)
    return JsonResponse(
        {
            "key": display_text(key), "depth": counts.depth, "looked": counts.looked, "limit": counts.limit,
            "complete": counts.complete, "before": counts.before, "next": counts.next, "newest": counts.newest,
            "oldest": counts.oldest,
            "signatures": [_bucket(api_list, b) for b in counts.signatures],
            "groups": [_bucket(api_list, b) for b in counts.groups],
            "origins": [_bucket(api_list, b) for b in counts.origins],
        }
    )  # fmt: skip


@api_endpoint(method="POST", summary="Requeue the dead letters of a triage count, as a job, or count them",
              tag="dlq", body=s.RequeueFilteredBody, action=ACTION,
              replies={200: RequeueFilteredCountReply, 202: replies.JobCreated})  # fmt: skip
def dlq_requeue_filtered_route(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    client.connection(conn)
    data = body_input(request, conn, ACTION, s.RequeueFilteredBody, read_json(request), key=key)
    where = TriageFilter.from_params(data.triage_filter())
    if data.dry_run:
        preview = dlq_requeue_filtered_preview(user=request.user, conn=conn, key=key, where=where)
        return JsonResponse(
            {"count": preview.count, "up_to": preview.up_to, "looked": preview.looked, "depth": preview.depth,
             "complete": preview.complete}
        )  # fmt: skip
    if not data.up_to:
        raise InvalidArgument("up_to is required: the newest dead letter the count covered (a dry run answers it).")
    job = dlq_requeue_filtered(user=request.user, conn=conn, key=key, where=where, up_to=data.up_to)
    return JsonResponse(
        {"job": job.pk, "url": links.job_url(job.pk), "api_url": f"/api/v1/jobs/{job.pk}"}, status=202
    )
