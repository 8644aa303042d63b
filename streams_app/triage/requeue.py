"""The job behind a triage count's "requeue these": requeue exactly the dead letters a filter matches.

The body walks the DLQ newest first from ``up_to`` (the newest dead letter when the operator confirmed:
later arrivals are never read) with :func:`streams_app.redis_ops.reads.dlq.dlq_entries`, one bounded step
at a time, its filter the job's :class:`~streams_app.triage.counts.TriageFilter` over each dead letter as
its creator sees it (masked, by :class:`~streams_app.triage.counts.ShownDeadLetters`: a signature counted
from a masked error, ``••••`` for one a rule removed too, selects the same entries here), and requeues
each step's matches with the per-entry atomic move of the requeue buttons
(:func:`streams_app.redis_ops.actions.requeue`: "still in the DLQ? XADD + XDEL", under the job's own
lease on a cluster). The cursor (an exclusive upper bound) is saved with the counts.

Exactly once: a step replayed from an older save after a crash finds the entries it already moved gone
from the DLQ (``missing``), so none is requeued twice; the walk only goes older, and requeued entries
leave the DLQ, so none is skipped. A killed run's unsaved moves show as ``missing`` after the resume
rather than ``done``: the counts are a bound, Redis's state is exact.
"""

from __future__ import annotations

from streams_app.jobs.models import Job
from streams_app.jobs.runner import Progress
from streams_app.masking.apply import masker_for
from streams_app.redis_ops import actions
from streams_app.redis_ops.ids import U64_MAX, parse_id
from streams_app.redis_ops.reads import dlq as dlq_reads

from .counts import ShownDeadLetters, TriageFilter

#: Matches requeued per step, and dead letters read per step at most (a step may find no match).
STEP_MATCHES = 500
STEP_ENTRIES = 5000


def after_id(entry_id: str) -> str:
    """The ID just after ``entry_id``: an exclusive upper bound that still includes it."""
    at = parse_id(entry_id, allow_bare=False, what="up_to")
    return f"{at.ms}-{at.seq + 1}" if at.seq < U64_MAX else f"{at.ms + 1}-0"


def requeue_filtered_run(job: Job, progress: Progress) -> None:
    """Requeue the DLQ entries up to ``up_to`` that the job's filter matches (see the module docstring)."""
    conn = job.connection
    key = bytes.fromhex(job.parameters["key"])
    where = TriageFilter.from_params(job.parameters["filter"])
    state = dict(job.progress or {})
    cursor: str | None = state.get("cursor") or after_id(job.parameters["up_to"])
    missing = int(state.get("missing", 0))
    failed = int(state.get("failed", 0))
    reasons: list[str] = list(state.get("reasons", []))
    done = job.done
    # it selects what its creator was shown and counted (never revealed: a removed error is a hidden one)
    shown = ShownDeadLetters(masker_for(job.created_by, conn, key))
    while cursor is not None:
        matches, cursor = dlq_reads.dlq_entries(
            conn, key, before=cursor, count=STEP_MATCHES, where=shown.where(where), scan_limit=STEP_ENTRIES,
            mask=shown.mask,
        )  # fmt: skip
        shown.forget()
        if matches:
            result = actions.requeue(conn, key, ids=[m.id for m in matches], owner=f"job:{job.pk}")
            done += len(result.requeued)
            missing += len(result.missing)
            failed += len(result.failed)
            for failure in result.failed:
                if len(reasons) < 5 and failure.reason not in reasons:
                    reasons.append(failure.reason)
        if cursor is None or progress.due():
            state = {"cursor": cursor, "missing": missing, "failed": failed, "reasons": reasons}
            progress.save(done=done, total=job.total, progress=state, force=True)
    if failed:
        progress.note(
            f"{failed} matching entr{'y' if failed == 1 else 'ies'} could not be requeued and stay in the DLQ: "
            + "; ".join(reasons)
        )
