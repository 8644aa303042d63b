"""Dead-letter queues: requeue, delete or purge their entries (listing them is a read:
:mod:`streams_app.redis_ops.reads.dlq`)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eventbus.conventions import DlqKind
from eventbus.text import display_text
from streams_app.audit.records import AUDIT_MAX_IDS
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.redis_ops import actions, conventions
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.reads import streams as stream_reads
from streams_app.services.audit import action_audit

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike


def dlq_require(*, conn: str, key: bytes) -> DlqKind:
    """The key's DLQ convention; InvalidArgument when no convention claims it (so no requeue target)."""
    kind = conventions.detect_dlq(key)
    if kind is None:
        raise InvalidArgument(f"{display_text(key)!r} is not a dead-letter queue the console knows.", conn=conn)
    return kind


def dlq_requeue(*, user: UserLike | None, conn: str, key: bytes, ids: Sequence[str]) -> actions.RequeueResult:
    """Requeue the given DLQ entries now, each by one Lua call (exists? XADD + XDEL).

    Entries another operator requeued or deleted meanwhile come back as ``missing``: two people
    pressing the same button produce one new entry, not two.
    """
    with action_audit(user=user, conn=conn, action="dlq.requeue", stream=key, ids=ids) as record:
        dlq_require(conn=conn, key=key)
        result = actions.requeue(conn, key, ids=list(ids))
        record.affected = len(result.requeued)
        record.params.update(
            missing=list(result.missing),
            targets=sorted({display_text(r.stream) for r in result.requeued}),
            # each dead letter and the copy it became, so the event's journey finds the copy by its ID
            requeued=[[r.dlq_id, display_text(r.stream), r.new_id] for r in result.requeued[:AUDIT_MAX_IDS]],
        )
    return result


def dlq_requeue_all(*, user: UserLike | None, conn: str, key: bytes, up_to: str, batch: int | None = None) -> Job:
    """Start a background job requeueing every entry of the DLQ up to ``up_to`` (inclusive).

    ``up_to`` is the newest entry the operator saw, so entries dead-lettered after the page loaded
    are never touched. The job runs in batches, survives a killed worker and never requeues an entry
    twice (see :func:`streams_app.jobs.runner.job_run`).
    """
    params: dict[str, Any] = {"up_to": up_to}
    if batch is not None:
        params["batch"] = batch
    with action_audit(user=user, conn=conn, action="dlq.requeue_all", stream=key, params=params) as record:
        dlq_require(conn=conn, key=key)
        stream_reads.stream_info(conn, key)  # a missing DLQ is a 404 now, not a failed job later
        job = jobs.job_create(
            kind=jobs.KIND_REQUEUE_ALL, conn=conn, user=user, key=key,
            parameters={"up_to": str(up_to), **({"batch": batch} if batch else {})},
        )
        record.params["job"] = job.pk
    return job


@dataclass(frozen=True, slots=True)
class RequeueAllPreview:
    """What "requeue all up to ``up_to``" would move, counted now: ``count`` entries (a lower bound
    when ``complete`` is False), of a DLQ ``depth`` deep; the ``depth - count`` newer ones stay."""

    up_to: str
    count: int
    depth: int
    complete: bool


def dlq_requeue_all_preview(*, conn: str, key: bytes, up_to: str) -> RequeueAllPreview:
    """Count the DLQ entries not newer than ``up_to``: the exact set a requeue-all job would start with.

    A read for the confirm page (no audit row: nothing changes; the requeue is audited), counted
    inside Redis by the replay dry run's bounded script over ``-`` .. ``up_to`` (never XLEN: entries
    newer than ``up_to`` are not part of it).
    """
    dlq_require(conn=conn, key=key)
    info = stream_reads.stream_info(conn, key)  # a missing DLQ is a 404 here, as on its page
    counted = actions.replay_count_detail(conn, key, start="-", end=up_to)
    return RequeueAllPreview(up_to=up_to, count=counted.matched, depth=info.length, complete=counted.complete)


def dlq_delete(*, user: UserLike | None, conn: str, key: bytes, ids: Sequence[str]) -> int:
    """Delete DLQ entries for good (admin): for messages nobody should ever process."""
    with action_audit(user=user, conn=conn, action="dlq.delete", stream=key, ids=ids) as record:
        dlq_require(conn=conn, key=key)
        deleted = actions.dlq_delete(conn, key, ids=list(ids))
        record.affected = deleted
    return deleted


def dlq_purge(*, user: UserLike | None, conn: str, key: bytes, up_to: str, confirm: str) -> int:
    """Delete every DLQ entry up to ``up_to`` (admin), once the DLQ's name was typed to confirm.

    The typed name is checked here, not in the form, so the API cannot purge by accident either.
    """
    with action_audit(user=user, conn=conn, action="dlq.purge", stream=key, params={"up_to": up_to}) as record:
        dlq_require(conn=conn, key=key)
        if confirm != display_text(key):
            raise InvalidArgument("To purge, type the DLQ's name exactly as shown.", conn=conn)
        purged = actions.dlq_purge(conn, key, up_to=up_to)
        record.affected = purged
    return purged
