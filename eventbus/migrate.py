"""Moving what workers before the cluster naming left under the old key names (see :mod:`eventbus.keys`).

``python -m eventbus migrate [stream ...]`` (every stream with old keys when none is named):

- delayed retries waiting in ``S:retry`` move to ``{S}:retry`` with their due times, where the new
  workers' pump finds them; nothing pumps the old set any more, so without this they would wait
  for ever;
- uniqueness keys held in ``S:unique`` move to ``{S}:unique`` with their expiries, so a duplicate
  published during the rest of their window is still refused.

Each member is added to the new set first and removed from the old one after, in two commands
(on a cluster the two keys live in different slots, so no script can hold both). Both steps are
idempotent (the member is the same bytes, ``ZADD NX`` keeps a due time already moved, ``ZADD GT``
keeps the later expiry), so a run that is killed half-way is simply run again: nothing is lost
and no retry is scheduled twice.

Dead letters in ``S:dlq`` are not moved: moving an entry between streams is XADD then XDEL, and a
run killed between the two would file it twice. ``python -m eventbus dlq`` lists both DLQs and
``requeue`` takes from either; the old one empties as an operator requeues or deletes its entries. Metric events left in
``eventbus:metrics`` age out of every window within an hour; delete it after that.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from . import keys

BATCH = 500


@dataclass(frozen=True, slots=True)
class Migrated:
    stream: str
    retries: int
    unique_keys: int
    #: entries left in the old ``S:dlq`` (for an operator to requeue: ``python -m eventbus requeue``)
    old_dead_letters: int


def legacy_streams(client: Any) -> list[str]:
    """Streams with an old-named retry or unique set, found by SCAN (on every primary of a cluster)."""
    found: set[str] = set()
    for suffix in (keys.RETRY_SUFFIX, keys.UNIQUE_SUFFIX):
        for raw in client.scan_iter(match=f"*{suffix}", count=1000, _type="zset"):
            key = raw.decode() if isinstance(raw, bytes) else raw
            stream = keys.stream_of(key, suffix)
            if stream is not None and keys.in_slot_of(stream, suffix) != key:
                found.add(stream)
    return sorted(found)


def _move(client: Any, old: str, new: str, *, keep: str, rounds: int) -> int:
    """Move every member of sorted set ``old`` to ``new`` with its score; ``keep`` is "nx" or "gt"."""
    moved = 0
    for _ in range(rounds):
        batch = client.zrange(old, 0, BATCH - 1, withscores=True)
        if not batch:
            break
        client.zadd(new, dict(batch), **{keep: True})
        client.zrem(old, *(member for member, _ in batch))
        moved += len(batch)
    return moved


def migrate_stream(client: Any, stream: str, *, rounds: int = 10_000) -> Migrated:
    """Move ``stream``'s old retry and unique sets to the new names (no-op when the names are equal)."""
    retries = unique = 0
    pairs = ((keys.RETRY_SUFFIX, "nx"), (keys.UNIQUE_SUFFIX, "gt"))
    for suffix, keep in pairs:
        old, new = keys.legacy_key(stream, suffix), keys.in_slot_of(stream, suffix)
        if old == new:
            continue
        count = _move(client, old, new, keep=keep, rounds=rounds)
        if suffix == keys.RETRY_SUFFIX:
            retries = count
        else:
            unique = count
    old_dlq = keys.legacy_key(stream, keys.DLQ_SUFFIX)
    left = client.xlen(old_dlq) if old_dlq != keys.dlq_key(stream) else 0
    return Migrated(stream=stream, retries=retries, unique_keys=unique, old_dead_letters=int(left))


def migrate(client: Any, streams: Iterable[str] | None = None) -> list[Migrated]:
    """:func:`migrate_stream` for ``streams``, or for every stream :func:`legacy_streams` finds."""
    chosen = legacy_streams(client) if streams is None else list(streams)
    return [migrate_stream(client, stream) for stream in chosen]
