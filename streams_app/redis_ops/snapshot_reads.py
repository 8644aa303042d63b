"""The Redis side of the mirror sync and the metric snapshots: every stream of a server, in few round trips.

A server may hold ten thousand streams and must never be blocked for it (docs/architecture.md#costs-of-stream-commands), so:

- keys are found by ``SCAN ... TYPE stream`` with a bounded ``COUNT`` per call (never ``KEYS``);
- per-stream facts are pipelined in chunks of :data:`CHUNK` keys: one round trip sends ``XINFO STREAM``
  (never ``FULL``) and ``XINFO GROUPS`` for the chunk, a second sends, per group with pending entries,
  ``XPENDING key group - + K`` (the first probe for the longest pending idle time, see
  :mod:`.pending_idle`) and, for the mirror, ``XINFO CONSUMERS``. Those commands are O(1) or O(log N)
  in the stream's size; a chunk is a few thousand small commands, so other clients wait at most a
  millisecond or two between chunks.
- only groups whose first K pending entries are not their whole PEL need more: up to
  :data:`~.pending_idle.PROBE_ROUNDS` further round trips per chunk, each one ``XPENDING ... IDLE t`` per
  undecided group (O(pending), and never for a PEL longer than
  :data:`~.pending_idle.SCAN_PENDING_MAX`). A bus whose groups each hold fewer than K pending entries
  costs no extra round trip.

On a Redis Cluster the keys are found on every primary (:func:`~.commands.scan_streams`) and the
pipelines are split by node. A primary that does not answer is named in ``ServerFacts.missed``: its
streams are absent from the facts because they could not be read, not because they were deleted, and
whoever keeps a copy (the mirror) must not take their absence as a deletion.

A key deleted or retyped between SCAN and XINFO is left out (it vanished); a group deleted between the two
round trips keeps its XINFO facts with no pending-idle figure. Replies are parsed by :mod:`.parsers` into
the same :mod:`.types` the pages show: a :class:`StreamInfo` whose groups carry their longest pending idle
time and its entry (and, for the mirror, their consumers).
"""

from __future__ import annotations

import time
from collections.abc import Sequence
from dataclasses import dataclass

from .commands import SCAN_COUNT, keyed_pipeline, scan_streams
from .parsers import parse_consumer
from .pending_idle import first_probe, longest_idle
from .reads.streams import stream_infos_covered
from .types import ConsumerInfo, GroupInfo, PendingIdle, StreamInfo

#: Keys per pipelined chunk.
CHUNK = 500


@dataclass(frozen=True, slots=True)
class ServerFacts:
    conn: str
    streams: tuple[StreamInfo, ...]
    round_trips: int
    seconds: float
    #: primaries (host:port) whose streams could not be listed or read: absent, not deleted
    missed: tuple[str, ...] = ()


def stream_keys_scan(conn: str, *, count: int = SCAN_COUNT) -> list[bytes]:
    """Every stream key of ``conn``, by ``SCAN cursor COUNT count TYPE stream`` until the cursor is 0.

    SCAN returns every key present for the whole iteration at least once (duplicates are dropped);
    a key created meanwhile may be missed and is found by the next run.
    """
    return stream_keys_scan_covered(conn, count=count)[0]


def stream_keys_scan_covered(conn: str, *, count: int = SCAN_COUNT) -> tuple[list[bytes], tuple[str, ...]]:
    """:func:`stream_keys_scan` over every primary, and the primaries that could not be listed."""
    keys: list[bytes] = []
    missed: tuple[str, ...] = ()
    for step in scan_streams(conn, count=count):
        keys += step.keys
        missed = step.missed
    return keys, missed


def streams_read(
    conn: str, keys: Sequence[bytes], *, consumers: bool = False, chunk: int = CHUNK
) -> tuple[list[StreamInfo], int]:
    """Facts of each stream in ``keys`` (vanished keys left out) and the number of round trips spent."""
    infos, round_trips, _ = streams_read_covered(conn, keys, consumers=consumers, chunk=chunk)
    return infos, round_trips


