"""The jobs that change a monitored Redis: requeue a whole DLQ, replay a range of a stream.

Each is a body the runner (:mod:`streams_app.jobs.runner`) calls with the job and its
:class:`~streams_app.jobs.runner.Progress`, possibly several times for one job (a redelivered task, a
resume). The work is idempotent on the Redis side, which is what makes "exactly once" hold even when a
worker dies between a batch and the save of its cursor:

* requeue: one Lua call per entry moves it (XADD to its stream + XDEL from the DLQ) only if it is still
  in the DLQ, so a batch replayed from an older cursor finds its entries gone; on Redis Cluster, an
  entry bound for another slot moves in steps under the job's own lease (``job:<id>``), so a resumed
  run finishes what the killed one leased and adds nothing twice
  (:mod:`streams_app.redis_ops.actions.moves`); the steps of consecutive batches travel together
  (:class:`~streams_app.redis_ops.actions.requeue_run.RequeueRun`), and the job saves only after
  finishing the batches in flight, so its saved cursor and count are exact and a cancel leaves no lease;
* replay: the access layer keeps the cursor in the monitored Redis (``job_key``, placed in the target's
  hash slot), advanced by the same script that writes the copies, and a resumed run starts from that
  cursor.

**Exact counts after a crash.** A worker killed between a batch and the save of its result leaves the
job's ``done`` behind what Redis moved; a run that starts from such unsettled progress
(:attr:`~streams_app.jobs.runner.Progress.settled` is False) reconciles it from Redis first:

* replay: the script counts the copies it makes next to the cursor (``job_key + ":copied"``), in the
  same atomic step, so ``done`` is that count: exact, whatever any operator does meanwhile;
* requeue: every save records the DLQ's length and its ``entries-added`` counter (XINFO STREAM,
  Redis 7). What left the DLQ since the last save is ``length then - length now + entries added
  since``: dead letters arriving meanwhile cancel out, and requeued entries are never added back
  to the DLQ. The bound: entries that *someone else* deleted or requeued from this DLQ between the
  job's last save and its resume (at most a quarter second of work before the crash plus the
  ~30 s until the resume) are counted as the job's, never more than the entries the job had left
  to move. Only a count inside the requeue scripts could tell them apart. Redis 6 has no
  ``entries-added``: there arrivals in that window make the reconciled count short by as many.
"""

from __future__ import annotations

import logging
import time
from typing import Any

from eventbus.text import display_text
from streams_app.jobs.models import Job
from streams_app.jobs.replay_resume import replay_audit, replay_resume
from streams_app.jobs.runner import KindBody, Progress
from streams_app.redis_ops import actions
from streams_app.redis_ops.commands import server_ms
from streams_app.redis_ops.errors import Unreachable
from streams_app.redis_ops.ids import parse_id
from streams_app.redis_ops.reads import streams as stream_reads

DEFAULT_BATCH = 1000
MAX_BATCH = 5000
#: Target streams a requeue-all's audit row counts by name (the most requeued); the rest are "others".
AUDIT_TARGETS = 10
#: Target streams a running requeue-all counts exactly; one past them is counted in "others" at once (a
#: DLQ of more than this many origin streams then counts a stream there once per batch that names it).
TARGETS_KEPT = 1000
#: How often a requeue-all reads again when a short batch ends it but the DLQ still holds entries up to
#: its bound, pausing RECHECK_PAUSE_S, then twice that, ... before leaving it to the task's retry.
FINAL_RECHECKS = 3
RECHECK_PAUSE_S = 0.2

