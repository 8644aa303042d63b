"""Command patterns the reads and the actions share: finding streams, and reading one key safely.

- :func:`scan_streams` is the one ``SCAN ... TYPE stream`` loop (never ``KEYS``): each caller keeps its
  own cursor, COUNT and budget, and stops iterating when it has what it needs.
- :func:`stream_pipeline` sends ``TYPE key`` in the same round trip (or MULTI) as the commands on
  ``key``, so a missing key or another type is :class:`NotFound`, worded the same everywhere, without
  a round trip of its own. A range read of a missing key answers like an empty stream: the TYPE
  beside it is what tells "no such stream" from "no entries here".
- :func:`entries_by_id` looks IDs up one ``XRANGE id id COUNT 1`` each, in that same pipeline.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any

import redis

from .client import get_client
from .errors import NotFound, translated
from .parsers import parse_entry
from .types import Entry

#: Keys SCAN looks at per call at most: bounded work for Redis per call, few calls for the client.
SCAN_COUNT = 1000


@dataclass(frozen=True, slots=True)
class ScanStep:
    """What one SCAN call found."""

    cursor: int  # where the next call starts; 0 when the iteration is complete
    keys: tuple[bytes, ...]  # stream keys not seen in an earlier call of this iteration
    scanned: int  # keys SCAN was asked to look at so far: the sum of the COUNTs sent


def scan_streams(
    conn: str,
    *,
    match: bytes | None = None,
    cursor: int = 0,
    count: int = SCAN_COUNT,
    grow_to: int | None = None,
    budget: int | None = None,
) -> Iterator[ScanStep]:
    """``SCAN cursor [MATCH match] COUNT count TYPE stream``, one step per call, from ``cursor``.

    Stops after the call that returns cursor 0 or brings ``scanned`` to ``budget``; the caller may
    stop earlier. SCAN may return a key twice across calls: each key is yielded once. With
    ``grow_to``, COUNT grows fourfold (up to it) after a call that found nothing, so a sparse match
    on a big server takes fewer round trips.
    """
    client = get_client(conn)
    seen: set[bytes] = set()
    scanned = 0
    step = count
    while True:
        args: list[object] = ["SCAN", cursor]
        if match is not None:
            args += ["MATCH", match]
        args += ["COUNT", step, "TYPE", "stream"]
        with translated(conn):
            cursor, batch = client.execute_command(*args)
        cursor = int(cursor)
        scanned += step
        fresh: list[bytes] = []
        for key in batch:
            if key not in seen:
                seen.add(key)
                fresh.append(key)
        yield ScanStep(cursor=cursor, keys=tuple(fresh), scanned=scanned)
        if cursor == 0 or (budget is not None and scanned >= budget):
            return
        if not batch and grow_to is not None:
            step = min(step * 4, grow_to)


def require_stream(conn: str, key_type: object) -> None:
    """NotFound unless a TYPE reply says "stream" (a TYPE that failed is raised, translated)."""
    if isinstance(key_type, Exception):
        with translated(conn):
            raise key_type
    if key_type in (b"none", "none"):
        raise NotFound("No such stream.", conn=conn)
    if key_type not in (b"stream", "stream"):
        raise NotFound("That key holds another type, not a stream.", conn=conn)


def stream_pipeline(
    conn: str,
    client: redis.Redis,
    key: bytes,
    commands: Sequence[Sequence[object]],
    *,
    transaction: bool = False,
) -> list[Any]:
    """The replies to ``commands``, sent in one round trip behind ``TYPE key`` (in one MULTI with it
    when ``transaction``); NotFound unless ``key`` holds a stream, and an error reply is raised."""
    with translated(conn):
        pipe = client.pipeline(transaction=transaction)
        pipe.type(key)
        for command in commands:
            pipe.execute_command(*command)
        key_type, *replies = pipe.execute(raise_on_error=False)
        require_stream(conn, key_type)
        for reply in replies:
            if isinstance(reply, Exception):
                raise reply
    return replies


def pipelined(client: redis.Redis, commands: Iterable[Sequence[object]], *, raise_on_error: bool = True) -> list[Any]:
    """The replies to ``commands``, sent in one round trip without MULTI: a fact per key or group."""
    pipe = client.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    return pipe.execute(raise_on_error=raise_on_error)


def stream_read(conn: str, client: redis.Redis, key: bytes, *command: object) -> Any:
    """The reply to one read ``command`` on ``key``, sent with the key's TYPE (see :func:`stream_pipeline`)."""
    return stream_pipeline(conn, client, key, [command])[0]


def lookup(key: bytes, entry_id: str | bytes) -> tuple[object, ...]:
    """The command reading one entry by its exact ID: O(log N), an empty reply if it is gone."""
    return ("XRANGE", key, entry_id, entry_id, "COUNT", 1)


def entries_by_id(
    conn: str,
    client: redis.Redis,
    key: bytes,
    ids: Sequence[str],
    *,
    transaction: bool = False,
    then: Sequence[Sequence[object]] = (),
) -> tuple[list[Entry | None], list[Any]]:
    """Each of ``ids`` looked up (None: not in the stream), and the replies to the commands ``then``,
    all in one :func:`stream_pipeline`; ``transaction`` makes the lookups and ``then`` one MULTI."""
    replies = stream_pipeline(
        conn, client, key, [*(lookup(key, entry_id) for entry_id in ids), *then], transaction=transaction
    )
    found = [parse_entry(raw[0]) if raw else None for raw in replies[: len(ids)]]
    return found, replies[len(ids) :]