def streams_read_covered(
    conn: str, keys: Sequence[bytes], *, consumers: bool = False, chunk: int = CHUNK
) -> tuple[list[StreamInfo], int, tuple[str, ...]]:
    """:func:`streams_read`, and the primaries whose streams could not be read (left out, not vanished)."""
    out: list[StreamInfo] = []
    round_trips = 0
    missed: dict[str, None] = {}
    for start in range(0, len(keys), chunk):
        found, unread = stream_infos_covered(conn, keys[start : start + chunk])  # vanished keys are left out
        missed.update(dict.fromkeys(unread))
        round_trips += 1

        asked: dict[bytes, list[tuple[int, int, str]]] = {}  # per stream: (stream index, group index, what)
        for n, stream in enumerate(found):
            for j, g in enumerate(stream.groups):
                if g.pending > 0:
                    asked.setdefault(stream.key, []).append((n, j, "pending"))
                if consumers and g.consumers > 0:
                    asked.setdefault(stream.key, []).append((n, j, "consumers"))
        commands = {key: [_extra_command(found, key, q) for q in questions] for key, questions in asked.items()}
        sent_at = time.monotonic()
        extra = keyed_pipeline(conn, list(commands), commands.__getitem__)
        if asked:
            round_trips += 1
            missed.update(dict.fromkeys(extra.missed))

        firsts: list[tuple[bytes, bytes, int, object]] = []  # the first pending-idle probes' replies
        at: list[tuple[int, int]] = []
        members: dict[tuple[int, int], tuple[ConsumerInfo, ...]] = {}
        for key, replies in zip(asked, extra.replies, strict=True):
            for (n, j, what), reply in zip(asked[key], replies or (), strict=False):
                if isinstance(reply, Exception):
                    continue  # the group vanished between the round trips
                if what == "pending":
                    group = found[n].groups[j]
                    firsts.append((key, group.name, group.pending, reply))
                    at.append((n, j))
                else:
                    members[(n, j)] = tuple(parse_consumer(c) for c in reply)
        idle, trips, unread = longest_idle(conn, firsts, sent_at=sent_at)
        round_trips += trips
        missed.update(dict.fromkeys(unread))
        longest = {place: figure for place, figure in zip(at, idle, strict=True) if figure is not None}

        for n, stream in enumerate(found):
            out.append(_with_extras(stream, n, longest, members, consumers))
    return out, round_trips, tuple(missed)


def _extra_command(found: list[StreamInfo], key: bytes, question: tuple[int, int, str]) -> tuple[object, ...]:
    """The second round trip's command for one group: the first pending-idle probe, or its consumers."""
    n, j, what = question
    group = found[n].groups[j].name
    if what == "pending":
        return first_probe(key, group)
    return ("XINFO", "CONSUMERS", key, group)


def server_read(conn: str, *, consumers: bool = False, chunk: int = CHUNK) -> ServerFacts:
    """Every stream of ``conn`` with its groups (and, for the mirror, their consumers)."""
    started = time.perf_counter()
    keys, unlisted = stream_keys_scan_covered(conn)
    streams, round_trips, unread = streams_read_covered(conn, keys, consumers=consumers, chunk=chunk)
    return ServerFacts(
        conn=conn,
        streams=tuple(streams),
        round_trips=round_trips,
        seconds=time.perf_counter() - started,
        missed=tuple(dict.fromkeys((*unlisted, *unread))),
    )


def _with_extras(
    stream: StreamInfo,
    n: int,
    longest: dict[tuple[int, int], PendingIdle],
    members: dict[tuple[int, int], tuple[ConsumerInfo, ...]],
    consumers: bool,
) -> StreamInfo:
    """``stream`` with each group's longest pending idle time and (when read) its consumers filled in.

    Built field by field rather than with ``dataclasses.replace``, which costs ten times as much: a
    snapshot of ten thousand streams makes thirty thousand of these.
    """
    if not stream.groups:
        return stream
    groups = []
    for j, g in enumerate(stream.groups):
        groups.append(
            GroupInfo(
                g.name, g.consumers, g.pending, g.last_delivered_id, g.entries_read, g.lag,
                longest_idle=longest.get((n, j)),
                consumer_list=(members.get((n, j), ()) if consumers else None),
            )
        )
    return StreamInfo(
        stream.key, stream.length, stream.first_id, stream.last_id, stream.last_generated_id,
        stream.entries_added, stream.max_deleted_entry_id, stream.radix_tree_keys, tuple(groups),
    )
