"""``POST /api/v1/c/<conn>/dlq/<key>/search/requeue``: requeue the dead letters a search matches.

The API twin of the DLQ page's "requeue the dead letters matching this"
(:mod:`streams_app.views.search_actions`): ``dry_run`` counts the matches up to the newest dead letter
now and answers that ID as ``up_to``; without it, a background job requeues the matches up to the
``up_to`` given (the count's), so later arrivals are never touched. Same role (operator), read-only
rule and audit row as the page, through :mod:`streams_app.services.dlq_search`.
"""

from __future__ import annotations

from django.http import HttpRequest, JsonResponse
from pydantic import ConfigDict

from eventbus.search.query import MAX_QUERY
from streams_app.redis_ops import client
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.services.dlq_search import dlq_requeue_matching, dlq_requeue_matching_preview
from streams_app.views import links
from streams_app.views.api import replies
from streams_app.views.api.endpoint import api_endpoint, body_input, read_json
from streams_app.views.api.replies import EntryIdText, Reply
from streams_app.views.api.schemas import EXAMPLE_ID, Body, EntryId, text


class RequeueMatchingBody(Body):
    """``q``: a search query (a CEL expression or plain text, as ``GET .../search/`` takes it).
    ``dry_run``: count the matches up to the newest dead letter now (200, with that ID as
    ``up_to``). Otherwise ``up_to`` is required: the job requeues the matches up to it (202)."""

    q: text(min_length=1, max_length=MAX_QUERY)  # type: ignore[valid-type]  # pydantic reads the Annotated type this call builds; mypy takes no call as a type
    up_to: EntryId | None = None
    dry_run: bool = False

    model_config = ConfigDict(
        json_schema_extra={"examples": [{"q": 'error.contains("Timeout")', "up_to": EXAMPLE_ID}]}
    )


class RequeueMatchingCountReply(Reply):
    """``count`` dead letters up to ``up_to`` (null: the DLQ is empty) match; when ``complete`` is
    false the count stopped after ``scanned`` of ``depth`` entries and is a lower bound. ``too_costly``
    of the scanned dead letters were left out because their own data made the query too costly to
    evaluate (as the search API's ``too_costly``): not counted, and the job leaves them in the DLQ."""

    count: int
    up_to: EntryIdText | None
    scanned: int
    depth: int
    complete: bool
    too_costly: int


@api_endpoint(method="POST", summary="Requeue the dead letters a search matches, as a job, or count them",
              tag="dlq", body=RequeueMatchingBody, action="dlq.requeue_matching",
              replies={200: RequeueMatchingCountReply, 202: replies.JobCreated})  # fmt: skip
def dlq_requeue_matching_route(request: HttpRequest, conn: str, key: bytes) -> JsonResponse:
    client.connection(conn)
    data = body_input(request, conn, "dlq.requeue_matching", RequeueMatchingBody, read_json(request), key=key)
    if data.dry_run:
        preview = dlq_requeue_matching_preview(user=request.user, conn=conn, key=key, query=data.q)
        return JsonResponse(
            {"count": preview.count, "up_to": preview.up_to, "scanned": preview.scanned, "depth": preview.depth,
             "complete": preview.complete, "too_costly": preview.too_costly}
        )  # fmt: skip
    if not data.up_to:
        raise InvalidArgument(
            "up_to is required: the newest dead letter the count covered (a dry run answers it)."
        )
    job = dlq_requeue_matching(user=request.user, conn=conn, key=key, query=data.q, up_to=data.up_to)
    return JsonResponse(
        {"job": job.pk, "url": links.job_url(job.pk), "api_url": f"/api/v1/jobs/{job.pk}"}, status=202
    )
