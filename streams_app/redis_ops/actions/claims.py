"""Claim, autoclaim and ack: taking over or settling pending entries of a consumer group.

**claim** is XCLAIM with the operator's ``min_idle_ms``: an entry its consumer touched since the page
loaded is not stolen, and the outcome of every ID is read inside the same MULTI as the XCLAIM.
**autoclaim** sweeps the PEL with XAUTOCLAIM in bounded calls; **ack** is XACK, telling "no such
group" apart from "nothing acked".
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from eventbus.connection import SyncClient

from ..client import get_client, key_client
from ..commands import lookup, stream_pipeline
from ..errors import NotFound, translated
from ..ids import parse_id
from ..parsers import parse_group, parse_pending_entry, reply_text
from ._common import MAX_AUTOCLAIM_COUNT, ZERO_ID, _ids, _key, _name, _non_negative, _positive


@dataclass(frozen=True, slots=True)
class ClaimResult:
    """Outcome of a claim or an autoclaim sweep, each ID in exactly one tuple.

    ``deleted`` are IDs that were pending but whose message no longer exists in the stream: Redis 7
    drops them from the PEL during the claim (Redis 6.2 leaves them pending: ack them away).
    ``skipped`` are IDs not claimed because they are not pending or were active more recently than
    ``min_idle_ms`` (always empty for autoclaim: XAUTOCLAIM does not report what it passed over).
    """

    claimed: tuple[str, ...]
    skipped: tuple[str, ...]
    deleted: tuple[str, ...]
    next: str | None = None  # XAUTOCLAIM cursor to continue from; None when the sweep is complete


# ---------------------------------------------------------------- claim, autoclaim, ack


def claim(
    conn: str, key: bytes, group: bytes, *, ids: Sequence[str], consumer: bytes, min_idle_ms: int
) -> ClaimResult:
    """XCLAIM ``ids`` for ``consumer`` if they are still idle for ``min_idle_ms`` (deliveries + 1).

    Each ID's outcome is decided from replies read in one MULTI around the XCLAIM, so no other
    client can act in between: its existence (XRANGE id id) and its PEL row (XPENDING id id) before,
    the XCLAIM reply, and its PEL row after. An ID is

    * ``claimed`` when XCLAIM returned its entry;
    * ``deleted`` when the message did not exist but the ID was pending, and the claim dropped it
      from the PEL (Redis 7, which does so even if it was not idle enough) or took it over (Redis 6.2,
      where its delivery count grew and it stays pending under ``consumer``);
    * ``skipped`` otherwise: not pending, or pending but used more recently than ``min_idle_ms``.
    """
    _key(key)
    _name(group, "group")
    _name(consumer, "consumer")
    _non_negative(min_idle_ms, "min_idle_ms")
    wanted = _ids(ids)
    with translated(conn):
        # MULTI on the node owning the stream's slot (a cluster client has no MULTI): one key only.
        pipe = key_client(conn, key).pipeline(transaction=True)
        for entry_id in wanted:
            pipe.execute_command(*lookup(key, entry_id))
        for entry_id in wanted:
            pipe.execute_command("XPENDING", key, group, entry_id, entry_id, 1)
        pipe.execute_command("XCLAIM", key, group, consumer, min_idle_ms, *wanted)
        for entry_id in wanted:
            pipe.execute_command("XPENDING", key, group, entry_id, entry_id, 1)
        replies = pipe.execute()
    n = len(wanted)
    existed, before, claimed_raw, after = (
        replies[:n],
        replies[n : 2 * n],
        replies[2 * n],
        replies[2 * n + 1 :],
    )
    claimed_ids = {reply_text(item[0]) for item in claimed_raw if item}
    claimed, skipped, deleted = [], [], []
    for i, entry_id in enumerate(wanted):
        if entry_id in claimed_ids:
            claimed.append(entry_id)
        elif not existed[i] and before[i] and (not after[i] or _deliveries(after[i]) > _deliveries(before[i])):
            deleted.append(entry_id)
        else:
            skipped.append(entry_id)
    return ClaimResult(claimed=tuple(claimed), skipped=tuple(skipped), deleted=tuple(deleted))


def autoclaim(
    conn: str,
    key: bytes,
    group: bytes,
    *,
    consumer: bytes,
    min_idle_ms: int,
    count: int = 1000,
    start: str = "0-0",
    max_batches: int = 100,
    limit: int | None = None,
) -> ClaimResult:
    """Sweep the PEL from ``start`` with XAUTOCLAIM, ``count`` (at most 1000) entries per call.

    Stops when Redis returns the cursor 0-0 (``next`` is then None), after ``max_batches`` calls or
    once ``limit`` entries are claimed (``next`` is then where to continue). With ``limit`` each call
    asks for no more than the rest, so the sweep claims the first ``limit`` idle entries in ID order:
    exactly what its confirm page counted with XPENDING IDLE. Redis 7's third reply element, pending
    IDs whose message was deleted (dropped from the PEL by the sweep), is collected into ``deleted``.
    """
    _key(key)
    _name(group, "group")
    _name(consumer, "consumer")
    _non_negative(min_idle_ms, "min_idle_ms")
    count = _positive(count, "count", cap=MAX_AUTOCLAIM_COUNT)
    max_batches = _positive(max_batches, "max_batches")
    if limit is not None:
        limit = _positive(limit, "limit")
    cursor = str(parse_id(start, what="start"))
    client = get_client(conn)
    claimed: list[str] = []
    deleted: list[str] = []
    with translated(conn):
        for _ in range(max_batches):
            step = count if limit is None else min(count, limit - len(claimed))
            reply = client.execute_command(  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
                "XAUTOCLAIM", key, group, consumer, min_idle_ms, cursor, "COUNT", step
            )
            cursor = reply_text(reply[0])
            # Redis 6.2 may answer nil for an entry deleted meanwhile: it was claimed, but has no ID here.
            claimed += [reply_text(item[0]) for item in reply[1] if item]
            if len(reply) > 2:
                deleted += [reply_text(entry_id) for entry_id in reply[2]]
            if cursor == ZERO_ID or (limit is not None and len(claimed) >= limit):
                break
    return ClaimResult(
        claimed=tuple(claimed), skipped=(), deleted=tuple(deleted), next=None if cursor == ZERO_ID else cursor
    )


def ack(conn: str, key: bytes, group: bytes, *, ids: Sequence[str]) -> int:
    """XACK ``ids``; returns how many Redis found pending (already-acked IDs are not counted).

    XACK answers 0 for an unknown stream or group too, so when nothing was acked the group is looked
    up (XINFO GROUPS) to tell the operator "no such group" rather than "nothing acked".
    """
    _key(key)
    _name(group, "group")
    wanted = _ids(ids)
    client = get_client(conn)
    with translated(conn):
        [acked] = stream_pipeline(conn, key_client(conn, key), key, [("XACK", key, group, *wanted)], transaction=True)
        if not acked and not _has_group(client, key, group):
            raise NotFound("No such consumer group on this stream.", conn=conn)
    return int(acked)


def _deliveries(pel_rows: Sequence[Any]) -> int:
    """The delivery count of the one row ``XPENDING key group id id 1`` answered."""
    return parse_pending_entry(pel_rows[0]).deliveries


def _has_group(client: SyncClient, key: bytes, group: bytes) -> bool:
    return any(parse_group(row).name == group for row in client.execute_command("XINFO", "GROUPS", key))  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
