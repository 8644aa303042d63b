"""Replay: copy a fixed range of a stream's entries (optionally filtered by field values) to a stream.

:func:`resolve_range` fixes the range when the job starts; :func:`replay_range` copies a batch and
advances a Redis-side cursor and a count of the copies in one script (``lua/replay.lua``), so a job
resumed after a crash copies nothing twice and knows exactly how many copies it made, whatever progress
its caller managed to save. The dry runs count inside Redis.
"""

from __future__ import annotations

from dataclasses import dataclass

from ..client import get_client
from ..commands import stream_pipeline, stream_read
from ..errors import InvalidArgument, translated
from ..ids import parse_id, parse_position
from ..parsers import parse_stream, reply_text
from ._common import (
    COUNT_BATCH,
    MAX_BATCH,
    REPLAY_CURSOR_TTL_MS,
    ZERO_ID,
    _key,
    _match_args,
    _positive,
    _script,
    _sid,
)


@dataclass(frozen=True, slots=True)
class ReplayBatch:
    copied: int
    scanned: int
    cursor: str | None  # last source ID handled; None when the range is done
    #: Copies made under ``job_key`` so far, this batch included (kept in Redis by the same script);
    #: without a ``job_key``, this batch's copies.
    counted: int


@dataclass(frozen=True, slots=True)
class ReplayCount:
    """A dry run's figures: ``complete`` is False when ``limit`` stopped the scan (``matched`` is then
    a lower bound)."""

    matched: int
    scanned: int
    complete: bool


# ---------------------------------------------------------------- replay


def resolve_range(conn: str, key: bytes, start: str, end: str) -> tuple[str, str]:
    """Concrete, inclusive ``(first ID, last ID)`` for a replay of ``key``, fixed at job start.

    ``start``: an ID, a bare millisecond or ISO time (from its first possible ID), or ``-``/``0``.
    ``end``: an ID, a millisecond or time (up to its last possible ID), or ``+``/``$``. The end is
    capped at the stream's last generated ID *now*, so entries published later, including a replay's
    own copies into the same stream, are never inside the range.
    """
    _key(key)
    first = (
        ZERO_ID if (start or "").strip() in ("-", "0") else str(parse_position(start, what="start").lowest)
    )
    client = get_client(conn)
    info = parse_stream(key, stream_read(conn, client, key, "XINFO", "STREAM", key))
    last_generated = _sid(info.last_generated_id or ZERO_ID)
    if (end or "").strip() in ("+", "$"):
        upper = last_generated
    else:
        upper = parse_position(end, what="end").highest
        if _sid(first) > upper:
            raise InvalidArgument("The range starts after it ends.")
    return first, str(min(upper, last_generated))


def replay_count(conn: str, key: bytes, *, start: str, end: str, match: dict[bytes, bytes] | None = None) -> int:
    """Dry run: how many entries of [start, end] hold every ``field=value`` of ``match``.

    Reads at most :func:`replay_count_detail`'s default bound (the count is a lower bound past it);
    a caller that sets its own bound calls that function, which says whether the count is complete.
    """
    return replay_count_detail(conn, key, start=start, end=end, match=match).matched


def replay_count_detail(
    conn: str,
    key: bytes,
    *,
    start: str,
    end: str,
    match: dict[bytes, bytes] | None = None,
    limit: int = 1_000_000,
) -> ReplayCount:
    """The dry run with its scan figures. Counts inside Redis, 2,000 entries per call, reading at
    most ``limit`` entries; never XLEN (a sub-range) nor an unbounded XRANGE."""
    limit = _positive(limit, "limit")
    pairs = _match_args(match)
    first, last = resolve_range(conn, key, start, end)
    client = get_client(conn)
    matched = scanned = 0
    cursor = first
    with translated(conn):
        script = _script(client, "count_range")
        while scanned < limit:
            step = min(COUNT_BATCH, limit - scanned)
            read, hits, last_read = script(keys=[key], args=[cursor, last, step, *pairs])
            scanned += int(read)
            matched += int(hits)
            if int(read) < step or not last_read:
                return ReplayCount(matched=matched, scanned=scanned, complete=True)
            cursor = "(" + reply_text(last_read)
    return ReplayCount(matched=matched, scanned=scanned, complete=False)


def replay_range(
    conn: str,
    key: bytes,
    *,
    start: str,
    end: str,
    target: bytes,
    match: dict[bytes, bytes] | None = None,
    after: str | None = None,
    batch: int = 500,
    job_key: bytes | None = None,
    cursor_ttl_ms: int = REPLAY_CURSOR_TTL_MS,
) -> ReplayBatch:
    """Copy one batch of matching entries of [start, end] to ``target``, after ``after``.

    ``start`` and ``end`` must be concrete IDs from :func:`resolve_range`, fixed when the job started:
    re-resolving "+" per batch would chase the copies when ``target`` is ``key``.

    With ``job_key`` the copies, the cursor (stored under ``job_key`` in the monitored Redis, with a
    TTL) and the count of copies (under ``job_key + b":copied"``, same TTL) move in one script, and
    each batch starts after the further of that cursor and ``after``: a job killed between the script
    and saving its own progress resumes without copying anything twice, and ``counted`` says how many
    copies it made in all. Without ``job_key`` only ``after`` is known and a crash can repeat one batch.
    """
    _key(key)
    _key(target, "target stream")
    first = str(parse_id(start, allow_bare=False, what="start"))
    last = str(parse_id(end, allow_bare=False, what="end"))
    cursor = str(parse_id(after, allow_bare=False, what="after")) if after else ""
    batch = _positive(batch, "batch", cap=MAX_BATCH)
    _positive(cursor_ttl_ms, "cursor_ttl_ms")
    pairs = _match_args(match)
    keys = [key, target]
    if job_key is not None:
        keys += [_key(job_key, "job key"), _copied_key(job_key)]
    client = get_client(conn)
    with translated(conn):
        [target_type] = stream_pipeline(conn, client, key, [("TYPE", target)])
        if target_type not in (b"none", b"stream"):
            raise InvalidArgument("The replay target holds another type, not a stream.", conn=conn)
        copied, scanned, reached, done, counted = _script(client, "replay")(
            keys=keys, args=[first, cursor, last, batch, cursor_ttl_ms, *pairs]
        )
    return ReplayBatch(
        copied=int(copied), scanned=int(scanned), cursor=None if done else reply_text(reached), counted=int(counted)
    )


def replay_cursor(conn: str, job_key: bytes) -> str | None:
    """The Redis-side cursor of a replay job: the last source ID it handled, or None if it never ran
    (or its cursor expired)."""
    _key(job_key, "job key")
    with translated(conn):
        return reply_text(get_client(conn).get(job_key))


def replay_copied(conn: str, job_key: bytes) -> int | None:
    """How many copies the replay job of ``job_key`` made in all, as its script counted them; None when
    no count is kept (the job never ran, its keys expired, or it started before counts were kept)."""
    _key(job_key, "job key")
    with translated(conn):
        value = get_client(conn).get(_copied_key(job_key))
    return None if value is None else int(value)


def _copied_key(job_key: bytes) -> bytes:
    """Where the replay script counts a job's copies: next to its cursor, under the same TTL."""
    return job_key + b":copied"
