"""The jobs that change a monitored Redis: requeue a whole DLQ, replay a range of a stream.

Each is a body the runner (:mod:`streams_app.jobs.runner`) calls with the job and its
:class:`~streams_app.jobs.runner.Progress`, possibly several times for one job (a redelivered task, a
resume). The work is idempotent on the Redis side, which is what makes "exactly once" hold even when a
worker dies between a batch and the save of its cursor:

* requeue: one Lua call per entry moves it (XADD to its stream + XDEL from the DLQ) only if it is still
  in the DLQ, so a batch replayed from an older cursor finds its entries gone;
* replay: the access layer keeps the cursor in the monitored Redis (``job_key``), advanced by the same
  script that writes the copies, and a resumed run starts from that cursor.
"""

from __future__ import annotations

from streams_app.jobs.models import Job
from streams_app.jobs.runner import Progress
from streams_app.redis_ops import actions, reads
from streams_app.redis_ops.ids import parse_id

DEFAULT_BATCH = 1000
MAX_BATCH = 5000


def _batch(job: Job) -> int:
    try:
        value = int(job.parameters.get("batch") or DEFAULT_BATCH)
    except (TypeError, ValueError):
        value = DEFAULT_BATCH
    return max(1, min(value, MAX_BATCH))


def requeue_all_run(job: Job, progress: Progress) -> None:
    """Requeue DLQ entries up to ``up_to`` in batches (each entry: one Lua call, exactly once)."""
    conn = job.connection
    key = bytes.fromhex(job.parameters["key"])
    up_to = job.parameters["up_to"]
    state = dict(job.progress or {})
    cursor: str | None = state.get("cursor")
    missing = int(state.get("missing", 0))
    failed = int(state.get("failed", 0))
    reasons: list[str] = list(state.get("reasons", []))
    done, total = job.done, job.total
    if total is None:
        total = _count_up_to(conn, key, up_to)
        progress.save(done=done, total=total, progress=state, force=True)
    batch = _batch(job)
    while True:
        step = actions.requeue_range(conn, key, up_to=up_to, after=cursor, batch=batch)
        done += len(step.result.requeued)
        missing += len(step.result.missing)
        failed += len(step.result.failed)
        for failure in step.result.failed:
            if len(reasons) < 5 and failure.reason not in reasons:
                reasons.append(failure.reason)
        cursor = step.cursor
        state = {"cursor": cursor, "missing": missing, "failed": failed, "reasons": reasons}
        progress.save(done=done, total=total, progress=state, force=cursor is None)
        if cursor is None:
            break
    if failed:
        # Done, but not everything moved: say so where the page and the API show errors.
        progress.note(
            f"{failed} entr{'y' if failed == 1 else 'ies'} could not be requeued and stay in the DLQ: "
            + "; ".join(reasons)
        )


def _count_up_to(conn: str, key: bytes, up_to: str) -> int | None:
    """How many DLQ entries a requeue-all will move: XLEN when ``up_to`` is the newest, else a count."""
    info = reads.stream_info(conn, key)
    if info.last_id is None:
        return 0
    if parse_id(info.last_id) <= parse_id(up_to):
        return info.length
    if info.first_id is None or parse_id(info.first_id) > parse_id(up_to):
        return 0
    return actions.replay_count(conn, key, start=info.first_id, end=str(parse_id(up_to)))


def replay_run(job: Job, progress: Progress) -> None:
    """Copy a range in batches; the cursor lives in Redis next to the copies, so none is made twice."""
    conn = job.connection
    params = job.parameters
    key = bytes.fromhex(params["key"])
    target = bytes.fromhex(params["target"])
    match = {bytes.fromhex(name): bytes.fromhex(value) for name, value in params.get("match", [])} or None
    job_key = params["job_key"].encode()
    start, end = params["start"], params["end"]
    done, total = job.done, job.total
    if total is None:
        total = actions.replay_count(conn, key, start=start, end=end, match=match)
        progress.save(done=done, total=total, progress=dict(job.progress or {}), force=True)
    batch = _batch(job)
    cursor = actions.replay_cursor(conn, job_key) or (job.progress or {}).get("cursor")
    scanned = int((job.progress or {}).get("scanned", 0))
    while True:
        step = actions.replay_range(
            conn, key, start=start, end=end, target=target, match=match, after=cursor, batch=batch, job_key=job_key
        )
        done += step.copied
        scanned += step.scanned
        cursor = step.cursor
        progress.save(done=done, total=total, progress={"cursor": cursor, "scanned": scanned}, force=cursor is None)
        if cursor is None:
            return
