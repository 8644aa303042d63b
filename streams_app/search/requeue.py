"""The job behind "requeue the dead letters matching this": a search that requeues what it finds.

The body scans the DLQ oldest first up to ``up_to`` (the newest dead letter when the operator
confirmed: later arrivals are never touched) with :func:`~streams_app.search.search_page`, one bounded
step at a time, and requeues each step's matches with the same per-entry atomic move as the requeue
buttons (:func:`streams_app.redis_ops.actions.requeue`: "still in the DLQ? XADD + XDEL", under the
job's own lease on a cluster). The search cursor is saved with the counts.

Exactly once: a step replayed from an older cursor after a crash finds the entries it already moved
gone from the DLQ (``missing``), so none is requeued twice and, as requeued entries leave the range
behind the cursor, none is skipped. The counts of a run killed between a move and its save are the
bound: those moves show as ``missing`` rather than ``done`` after the resume.

A dead letter whose own data makes the query too costly to evaluate (:mod:`eventbus.search.cost`) is
not requeued: the job counts it (``too_costly``) and its note says how many stayed.
"""

from __future__ import annotations

from eventbus.text import display_text, id_order
from streams_app.audit.records import AUDIT_MAX_IDS
from streams_app.jobs.models import Job
from streams_app.jobs.runner import Progress
from streams_app.masking.apply import search_mask
from streams_app.redis_ops import actions
from streams_app.search.scan import compile_query

from .scan import search_page

STEP_ENTRIES = 5000
STEP_MATCHES = 500
STEP_MS = 1000


def _audit_update(audit: dict, requeued: tuple) -> dict:
    """The job's audit row: each dead letter and the copy it became (the first :data:`AUDIT_MAX_IDS`), and
    the range of the dead letters it requeued, so a journey finds the copies by ID."""
    pairs = list(audit.get("requeued") or [])
    pairs += [[r.dlq_id, display_text(r.stream), r.new_id] for r in requeued][: max(0, AUDIT_MAX_IDS - len(pairs))]
    ids = [r.dlq_id for r in requeued] + list(audit.get("dlq_range") or [])
    ordered = sorted(ids, key=id_order)
    return {"requeued": pairs, "dlq_range": [ordered[0], ordered[-1]] if ordered else None}


def requeue_matching_run(job: Job, progress: Progress) -> None:
    """Requeue the DLQ entries up to ``up_to`` that match ``query`` (see the module docstring)."""
    conn = job.connection
    key = bytes.fromhex(job.parameters["key"])
    query = compile_query(job.parameters["query"])
    up_to = job.parameters["up_to"]
    state = dict(job.progress or {})
    cursor: str | None = state.get("cursor")
    scanned = int(state.get("scanned", 0))
    missing = int(state.get("missing", 0))
    failed = int(state.get("failed", 0))
    costly = int(state.get("too_costly", 0))
    reasons: list[str] = list(state.get("reasons", []))
    done = job.done
    mask = search_mask(job.created_by, conn, key)  # it selects what its creator could find
    audit: dict = dict(state.get("audit") or {"requeued": [], "dlq_range": None})
    while True:
        page = search_page(
            conn, key, query, end=up_to, direction="asc", cursor=cursor, limit=STEP_MATCHES,
            budget_entries=STEP_ENTRIES, budget_ms=STEP_MS, dlq=True, mask=mask,
        )  # fmt: skip
        scanned += page.scanned
        costly += page.too_costly
        if page.matches:
            result = actions.requeue(conn, key, ids=[m.id for m in page.matches], owner=f"job:{job.pk}")
            done += len(result.requeued)
            audit = _audit_update(audit, result.requeued)
            missing += len(result.missing)
            failed += len(result.failed)
            for failure in result.failed:
                if len(reasons) < 5 and failure.reason not in reasons:
                    reasons.append(failure.reason)
        cursor = None if page.complete else page.next
        if page.complete or progress.due():
            state = {
                "cursor": cursor,
                "scanned": scanned,
                "missing": missing,
                "failed": failed,
                "reasons": reasons,
                "too_costly": costly,
                "audit": audit,
            }
            progress.save(done=done, total=None, progress=state, force=True)
        if page.complete:
            break
    if costly:
        progress.note(
            f"{costly} dead letter{'' if costly == 1 else 's'} too costly to evaluate (their data makes the "
            "expression too costly) were left in the DLQ."
        )
    if failed:
        progress.note(
            f"{failed} matching entr{'y' if failed == 1 else 'ies'} could not be requeued and stay in the DLQ: "
            + "; ".join(reasons)
        )
