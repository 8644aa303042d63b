"""The Redis side of the mirror sync and the metric snapshots: every stream of a server, in few round trips.

A server may hold ten thousand streams and must never be blocked for it (SPEC sections 8 and 9), so:

- keys are found by ``SCAN ... TYPE stream`` with a bounded ``COUNT`` per call (never ``KEYS``);
- per-stream facts are pipelined in chunks of :data:`CHUNK` keys: one round trip sends ``XINFO STREAM``
  (never ``FULL``) and ``XINFO GROUPS`` for the chunk, a second sends, per group, ``XPENDING key group - + 1``
  (the oldest pending entry and its idle time; only for groups with pending entries) and, for the mirror,
  ``XINFO CONSUMERS``. Every command is O(1) or O(log N) in the stream's size; a chunk is a few thousand
  small commands, so other clients wait at most a millisecond or two between chunks.

A key deleted or retyped between SCAN and XINFO is left out (it vanished); a group deleted between the two
round trips keeps its XINFO facts with no oldest-pending figure. Parsing reuses :mod:`.reads`' helpers.
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from .client import get_client
from .errors import translated
from .reads import GroupInfo, _entry_id, _group, _int, _pairs, _s

#: Keys per pipelined chunk.
CHUNK = 500
#: Keys SCAN looks at per call: bounded work for Redis per call, few calls for the client.
SCAN_COUNT = 1000


@dataclass(frozen=True, slots=True)
class ConsumerFacts:
    name: bytes
    pending: int
    idle_ms: int
    inactive_ms: int | None  # Redis 7.2+; None also when the consumer never tried to read


@dataclass(frozen=True, slots=True)
class GroupFacts:
    name: bytes
    consumers: int
    pending: int
    last_delivered_id: str
    entries_read: int | None
    lag: int | None
    oldest_pending_id: str | None
    oldest_pending_idle_ms: int | None
    consumer_list: tuple[ConsumerFacts, ...] | None  # None: not read (snapshots skip consumers)


@dataclass(frozen=True, slots=True)
class StreamFacts:
    key: bytes
    length: int
    first_id: str | None
    last_id: str | None
    last_generated_id: str | None
    entries_added: int | None  # Redis 7+
    groups: tuple[GroupFacts, ...]

    @property
    def pending(self) -> int:
        return sum(g.pending for g in self.groups)


@dataclass(frozen=True, slots=True)
class ServerFacts:
    conn: str
    streams: tuple[StreamFacts, ...]
    round_trips: int
    seconds: float


def stream_keys_scan(conn: str, *, count: int = SCAN_COUNT) -> list[bytes]:
    """Every stream key of ``conn``, by ``SCAN cursor COUNT count TYPE stream`` until the cursor is 0.

    SCAN returns every key present for the whole iteration at least once (duplicates are dropped here);
    a key created meanwhile may be missed and is found by the next run.
    """
    client = get_client(conn)
    seen: set[bytes] = set()
    keys: list[bytes] = []
    cursor = 0
    with translated(conn):
        while True:
            cursor, batch = client.execute_command("SCAN", cursor, "COUNT", count, "TYPE", "stream")
            cursor = int(cursor)
            for key in batch:
                if key not in seen:
                    seen.add(key)
                    keys.append(key)
            if cursor == 0:
                return keys


def streams_read(
    conn: str, keys: Sequence[bytes], *, consumers: bool = False, chunk: int = CHUNK
) -> tuple[list[StreamFacts], int]:
    """Facts of each stream in ``keys`` (vanished keys left out) and the number of round trips spent."""
    client = get_client(conn)
    out: list[StreamFacts] = []
    round_trips = 0
    with translated(conn):
        for start in range(0, len(keys), chunk):
            part = keys[start : start + chunk]
            pipe = client.pipeline(transaction=False)
            for key in part:
                pipe.execute_command("XINFO", "STREAM", key)
                pipe.execute_command("XINFO", "GROUPS", key)
            replies = pipe.execute(raise_on_error=False)
            round_trips += 1

            found: list[tuple[bytes, dict[str, object], list[GroupInfo]]] = []
            pipe = client.pipeline(transaction=False)
            asked: list[tuple[int, int, str]] = []  # (stream index, group index, what)
            for i, key in enumerate(part):
                info, groups_raw = replies[2 * i], replies[2 * i + 1]
                if isinstance(info, Exception) or isinstance(groups_raw, Exception):
                    continue  # deleted or retyped since SCAN
                groups = [_group(g) for g in groups_raw]
                n = len(found)
                found.append((key, _pairs(info), groups))
                for j, g in enumerate(groups):
                    if g.pending > 0:
                        pipe.execute_command("XPENDING", key, g.name, "-", "+", 1)
                        asked.append((n, j, "pending"))
                    if consumers and g.consumers > 0:
                        pipe.execute_command("XINFO", "CONSUMERS", key, g.name)
                        asked.append((n, j, "consumers"))
            extra = pipe.execute(raise_on_error=False) if asked else []
            if asked:
                round_trips += 1

            oldest: dict[tuple[int, int], tuple[str, int]] = {}
            members: dict[tuple[int, int], tuple[ConsumerFacts, ...]] = {}
            for (n, j, what), reply in zip(asked, extra, strict=True):
                if isinstance(reply, Exception):
                    continue  # the group vanished between the round trips
                if what == "pending":
                    if reply:
                        oldest[(n, j)] = (_s(reply[0][0]), int(reply[0][2]))
                else:
                    members[(n, j)] = tuple(_consumer(c) for c in reply)

            for n, (key, info, groups) in enumerate(found):
                out.append(_stream(key, info, groups, n, oldest, members, consumers))
    return out, round_trips


def server_read(conn: str, *, consumers: bool = False, chunk: int = CHUNK) -> ServerFacts:
    """Every stream of ``conn`` with its groups (and, for the mirror, their consumers)."""
    started = time.perf_counter()
    keys = stream_keys_scan(conn)
    streams, round_trips = streams_read(conn, keys, consumers=consumers, chunk=chunk)
    return ServerFacts(
        conn=conn,
        streams=tuple(streams),
        round_trips=round_trips,
        seconds=time.perf_counter() - started,
    )


def _stream(
    key: bytes,
    info: dict[str, object],
    groups: list[GroupInfo],
    n: int,
    oldest: dict[tuple[int, int], tuple[str, int]],
    members: dict[tuple[int, int], tuple[ConsumerFacts, ...]],
    consumers: bool,
) -> StreamFacts:
    parsed = []
    for j, base in enumerate(groups):
        oldest_id, oldest_idle = oldest.get((n, j), (None, None))
        parsed.append(
            GroupFacts(
                name=base.name,
                consumers=base.consumers,
                pending=base.pending,
                last_delivered_id=base.last_delivered_id,
                entries_read=base.entries_read,
                lag=base.lag,
                oldest_pending_id=oldest_id,
                oldest_pending_idle_ms=oldest_idle,
                consumer_list=(members.get((n, j), ()) if consumers else None),
            )
        )
    return StreamFacts(
        key=key,
        length=int(info["length"]),
        first_id=_entry_id(info.get("first-entry")),
        last_id=_entry_id(info.get("last-entry")),
        last_generated_id=_s(info.get("last-generated-id")),
        entries_added=_int(info.get("entries-added")),
        groups=tuple(parsed),
    )


def _consumer(raw: Sequence) -> ConsumerFacts:
    info = _pairs(raw)
    inactive = info.get("inactive")
    return ConsumerFacts(
        name=info["name"],
        pending=int(info["pending"]),
        idle_ms=int(info["idle"]),
        inactive_ms=None if inactive is None or int(inactive) < 0 else int(inactive),
    )
