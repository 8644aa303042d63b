"""Replay a range of a stream: count it first (a dry run), then copy it in a background job."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING

from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.redis_ops import actions
from streams_app.redis_ops.decoding import display_text
from streams_app.services.audit import action_audit

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike


@dataclass(frozen=True, slots=True)
class ReplayPreview:
    """A dry run: the exact range that will be copied, and how many entries it holds."""

    start: str
    end: str
    target: bytes
    match: dict[bytes, bytes]
    count: int


def stream_replay_count(
    *,
    user: UserLike | None,
    conn: str,
    key: bytes,
    start: str,
    end: str,
    target: bytes | None = None,
    match: Mapping[bytes, bytes] | None = None,
) -> ReplayPreview:
    """Count what a replay would copy, changing nothing; times are resolved to exact IDs here.

    The resolved IDs go into the confirm form, so the replay copies the range that was counted even
    if it names the same stream as its target (whose copies land after ``end``).
    """
    match = dict(match or {})
    target = target or key
    params = {"start": start, "end": end, "target": target, "match": match}
    with action_audit(user=user, conn=conn, action="replay.count", stream=key, params=params) as record:
        first, last = actions.resolve_range(conn, key, start, end)
        count = actions.replay_count(conn, key, start=first, end=last, match=match or None)
        record.params.update(start_id=first, end_id=last, count=count)
    return ReplayPreview(start=first, end=last, target=target, match=match, count=count)


def stream_replay(
    *,
    user: UserLike | None,
    conn: str,
    key: bytes,
    start: str,
    end: str,
    target: bytes | None = None,
    match: Mapping[bytes, bytes] | None = None,
    batch: int | None = None,
) -> Job:
    """Start a background job copying the range ``start``..``end`` of ``key`` to ``target``.

    Copies get new IDs and a ``_replayed_from`` field. The range is resolved to exact IDs before the
    job starts, so a replay into the same stream never copies its own copies.
    """
    match = dict(match or {})
    target = target or key
    params = {"start": start, "end": end, "target": target, "match": match}
    with action_audit(user=user, conn=conn, action="replay", stream=key, params=params) as record:
        first, last = actions.resolve_range(conn, key, start, end)
        job = jobs.job_create(
            kind=jobs.KIND_REPLAY, conn=conn, user=user, key=key,
            parameters={
                "start": first,
                "end": last,
                "target": target.hex(),
                "target_text": display_text(target),
                "match": [[name.hex(), value.hex()] for name, value in match.items()],
                **({"batch": batch} if batch else {}),
            },
        )
        record.params.update(start_id=first, end_id=last, job=job.pk)
    return job
