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
from streams_app.jobs.runner import Progress
from streams_app.masking.apply import search_mask
from streams_app.redis_ops import actions, reads
from streams_app.redis_ops.actions.replay_selected import replay_entries

from .query import compile_query
from .scan import search_page

STEP_ENTRIES = 5000
STEP_MATCHES = 500  # at most reads.MAX_PAGE: the matches are read back by ID in one round trip
STEP_MS = 1000


def replay_matching_run(job: Job, progress: Progress) -> None:
    """Copy the entries of the job's range that match its ``query`` (module docstring)."""
    conn = job.connection
    params = job.parameters
    key = bytes.fromhex(params["key"])
    target = bytes.fromhex(params["target"])
    match = {bytes.fromhex(name): bytes.fromhex(value) for name, value in params.get("match", [])} or None
    job_key = params["job_key"].encode()
    start, end = params["start"], params["end"]
    query = compile_query(params["query"])
    mask = search_mask(job.created_by, conn, key)  # it selects what its creator could find
    saved = dict(job.progress or {})
    done = job.done
    cursor = actions.replay_cursor(conn, job_key, target=target) or saved.get("cursor")
    scanned = int(saved.get("scanned", 0))
    counted = actions.replay_copied(conn, job_key, target=target)
    base = int(saved.get("base", 0))
    if counted is None:
        base = done  # Redis keeps no count for this job yet: it starts from zero at the next step
    else:
        done = base + counted  # exact: the script counted every copy, saved or not
    progress.save(
        done=done, total=None, progress={"cursor": cursor, "scanned": scanned, "base": base}, force=True
    )
    while True:
        page = search_page(
            conn, key, query, start=start, end=end, direction="asc", cursor=cursor, limit=STEP_MATCHES,
            budget_entries=STEP_ENTRIES, budget_ms=STEP_MS, mask=mask,
        )  # fmt: skip
        originals = reads.entries_at(conn, key, [m.id for m in page.matches]) if page.matches else {}
        reached = end if page.complete else (page.next or end)
        step = replay_entries(
            conn, target, [e for e in originals.values() if e is not None], reached=reached, job_key=job_key,
            match=match, done=page.complete,
        )  # fmt: skip
        done = base + step.counted
        scanned += page.scanned
        cursor = step.cursor
        progress.save(done=done, total=done if cursor is None else None,
                      progress={"cursor": cursor, "scanned": scanned, "base": base}, force=cursor is None)  # fmt: skip
        if cursor is None:
            return
