"""Where a replay job stands when a run of it starts.

A replay has two bodies: a range (:func:`streams_app.jobs.kinds.replay_run`) and the entries of a range
a search matches (:func:`streams_app.search.replay.replay_matching_run`). Both copy with scripts that
keep the cursor and a count of the copies in the monitored Redis under the job's ``job_key``, so both
read their parameters and resume the same way: here, once.
"""

from __future__ import annotations

from dataclasses import dataclass

from streams_app.jobs.models import Job
from streams_app.redis_ops import actions


@dataclass(frozen=True, slots=True)
class ReplayResume:
    """A replay job's parameters (as :func:`streams_app.services.replay.stream_replay` wrote them) and
    its progress, reconciled with Redis."""

    conn: str
    key: bytes
    target: bytes
    match: dict[bytes, bytes] | None
    job_key: bytes
    start: str
    end: str
    cursor: str | None
    scanned: int
    base: int
    done: int


def replay_resume(job: Job) -> ReplayResume:
    """Read ``job`` and where its copies stand.

    ``done`` is ``base`` plus the count the script keeps next to the cursor: ``base`` is what the job
    had counted when that Redis-side count (re)started at zero (it expired, or the job began before
    counts were kept), so a resume after a crash picks up every copy the killed run made, saved or not.
    The cursor in Redis wins over the saved one for the same reason.
    """
    params = job.parameters
    conn = job.connection
    target = bytes.fromhex(params["target"])
    job_key = params["job_key"].encode()
    saved = dict(job.progress or {})
    cursor = actions.replay_cursor(conn, job_key, target=target) or saved.get("cursor")
    done = job.done
    counted = actions.replay_copied(conn, job_key, target=target)
    base = int(saved.get("base", 0))
    if counted is None:
        base = done  # Redis keeps no count for this job (yet): it starts from zero at the next step
    else:
        done = base + counted
    return ReplayResume(
        conn=conn,
        key=bytes.fromhex(params["key"]),
        target=target,
        match={bytes.fromhex(name): bytes.fromhex(value) for name, value in params.get("match", [])} or None,
        job_key=job_key,
        start=params["start"],
        end=params["end"],
        cursor=cursor,
        scanned=int(saved.get("scanned", 0)),
        base=base,
        done=done,
    )