log = logging.getLogger(__name__)


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
    elif not progress.settled and "dlq" in state:
        done += _left_since(conn, key, state["dlq"], at_most=max(0, (total or 0) - done))
    audit = state.get("audit") or _audit_start(conn, key, up_to)
    targets: dict[str, int] = dict(state.get("targets") or {})
    more: list[int] = list(state.get("targets_more") or [0, 0])
    state = {"cursor": cursor, "missing": missing, "failed": failed, "reasons": reasons, "dlq": _dlq_mark(conn, key),
             "audit": audit, "targets": targets, "targets_more": more}  # fmt: skip
    progress.save(done=done, total=total, progress=state, force=True)
    batch = _batch(job)
    rechecks = 0
    run = actions.RequeueRun(conn, key, up_to=up_to, after=cursor, batch=batch, owner=f"job:{job.pk}", itemize=False)
    while True:
        started_after = run.last
        step = run.step()
        # Saved only once the batches in flight are finished (drained): a stop at the save (cancelled,
        # lock lost) then leaves no lease and no copy of an entry still in the DLQ, and the cursor and the
        # count are exact.
        steps = [step, run.drain()] if step.cursor is not None and progress.due() else [step]
        for part in steps:
            done += part.moved
            _count_targets(targets, more, part.per_target)
            missing += len(part.result.missing)
            failed += len(part.result.failed)
            for failure in part.result.failed:
                if len(reasons) < 5 and failure.reason not in reasons:
                    reasons.append(failure.reason)
        rechecks = 0 if step.moved else rechecks
        cursor = step.cursor if len(steps) == 1 else run.cursor
        if cursor is None and actions.requeue_left(conn, key, after=step.last or started_after, up_to=up_to):
            # A short batch, yet the DLQ holds entries past it: that batch was answered by a server that
            # is not the primary's view (right after a failover). Never "done" with dead letters left:
            # look again from where the batch ended, and leave it to the task's retry if batches keep
            # reading nothing.
            rechecks += 1
            if rechecks > FINAL_RECHECKS:
                raise Unreachable(
                    f"{display_text(key)} still holds dead letters up to {up_to} after the requeue read none; "
                    "retrying once Redis agrees with itself."
                )
            log.warning("job %s: a short batch left dead letters in %r; reading again", job.pk, key)
            time.sleep(RECHECK_PAUSE_S * rechecks)
            cursor = step.last or started_after
            run = actions.RequeueRun(conn, key, up_to=up_to, after=cursor, batch=batch, owner=f"job:{job.pk}",
                                     itemize=False)  # fmt: skip
            if cursor is None:
                continue
        if cursor is None or len(steps) > 1:
            # The DLQ's mark goes with the count it matches, in the same save (see the module docstring).
            audit = {**audit, "copies_ms": [audit["copies_ms"][0], server_ms(conn)], "moved": done,
                     **_targets_audit(targets, more)}  # fmt: skip
            state = {"cursor": cursor, "missing": missing, "failed": failed, "reasons": reasons,
                     "dlq": _dlq_mark(conn, key), "audit": audit, "targets": targets, "targets_more": more}
            progress.save(done=done, total=total, progress=state, force=True)
        if cursor is None:
            break
    if failed:
        # Done, but not everything moved: say so where the page and the API show errors.
        progress.note(
            f"{failed} entr{'y' if failed == 1 else 'ies'} could not be requeued and stay in the DLQ: "
            + "; ".join(reasons)
        )


def _count_targets(targets: dict[str, int], more: list[int], batch: dict[bytes, int]) -> None:
    """Add a batch's copies per target stream to the job's counts (:data:`TARGETS_KEPT` names at most)."""
    for target, count in batch.items():
        name = display_text(target)
        if name in targets or len(targets) < TARGETS_KEPT:
            targets[name] = targets.get(name, 0) + count
        else:
            more[0], more[1] = more[0] + 1, more[1] + count


def _targets_audit(targets: dict[str, int], more: list[int]) -> dict[str, Any]:
    """The audit row's copies per target: the :data:`AUDIT_TARGETS` biggest by name, the others summed."""
    ranked = sorted(targets.items(), key=lambda item: (-item[1], item[0]))
    out: dict[str, Any] = {"per_target": dict(ranked[:AUDIT_TARGETS])}
    rest = ranked[AUDIT_TARGETS:]
    if rest or more[0]:
        out["per_target_others"] = {"streams": len(rest) + more[0], "entries": sum(n for _, n in rest) + more[1]}
    return out


