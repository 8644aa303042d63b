"""Replay the entries a caller chose: copy them and move the job's cursor and count in one step.

"Replay the entries matching this" (:mod:`streams_app.search.replay`) decides in Python which entries
of a range match a search, so Redis cannot read and filter the batch itself as ``lua/replay.lua`` does.
The caller reads a step of the range, keeps the matches and hands them here with the position the
step reached; ``lua/replay_copy.lua`` (the across-slots replay's script, in the target's slot, where
the cursor and the count live) adds the copies, moves the cursor to that position and counts the
copies in one atomic step, skipping anything at or before the stored cursor. So a job killed at any
point resumes from the stored cursor without copying an entry twice, and its count is exact: the
same guarantee as :func:`~streams_app.redis_ops.actions.replay_range`.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..client import get_client
from ..errors import InvalidArgument, translated
from ..ids import parse_id
from ..types import Entry
from ._common import REPLAY_CURSOR_TTL_MS, _key, _match_args, _script
from .replay import ReplayBatch, _copied_key, copy_span, cursor_key


def replay_entries(
    conn: str,
    target: bytes,
    entries: Sequence[Entry],
    *,
    reached: str,
    job_key: bytes,
    match: Mapping[bytes, bytes] | None = None,
    done: bool = False,
    cursor_ttl_ms: int = REPLAY_CURSOR_TTL_MS,
) -> ReplayBatch:
    """Copy ``entries`` (oldest first, none after ``reached``) to ``target`` and move the cursor of
    ``job_key`` to ``reached`` with them; ``done`` says the range ends there (``cursor`` None)."""
    _key(target, "target stream")
    _key(job_key, "job key")
    reached = str(parse_id(reached, allow_bare=False, what="reached"))
    args: list[bytes | str | int] = []
    for entry in entries:
        if parse_id(entry.id) > parse_id(reached):
            raise InvalidArgument("An entry to copy lies after the position the step reached.")
        flat = [part for pair in entry.fields for part in pair]
        args += (entry.id, len(flat), *flat)
    client = get_client(conn)
    with translated(conn):
        placed = cursor_key(conn, job_key, target=target)
        copied, counted, span = _script(client, "replay_copy")(
            keys=[target, placed, _copied_key(placed)],
            args=[reached, cursor_ttl_ms, len(args), *args, *_match_args(match)],
        )
    return ReplayBatch(
        copied=int(copied), scanned=len(entries), cursor=None if done else reached, counted=int(counted),
        span=copy_span(span),
    )
