"""Leases: the entries a consumer holds, renewing them, handing them back, taking over idle ones.

A consumer's *lease* on an entry is Redis's idle time for it in the group's pending list: any
worker's XAUTOCLAIM takes entries idle longer than ``lease_ms``. So a worker keeps what it holds
by resetting their idle time (``touch.lua``: XCLAIM ... JUSTID to itself, only for entries still
its own), gives them back at shutdown by setting the idle time to a full lease, and reclaims
others' expired entries with XAUTOCLAIM, whose Redis 7 reply also lists pending IDs that were
deleted from the stream (Redis drops those from the pending list itself).
"""

from __future__ import annotations

import time
from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from typing import Any

import redis.asyncio

CHUNK = 500

StreamGroup = tuple[str, str]


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


@dataclass(slots=True)
class Leases:
    """Entries this consumer holds (read or claimed, not yet acked or moved), by (stream, group).

    For each, the monotonic time its lease was last renewed (by delivery or by a heartbeat).
    """

    consumer: str
    lease_ms: int
    held: dict[StreamGroup, dict[str, float]] = field(default_factory=lambda: defaultdict(dict))

    def hold(self, key: StreamGroup, entry_id: str) -> None:
        self.held[key][entry_id] = time.monotonic()

    def drop(self, key: StreamGroup, entry_id: str) -> None:
        self.held[key].pop(entry_id, None)

    def holds(self, key: StreamGroup, entry_id: str) -> bool:
        return entry_id in self.held[key]

    async def renew(self, scripts: Any, *, older_than: float) -> list[tuple[StreamGroup, str]]:
        """Heartbeat entries held longer than ``older_than`` seconds; return those no longer ours.

        An entry is "lost" when it was acknowledged meanwhile (the normal case) or when another
        consumer claimed it after our lease expired (then its handler here runs in vain).
        """
        now = time.monotonic()
        lost: list[tuple[StreamGroup, str]] = []
        for key, held in list(self.held.items()):
            due = [entry_id for entry_id, since in held.items() if now - since >= older_than]
            for start in range(0, len(due), CHUNK):
                chunk = due[start : start + CHUNK]
                stream, group = key
                gone = {
                    _text(raw)
                    for raw in await scripts.touch(keys=[stream], args=[group, self.consumer, 0, *chunk])
                }
                for entry_id in chunk:
                    if entry_id in gone:
                        held.pop(entry_id, None)
                        lost.append((key, entry_id))
                    elif entry_id in held:
                        held[entry_id] = now
        return lost

    async def release(self, scripts: Any, entries: dict[StreamGroup, list[str]]) -> int:
        """Make ``entries`` look expired so the next reclaim by any worker takes them; forget them."""
        released = 0
        for (stream, group), ids in entries.items():
            for start in range(0, len(ids), CHUNK):
                chunk = ids[start : start + CHUNK]
                await scripts.touch(keys=[stream], args=[group, self.consumer, self.lease_ms, *chunk])
                released += len(chunk)
            for entry_id in ids:
                self.drop((stream, group), entry_id)
        return released

    def unacked(self, acked: Iterable[tuple[StreamGroup, str]]) -> dict[StreamGroup, list[str]]:
        done = set(acked)
        return {key: [i for i in held if (key, i) not in done] for key, held in self.held.items()}


@dataclass(frozen=True, slots=True)
class Reclaimed:
    cursor: str
    #: (entry ID, fields, times delivered as Redis counts them, this claim included)
    claimed: list[tuple[str, dict[bytes, bytes], int]]
    #: pending IDs whose entries were deleted from the stream (Redis 7 drops them from the PEL)
    deleted: list[str]


async def reclaim(
    client: redis.asyncio.Redis,
    *,
    stream: str,
    group: str,
    consumer: str,
    min_idle_ms: int,
    cursor: str,
    count: int,
) -> Reclaimed:
    """One XAUTOCLAIM step from ``cursor``; the delivery counts come from XPENDING (pipelined)."""
    reply = await client.xautoclaim(
        stream, group, consumer, min_idle_time=min_idle_ms, start_id=cursor, count=count
    )
    # Redis 6.2 has no third element, and returns deleted entries as nil: skipped (no ID to ack).
    entries = [(_text(entry_id), fields or {}) for entry_id, fields in reply[1] if entry_id is not None]
    deleted = [_text(entry_id) for entry_id in reply[2]] if len(reply) > 2 else []
    counts: dict[str, int] = {}
    if entries:
        pipe = client.pipeline(transaction=False)
        for entry_id, _ in entries:
            pipe.xpending_range(stream, group, min=entry_id, max=entry_id, count=1)
        for rows in await pipe.execute():
            for row in rows:
                counts[_text(row["message_id"])] = int(row["times_delivered"])
    claimed = [(entry_id, fields, counts.get(entry_id, 2)) for entry_id, fields in entries]
    return Reclaimed(cursor=_text(reply[0]), claimed=claimed, deleted=deleted)