def _audit_start(conn: str, key: bytes, up_to: str) -> dict[str, Any]:
    """What the job's audit row will say it covered: the DLQ's entries from its oldest now up to ``up_to``,
    and the time its copies are made from (their IDs in the target streams start there)."""
    first = stream_reads.stream_info(conn, key).first_id
    return {"dlq_range": [first or str(parse_id(up_to)), str(parse_id(up_to))], "copies_ms": [server_ms(conn), None]}


def _dlq_mark(conn: str, key: bytes) -> dict[str, Any]:
    """The DLQ's length and its count of entries ever added, to tell later how many left it since."""
    info = stream_reads.stream_info(conn, key)
    return {"length": info.length, "added": info.entries_added}


def _left_since(conn: str, key: bytes, mark: dict[str, Any], *, at_most: int) -> int:
    """How many entries left the DLQ since ``mark`` was taken: the moves a killed run did not save."""
    now = _dlq_mark(conn, key)
    left = int(mark.get("length", now["length"])) - now["length"]
    if mark.get("added") is not None and now["added"] is not None:
        left += now["added"] - int(mark["added"])  # arrivals since, which the length difference hides
    return max(0, min(left, at_most))


def _count_up_to(conn: str, key: bytes, up_to: str) -> int | None:
    """How many DLQ entries a requeue-all will move: XLEN when ``up_to`` is the newest, else a count."""
    info = stream_reads.stream_info(conn, key)
    if info.last_id is None:
        return 0
    if parse_id(info.last_id) <= parse_id(up_to):
        return info.length
    if info.first_id is None or parse_id(info.first_id) > parse_id(up_to):
        return 0
    return actions.replay_count(conn, key, start=info.first_id, end=str(parse_id(up_to)))


def replay_body(*, matching: KindBody) -> KindBody:
    """The replay kind's body: :func:`replay_run` copies a range; a job with ``query`` in its parameters
    ("replay the entries matching this") runs ``matching`` instead, where a search picks the copies.

    ``matching`` is search's (:func:`streams_app.search.replay.replay_matching_run`), handed in by
    ``StreamsAppConfig.ready`` as every kind's body is: search builds on jobs, so jobs imports no search.
    """

    def body(job: Job, progress: Progress) -> None:
        if job.parameters.get("query"):
            return matching(job, progress)
        return replay_run(job, progress)

    return body


def replay_run(job: Job, progress: Progress) -> None:
    """Copy a range in batches; the cursor lives in Redis next to the copies, so none is made twice,
    and so does the count of copies, so ``done`` is exact after a crash (:func:`replay_resume`)."""
    run = replay_resume(job)
    done, cursor, scanned, base, total = run.done, run.cursor, run.scanned, run.base, job.total
    audit = run.audit
    if total is None:
        total = actions.replay_count(run.conn, run.key, start=run.start, end=run.end, match=run.match)
    progress.save(done=done, total=total, progress={"cursor": cursor, "scanned": scanned, "base": base,
                                                    "audit": audit}, force=True)  # fmt: skip
    batch = _batch(job)
    while True:
        step = actions.replay_range(
            run.conn, run.key, start=run.start, end=run.end, target=run.target, match=run.match, after=cursor,
            batch=batch, job_key=run.job_key,
        )  # fmt: skip
        done = base + step.counted
        scanned += step.scanned
        cursor = step.cursor
        audit = replay_audit(audit, run.conn, step, done=done)
        progress.save(done=done, total=total, progress={"cursor": cursor, "scanned": scanned, "base": base,
                                                        "audit": audit}, force=cursor is None)  # fmt: skip
        if cursor is None:
            return
