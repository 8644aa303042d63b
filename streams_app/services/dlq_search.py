"""Search results feeding a bulk action: "requeue the dead letters matching this".

The preview counts what the job would move (a bounded search run: a lower bound when it stops
before ``up_to``); the action starts the job (:mod:`streams_app.search.requeue`) under the one
role-and-audit path, like "requeue all" (:func:`streams_app.services.dlq.dlq_requeue_all`).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from streams_app import search
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.masking.apply import search_mask
from streams_app.redis_ops.ids import parse_id
from streams_app.redis_ops.reads import entries as entry_reads
from streams_app.redis_ops.reads import streams as stream_reads
from streams_app.services.audit import action_audit
from streams_app.services.dlq import dlq_require

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike


@dataclass(frozen=True, slots=True)
class RequeueMatchingPreview:
    """``count`` dead letters up to ``up_to`` match (at least, when ``complete`` is False: the count
    stopped after ``scanned`` of the DLQ's ``depth`` entries or at :data:`~streams_app.search.MAX_LIMIT`).
    ``too_costly`` of those scanned were left out because their own data made the query too costly to
    evaluate: not counted, and the job leaves them in the DLQ."""

    query: str
    up_to: str | None
    count: int
    scanned: int
    depth: int
    complete: bool
    too_costly: int = 0


def dlq_requeue_matching_preview(*, user: UserLike | None, conn: str, key: bytes, query: str) -> RequeueMatchingPreview:
    """Count the DLQ entries matching ``query`` up to the newest one now (a read: no audit row)."""
    dlq_require(conn=conn, key=key)
    compiled = search.compile_query(query)
    newest = entry_reads.newest_ids(conn, key, count=1)
    if not newest:
        return RequeueMatchingPreview(query=query, up_to=None, count=0, scanned=0, depth=0, complete=True)
    up_to = newest[0]
    page = search.search_page(
        conn, key, compiled, end=up_to, limit=search.MAX_LIMIT, dlq=True, mask=search_mask(user, conn, key)
    )
    return RequeueMatchingPreview(
        query=query, up_to=up_to, count=len(page.matches), scanned=page.scanned, depth=page.total,
        complete=page.complete, too_costly=page.too_costly,
    )  # fmt: skip


def dlq_requeue_matching(*, user: UserLike | None, conn: str, key: bytes, query: str, up_to: str) -> Job:
    """Start a job requeueing every DLQ entry up to ``up_to`` (inclusive) that matches ``query``."""
    params = {"query": query, "up_to": up_to}
    with action_audit(
        user=user, conn=conn, action="dlq.requeue_matching", stream=key, params=params
    ) as record:
        dlq_require(conn=conn, key=key)
        search.compile_query(query)  # a bad expression is a 400 now, not a failed job later
        up_to = str(parse_id(up_to, allow_bare=False, what="up_to"))
        stream_reads.stream_info(conn, key)  # a missing DLQ is a 404 now
        job = jobs.job_create(
            kind=jobs.KIND_REQUEUE_MATCHING, conn=conn, user=user, key=key,
            parameters={"query": query, "up_to": up_to},
        )  # fmt: skip
        record.params["job"] = job.pk
    return job
