"""Where a replay job stands when a run of it starts.

A replay has two bodies: a range (:func:`streams_app.jobs.kinds.replay_run`) and the entries of a range
a search matches (:func:`streams_app.search.replay.replay_matching_run`). Both copy with scripts that
keep the cursor and a count of the copies in the monitored Redis under the job's ``job_key``, so both
read their parameters and resume the same way: here, once.

Both record, for the job's ``replay.finished`` audit row, where its copies are (:func:`replay_audit`), so
the journey of an event finds its replayed copy by ID rather than by scanning the target.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventbus.text import display_text
from streams_app.jobs.models import Job
from streams_app.redis_ops import actions
from streams_app.redis_ops.commands import server_ms

#: Batches a replay's audit row describes one by one (each: its first and last source ID copied, its first
#: and last copy, how many): about 100 bytes each. Past them, the row's ``copies_ms`` (the time window the
#: copies were made in, so their IDs' range in the target) still bounds where a copy can be.
AUDIT_BATCHES = 200


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
    #: what the job's audit row will say about its copies so far (:func:`replay_audit`)
    audit: dict[str, Any]


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
    audit = saved.get("audit") if isinstance(saved.get("audit"), dict) else None
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
        audit=audit or {"replayed": {
            "target": display_text(target), "target_hex": target.hex(), "source_range": [params["start"], params["end"]],
            "count": 0, "copy_range": None, "batches": [], "copies_ms": [server_ms(conn), None],
        }},  # fmt: skip
    )


def replay_audit(audit: dict[str, Any], conn: str, step: actions.ReplayBatch, *, done: int) -> dict[str, Any]:
    """``audit`` with one more batch: its copies' place (the span the script reported), the count, the range of
    every copy and the time up to which copies were made. A batch a killed run made before saving is in no
    span, but within ``copies_ms`` (its start is taken before the first batch, its end after each)."""
    made = dict(audit["replayed"])
    made["count"] = done
    made["copies_ms"] = [made["copies_ms"][0], server_ms(conn)]
    if step.span is not None:
        first, last, copy_first, copy_last = step.span
        made["copy_range"] = [(made.get("copy_range") or [copy_first])[0], copy_last]
        batches = list(made.get("batches") or [])
        if len(batches) < AUDIT_BATCHES:
            made["batches"] = [*batches, [first, last, copy_first, copy_last, step.copied]]
        else:
            made["batches_left_out"] = int(made.get("batches_left_out", 0)) + 1
    return {**audit, "replayed": made}
