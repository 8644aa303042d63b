"""Replay: copy a fixed range of a stream's entries (optionally filtered by field values) to a stream.

:func:`resolve_range` fixes the range when the job starts; :func:`replay_range` copies a batch and
advances a Redis-side cursor and a count of the copies in one script (``lua/replay.lua``), so a job
resumed after a crash copies nothing twice and knows exactly how many copies it made, whatever progress
its caller managed to save. The dry runs count inside Redis.

**Where the cursor lives.** The cursor and the count are the console's keys in the monitored Redis,
and they must move in the same atomic step as the copies, so they live in the *target*'s hash slot:
the job's ``job_key`` is used as given when it already shares that slot (always on one server) and is
otherwise prefixed with a tag hashing like the target (:func:`._common.slot_twin`). The source is only
read, and a read is harmless to repeat.

**Across slots** (Redis Cluster, source and target on different slots) no script can read the
source and write the target, so the batch is read by the client (XRANGE, after the further of the
stored cursor and ``after``) and handed to ``lua/replay_copy.lua`` in the target's slot, which adds
the copies, moves the cursor and counts them in one step and skips any entry at or before the stored
cursor. Same guarantee as the one-script path: a killed job resumes without copying anything twice,
and its count is exact. The cost is that each entry travels to the client and back.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from eventbus.keys import hash_tag
from eventbus.moves import slot_twin

from ..client import get_client, is_cluster, same_slot
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
    #: (first source ID copied, last, first copy's ID, last copy's): one script adds a batch's copies, so
    #: they are contiguous in the target and a source ID in the first pair's range has its copy in the
    #: second's (what a job's audit row records for a journey); None when nothing was copied.
    span: tuple[str, str, str, str] | None = None


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

    With ``job_key`` the copies, the cursor (stored under ``job_key`` in the monitored Redis, in the
    target's slot: :func:`cursor_key`, with a TTL) and the count of copies (under that key +
    ``b":copied"``, same TTL) move in one script, and
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
    client = get_client(conn)
    with translated(conn):
        job_keys = []
        if job_key is not None:
            placed = cursor_key(conn, _key(job_key, "job key"), target=target)
            job_keys = [placed, _copied_key(placed)]
        [target_type] = stream_pipeline(conn, client, key, [("TYPE", target)])
        if target_type not in (b"none", b"stream"):
            raise InvalidArgument("The replay target holds another type, not a stream.", conn=conn)
        if not same_slot(conn, key, target):
            return _replay_across(
                conn, key, target, job_keys, first=first, cursor=cursor, last=last, batch=batch,
                ttl_ms=cursor_ttl_ms, pairs=pairs,
            )
        copied, scanned, reached, done, counted, span = _script(client, "replay")(
            keys=[key, target, *job_keys], args=[first, cursor, last, batch, cursor_ttl_ms, *pairs]
        )
    return ReplayBatch(
        copied=int(copied), scanned=int(scanned), cursor=None if done else reply_text(reached), counted=int(counted),
        span=copy_span(span),
    )


def _replay_across(
    conn: str, key: bytes, target: bytes, job_keys: list[bytes], *, first: str, cursor: str, last: str,
    batch: int, ttl_ms: int, pairs: list[bytes],
) -> ReplayBatch:
    """One batch of a replay whose source and target are in different slots (see the module docstring)."""
    client = get_client(conn)
    if job_keys:
        stored = reply_text(client.get(job_keys[0]))
        if stored and (not cursor or _sid(cursor) < _sid(stored)):
            cursor = stored
    if cursor and _sid(cursor) >= _sid(last):
        counted = client.get(job_keys[1]) if job_keys else None
        return ReplayBatch(copied=0, scanned=0, cursor=None, counted=int(counted or 0))
    start = "(" + cursor if cursor and _sid(first) <= _sid(cursor) else first
    raw = stream_read(conn, client, key, "XRANGE", key, start, last, "COUNT", batch)
    done = len(raw) < batch or (bool(raw) and reply_text(raw[-1][0]) == last)
    reached = last if done else reply_text(raw[-1][0])
    entries: list[bytes | str | int] = []
    for entry_id, fields in raw:
        entries += (entry_id, len(fields), *fields)
    copied, counted, span = _script(client, "replay_copy")(
        keys=[target, *job_keys], args=[reached, ttl_ms, len(entries), *entries, *pairs]
    )
    return ReplayBatch(copied=int(copied), scanned=len(raw), cursor=None if done else reached, counted=int(counted),
                       span=copy_span(span))  # fmt: skip


def copy_span(reply: list[Any]) -> tuple[str, str, str, str] | None:
    """The scripts' ``{first source ID, last, first copy, last copy}`` (``{}`` when nothing was copied)."""
    if not reply:
        return None
    first, last, copy_first, copy_last = (reply_text(i) or "" for i in reply)
    return first, last, copy_first, copy_last


def cursor_key(conn: str, job_key: bytes, *, target: bytes) -> bytes:
    """Where a replay job's cursor is kept: ``job_key`` itself on one server, or on a cluster when its
    own ``{tag}`` puts it (and its count key) in ``target``'s slot; else ``job_key`` behind a tag of the
    target's slot (see the module docstring)."""
    tagged = hash_tag(job_key.decode("latin-1")) is not None  # then ``job_key + b":copied"`` hashes alike
    if not is_cluster(conn) or (tagged and same_slot(conn, job_key, target)):
        return job_key
    return slot_twin(target, job_key)


def replay_cursor(conn: str, job_key: bytes, *, target: bytes | None = None) -> str | None:
    """The Redis-side cursor of a replay job into ``target``: the last source ID it handled, or None if
    it never ran (or its cursor expired). Without ``target``, ``job_key`` is read as given."""
    _key(job_key, "job key")
    with translated(conn):
        placed = cursor_key(conn, job_key, target=target) if target else job_key
        return reply_text(get_client(conn).get(placed))


def replay_copied(conn: str, job_key: bytes, *, target: bytes | None = None) -> int | None:
    """How many copies the replay job of ``job_key`` made in all, as its script counted them; None when
    no count is kept (the job never ran, its keys expired, or it started before counts were kept)."""
    _key(job_key, "job key")
    with translated(conn):
        placed = cursor_key(conn, job_key, target=target) if target else job_key
        value = get_client(conn).get(_copied_key(placed))
    return None if value is None else int(value)


def _copied_key(job_key: bytes) -> bytes:
    """Where the replay script counts a job's copies: next to its cursor, under the same TTL."""
    return job_key + b":copied"
