"""The body of a replay job with a search query: "replay the entries matching this".

A replay (:func:`streams_app.jobs.kinds.replay_run`) copies a fixed range; with ``query`` in its
parameters it copies only the entries of that range the query matches, evaluated as its creator
searches (:func:`~streams_app.masking.apply.search_mask`: a value they see masked selects nothing).
Each step is a bounded :func:`~streams_app.search.search_page` after the cursor; the matches' original
entries are read back by ID (the search saw masked copies; a replay copies what is in the stream) and
handed with the position the step reached to
:func:`~streams_app.redis_ops.actions.replay_selected.replay_entries`, which copies them and moves the
Redis-side cursor and count in one script. Exactly once, as for a plain replay: a run resumed after a
crash starts from that cursor, and the script skips anything at or before it.
"""

from __future__ import annotations

from streams_app.jobs.models import Job
from streams_app.jobs.replay_resume import replay_audit, replay_resume
from streams_app.jobs.runner import Progress
from streams_app.masking.apply import search_mask
from streams_app.redis_ops.actions.replay_selected import replay_entries
from streams_app.redis_ops.reads import entries as entry_reads
from streams_app.search.scan import compile_query

from .scan import search_page

STEP_ENTRIES = 5000
STEP_MATCHES = 500  # at most MAX_PAGE: the matches are read back by ID in one round trip
STEP_MS = 1000


def replay_matching_run(job: Job, progress: Progress) -> None:
    """Copy the entries of the job's range that match its ``query`` (module docstring)."""
    run = replay_resume(job)
    done, cursor, scanned, base, audit = run.done, run.cursor, run.scanned, run.base, run.audit
    costly = int((job.progress or {}).get("too_costly", 0))
    query = compile_query(job.parameters["query"])
    mask = search_mask(job.created_by, run.conn, run.key)  # it selects what its creator could find
    progress.save(
        done=done, total=None, force=True,
        progress={"cursor": cursor, "scanned": scanned, "base": base, "too_costly": costly, "audit": audit},
    )  # fmt: skip
    while True:
        page = search_page(
            run.conn, run.key, query, start=run.start, end=run.end, direction="asc", cursor=cursor,
            limit=STEP_MATCHES, budget_entries=STEP_ENTRIES, budget_ms=STEP_MS, mask=mask,
        )  # fmt: skip
        # The stored bytes, read back to be copied inside Redis: no reader sees them here, and the
        # copy's target was checked to mask them as the source does (streams_app.masking.copies).
        found = [m.id for m in page.matches]
        originals = entry_reads.entries_at(run.conn, run.key, found, mask=None) if found else {}
        reached = run.end if page.complete else (page.next or run.end)
        step = replay_entries(
            run.conn, run.target, [e for e in originals.values() if e is not None], reached=reached,
            job_key=run.job_key, match=run.match, done=page.complete,
        )  # fmt: skip
        done = base + step.counted
        scanned += page.scanned
        costly += page.too_costly
        cursor = step.cursor
        audit = replay_audit(audit, run.conn, step, done=done)
        progress.save(done=done, total=done if cursor is None else None, force=cursor is None,
                      progress={"cursor": cursor, "scanned": scanned, "base": base, "too_costly": costly,
                                "audit": audit})  # fmt: skip
        if cursor is None:
            if costly:
                progress.note(
                    f"{costly} entr{'y' if costly == 1 else 'ies'} too costly to evaluate (their data makes the "
                    "expression too costly) were not replayed."
                )
            return
