"""Dead-letter queues: list them, and requeue, delete or purge their entries."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from django.conf import settings

from streams_app.audit.records import AUDIT_MAX_IDS
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.masking.apply import search_mask
from streams_app.redis_ops import actions, conventions
from streams_app.redis_ops.decoding import display_text
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.reads import streams as stream_reads
from streams_app.redis_ops.reads.limits import MAX_PAGE
from streams_app.redis_ops.types import StreamSummary
from streams_app.services.audit import action_audit

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike


@dataclass(frozen=True, slots=True)
class DlqSummary:
    """One dead-letter queue as the DLQ list shows it."""

    key: bytes
    convention: str
    depth: int
    last_id: str | None
    source_streams: tuple[bytes, ...]


@dataclass(frozen=True, slots=True)
class DlqListing:
    dlqs: tuple[DlqSummary, ...]
    complete: bool  # False: the scan budget ran out, or some primaries of a cluster did not answer
    missed: tuple[str, ...] = ()  # primaries (host:port) whose DLQs could not be listed or read


#: Streams a DLQ's sample is read from to name its source streams and refine its convention.
DLQ_SAMPLE = 10
#: DLQs whose entries are sampled for the list; beyond these the key's own hint is all we show.
DLQ_SAMPLED_MAX = 100


def dlq_list(*, conn: str, budget: int | None = None) -> DlqListing:
    """The dead-letter queues of ``conn``: streams whose key follows a DLQ convention (docs/architecture.md#conventions-of-other-buses).

    Scanned with one ``SCAN ... TYPE stream`` per convention's glob (``*:dlq``, ``omni-dlq:*`` and
    each configured pattern), so a server with millions of other keys costs at most ``budget``
    keys looked at per glob, never ``KEYS``. The newest few entries of each DLQ name the streams it
    feeds back into and tell ``eventbus`` from ``streams`` entries under a ``{stream}:dlq`` key.
    """
    budget = budget or settings.BUSCONSOLE_SCAN_BUDGET
    globs = [b"*" + conventions.DLQ_SUFFIX, conventions.OMNI_DLQ_PREFIX + b"*"]
    globs += [pattern.match for pattern in conventions.dlq_patterns() if pattern.match not in globs]
    found: dict[bytes, StreamSummary] = {}
    complete = True
    missed: dict[str, None] = {}
    for glob in globs:
        cursor, scanned = 0, 0
        while True:
            page = stream_reads.streams_scan(conn, match=glob, cursor=cursor, count=MAX_PAGE, budget=budget)
            for summary in page.streams:
                if conventions.detect_dlq(summary.key) is not None:
                    found.setdefault(summary.key, summary)
            cursor, scanned = page.next_cursor, scanned + page.scanned
            missed.update(dict.fromkeys(page.missed))
            if cursor == 0:
                break
            if scanned >= budget:
                complete = False
                break
    out = []
    for index, key in enumerate(sorted(found)):
        summary = found[key]
        kind = conventions.detect_dlq(key)
        assert kind is not None
        sample: list[conventions.DlqEntry] = []
        if index < DLQ_SAMPLED_MAX and summary.length:
            # masked as anyone sees it: the convention and origin names read from it are shown
            sample, _ = actions.dlq_entries(conn, key, count=DLQ_SAMPLE, mask=search_mask(None, conn, key))
        out.append(
            DlqSummary(
                key=key,
                convention=dlq_convention_of(kind.convention, sample),
                depth=summary.length,
                last_id=summary.last_id,
                source_streams=tuple(conventions.dlq_source_streams(key, sample)),
            )
        )
    return DlqListing(dlqs=tuple(out), complete=complete and not missed, missed=tuple(missed))


def dlq_convention_of(key_convention: str, sample: Sequence[conventions.DlqEntry]) -> str:
    """``eventbus-or-streams`` becomes ``eventbus`` or ``streams`` when the sampled entries agree."""
    if key_convention != conventions.EVENTBUS_OR_STREAMS:
        return key_convention
    seen = {entry.convention for entry in sample}
    return seen.pop() if len(seen) == 1 else key_convention


def dlq_require(*, conn: str, key: bytes) -> conventions.DlqKind:
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
