"""Replay a range of a stream: count it first (a dry run), then copy it in a background job."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from eventbus.text import display_text
from streams_app import search
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.masking.apply import search_mask
from streams_app.masking.copies import match_shown, write_check
from streams_app.redis_ops import actions
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
        _policy(record.params, user=user, key=key, target=target, match=match)
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
    query: str | None = None,
) -> Job:
    """Start a background job copying the range ``start``..``end`` of ``key`` to ``target``.

    Copies get new IDs and a ``_replayed_from`` field. The range is resolved to exact IDs before the
    job starts, so a replay into the same stream never copies its own copies. With ``query`` only the
    entries of the range the search matches (as ``user`` sees them, masked) are copied
    (:mod:`streams_app.search.replay`).
    """
    match = dict(match or {})
    target = target or key
    params = {"start": start, "end": end, "target": target, "match": match}
    if query:
        params["query"] = query
    with action_audit(user=user, conn=conn, action="replay", stream=key, params=params) as record:
        _policy(record.params, user=user, key=key, target=target, match=match)
        if query:
            search.compile_query(query)  # a bad expression is a 400 now, not a failed job later
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
                **({"query": query} if query else {}),
            },
        )
        record.params.update(start_id=first, end_id=last, job=job.pk)
    return job


def _policy(
    params: dict[str, Any], *, user: UserLike | None, key: bytes, target: bytes, match: dict[bytes, bytes]
) -> None:
    """The masking policy of a copy and of its match (:mod:`streams_app.masking.copies`), into the audit
    row: what it allowed and, for a masked field matched on, its value masked in the row."""
    found = write_check(user=user, key=key, target=target, match=match)
    params.update(found)
    if "matched_masked" in found:
        params["match"] = match_shown(key, match)


@dataclass(frozen=True, slots=True)
class ReplayMatchingPreview:
    """How many entries of the exact range ``start``..``end`` match ``query`` (at least, when
    ``complete`` is False: the count stopped after ``scanned`` entries or at
    :data:`~streams_app.search.MAX_LIMIT` matches; the job searches the whole range). ``too_costly``
    entries of those scanned were left out because their own data made the query too costly to
    evaluate: not counted, and the job leaves them out too."""

    query: str
    start: str
    end: str
    count: int
    scanned: int
    complete: bool
    too_costly: int = 0


def stream_replay_matching_count(
    *, user: UserLike | None, conn: str, key: bytes, query: str, start: str | None, end: str | None
) -> ReplayMatchingPreview:
    """Count the entries of ``start``..``end`` (default: the whole stream, up to its newest entry now)
    that ``query`` matches as ``user`` sees them, changing nothing; the range is resolved to exact IDs,
    which the confirm form carries, so the job searches the range that was counted. A read, like the
    search it repeats (no role beyond reading, no audit row): the replay itself is checked and audited."""
    compiled = search.compile_query(query)
    first, last = actions.resolve_range(conn, key, start or "-", end or "+")
    page = search.search_page(
        conn, key, compiled, start=first, end=last, limit=search.MAX_LIMIT, mask=search_mask(user, conn, key)
    )
    return ReplayMatchingPreview(
        query=query, start=first, end=last, count=len(page.matches), scanned=page.scanned,
        complete=page.complete, too_costly=page.too_costly,
    )  # fmt: skip
