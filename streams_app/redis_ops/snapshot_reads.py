"""The Redis side of the mirror sync and the metric snapshots: every stream of a server, in few round trips.

A server may hold ten thousand streams and must never be blocked for it (SPEC sections 8 and 9), so:

- keys are found by ``SCAN ... TYPE stream`` with a bounded ``COUNT`` per call (never ``KEYS``);
- per-stream facts are pipelined in chunks of :data:`CHUNK` keys: one round trip sends ``XINFO STREAM``
  (never ``FULL``) and ``XINFO GROUPS`` for the chunk, a second sends, per group, ``XPENDING key group - + 1``
  (the oldest pending entry and its idle time; only for groups with pending entries) and, for the mirror,
  ``XINFO CONSUMERS``. Every command is O(1) or O(log N) in the stream's size; a chunk is a few thousand
  small commands, so other clients wait at most a millisecond or two between chunks.

A key deleted or retyped between SCAN and XINFO is left out (it vanished); a group deleted between the two
round trips keeps its XINFO facts with no oldest-pending figure. Replies are parsed by :mod:`.parsers` into
the same :mod:`.types` the pages show: a :class:`StreamInfo` whose groups carry the oldest pending entry
(and, for the mirror, their consumers).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from .client import get_client
from .commands import SCAN_COUNT, scan_streams
from .errors import translated
from .parsers import parse_consumer, parse_pending_entry
from .reads import stream_infos
from .types import ConsumerInfo, GroupInfo, StreamInfo

#: Keys per pipelined chunk.
CHUNK = 500


@dataclass(frozen=True, slots=True)
class ServerFacts:
    conn: str
    streams: tuple[StreamInfo, ...]
    round_trips: int
    seconds: float


def stream_keys_scan(conn: str, *, count: int = SCAN_COUNT) -> list[bytes]:
    """Every stream key of ``conn``, by ``SCAN cursor COUNT count TYPE stream`` until the cursor is 0.

    SCAN returns every key present for the whole iteration at least once (duplicates are dropped);
    a key created meanwhile may be missed and is found by the next run.
    """
    return [key for step in scan_streams(conn, count=count) for key in step.keys]


def streams_read(
    conn: str, keys: Sequence[bytes], *, consumers: bool = False, chunk: int = CHUNK
) -> tuple[list[StreamInfo], int]:
    """Facts of each stream in ``keys`` (vanished keys left out) and the number of round trips spent."""
    client = get_client(conn)
    out: list[StreamInfo] = []
    round_trips = 0
    with translated(conn):
        for start in range(0, len(keys), chunk):
            found = stream_infos(conn, keys[start : start + chunk])  # vanished keys are left out
            round_trips += 1

            pipe = client.pipeline(transaction=False)
            asked: list[tuple[int, int, str]] = []  # (stream index, group index, what)
            for n, stream in enumerate(found):
                key = stream.key
                for j, g in enumerate(stream.groups):
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
            members: dict[tuple[int, int], tuple[ConsumerInfo, ...]] = {}
            for (n, j, what), reply in zip(asked, extra, strict=True):
                if isinstance(reply, Exception):
                    continue  # the group vanished between the round trips
                if what == "pending":
                    if reply:
                        first = parse_pending_entry(reply[0])
                        oldest[(n, j)] = (first.id, first.idle_ms)
                else:
                    members[(n, j)] = tuple(parse_consumer(c) for c in reply)

            for n, stream in enumerate(found):
                out.append(_with_extras(stream, n, oldest, members, consumers))
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


def _with_extras(
    stream: StreamInfo,
    n: int,
    oldest: dict[tuple[int, int], tuple[str, int]],
    members: dict[tuple[int, int], tuple[ConsumerInfo, ...]],
    consumers: bool,
) -> StreamInfo:
    """``stream`` with each group's oldest pending entry and (when read) its consumers filled in.

    Built field by field rather than with ``dataclasses.replace``, which costs ten times as much: a
    snapshot of ten thousand streams makes thirty thousand of these.
    """
    if not stream.groups:
        return stream
    groups = []
    for j, g in enumerate(stream.groups):
        oldest_id, oldest_idle = oldest.get((n, j), (None, None))
        groups.append(
            GroupInfo(
                g.name, g.consumers, g.pending, g.last_delivered_id, g.entries_read, g.lag,
                oldest_pending_id=oldest_id,
                oldest_pending_idle_ms=oldest_idle,
                consumer_list=(members.get((n, j), ()) if consumers else None),
            )
        )
    return StreamInfo(
        stream.key, stream.length, stream.first_id, stream.last_id, stream.last_generated_id,
        stream.entries_added, stream.max_deleted_entry_id, stream.radix_tree_keys, tuple(groups),
    )
