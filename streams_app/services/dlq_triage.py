"""A DLQ triage count feeding a bulk action: "requeue these" (the dead letters of one signature, group or
origin stream).

The counts are a read (:func:`dlq_triage`, no audit row). The preview counts what the job would move, up
to the newest dead letter now, with the same bounded read (a lower bound when the DLQ is longer than
the bound); the action starts the job (:mod:`streams_app.triage.requeue`) under the one role-and-audit
path, like "requeue the dead letters matching this" (:mod:`streams_app.services.dlq_search`). Its audit
row records the filter, the ``up_to`` and the count the operator confirmed; the job's own row at its
end says how many it moved.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import TYPE_CHECKING

from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.masking.apply import masker_for
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.ids import parse_id
from streams_app.redis_ops.reads import streams as stream_reads
from streams_app.services.audit import action_audit
from streams_app.services.dlq import dlq_require
from streams_app.triage.counts import TriageCounts, TriageFilter, triage_count

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike

ACTION = "dlq.requeue_filtered"


def dlq_triage(
    *, user: UserLike | None, conn: str, key: bytes, before: str | None = None, limit: int | None = None
) -> TriageCounts:
    """The DLQ's counts by signature, group and origin, as ``user`` may see its dead letters (masked,
    never revealed: a count is a search over every entry looked at)."""
    dlq_require(conn=conn, key=key)
    return triage_count(conn, key, masker=masker_for(user, conn, key), before=before, limit=limit)


@dataclass(frozen=True, slots=True)
class RequeueFilteredPreview:
    """``count`` dead letters up to ``up_to`` (None: the DLQ is empty) match ``filter``: exact when
    ``complete``, else counted over the ``looked`` newest of ``depth`` (at least that many)."""

    filter: TriageFilter
    up_to: str | None
    count: int
    looked: int
    depth: int
    complete: bool


def _require_filter(where: TriageFilter) -> None:
    if not where:
        raise InvalidArgument(
            "Say which dead letters: a signature, a group (or no_group) or an origin (or no_origin). "
            "To requeue them all, use requeue all."
        )


def dlq_requeue_filtered_preview(
    *, user: UserLike | None, conn: str, key: bytes, where: TriageFilter
) -> RequeueFilteredPreview:
    """Count the dead letters ``where`` matches up to the newest one now (a read: no audit row)."""
    _require_filter(where)
    dlq_require(conn=conn, key=key)
    counted = triage_count(conn, key, masker=masker_for(user, conn, key), where=where)
    return RequeueFilteredPreview(
        filter=where, up_to=counted.newest, count=sum(b.count for b in counted.signatures),
        looked=counted.looked, depth=counted.depth, complete=counted.complete,
    )  # fmt: skip


def dlq_requeue_filtered(
    *, user: UserLike | None, conn: str, key: bytes, where: TriageFilter, up_to: str, counted: int | None = None
) -> Job:
    """Start a job requeueing every dead letter up to ``up_to`` (inclusive) that ``where`` matches.
    ``counted``: the preview's count the operator confirmed, kept in the audit row."""
    params = {"filter": where.params(), "up_to": up_to, "counted": counted}
    with action_audit(user=user, conn=conn, action=ACTION, stream=key, params=params) as record:
        _require_filter(where)
        dlq_require(conn=conn, key=key)
        up_to = str(parse_id(up_to, allow_bare=False, what="up_to"))
        stream_reads.stream_info(conn, key)  # a missing DLQ is a 404 now, not a failed job later
        job = jobs.job_create(
            kind=jobs.KIND_REQUEUE_FILTERED, conn=conn, user=user, key=key,
            parameters={"filter": where.params(), "up_to": up_to},
        )  # fmt: skip
        record.params["job"] = job.pk
    return job
