"""Command patterns the reads and the actions share: finding streams, and reading one key safely.

- :func:`scan_streams` is the one ``SCAN ... TYPE stream`` loop (never ``KEYS``), over every primary of a
  cluster one after another: each caller keeps its own cursor, COUNT and budget, and stops iterating when
  it has what it needs; each step names the primaries it could not reach (``missed``).
- :func:`stream_pipeline` sends ``TYPE key`` in the same round trip (or MULTI) as the commands on
  ``key``, so a missing key or another type is :class:`NotFound`, worded the same everywhere, without
  a round trip of its own. A range read of a missing key answers like an empty stream: the TYPE
  beside it is what tells "no such stream" from "no entries here".
- :func:`entries_by_id` looks IDs up one ``XRANGE id id COUNT 1`` each, in that same pipeline.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

import redis
from redis.cluster import RedisCluster
from redis.exceptions import AskError, ClusterDownError, SlotNotCoveredError, TryAgainError

from eventbus.connection import SyncClient

from .client import Node, get_client, is_cluster, key_client, primaries, primary_failed
from .errors import InvalidArgument, NotFound, Unreachable, translated
from .parsers import parse_entry
from .types import Entry

#: Keys SCAN looks at per call at most: bounded work for Redis per call, few calls for the client.
SCAN_COUNT = 1000
#: Bits of a listing cursor that hold one node's own SCAN cursor; the node's index sits above them.
#: Redis's cursor is a bucket index of the keyspace's hash table (per slot on 7.2+ clusters, with the
#: slot in its low 14 bits), so it stays far below 2**48; with at most 32 primaries the whole cursor
#: stays below 2**53 and survives a JavaScript client's number type.
NODE_SHIFT = 48
_NODE_MASK = (1 << NODE_SHIFT) - 1


@dataclass(frozen=True, slots=True)
class ScanStep:
    """What one SCAN call found, and what the iteration could not reach so far.

    ``missed`` names (``host:port``) the primaries this iteration skipped because they did not answer
    (refused, timed out) or because the cluster reports them failing or some slots unserved
    ("N slots unserved"); empty on a healthy server. A listing with anything there is partial and
    must say so. It only grows along one iteration: the last step holds the whole list.
    """

    cursor: int  # where the next call starts (see :func:`listing_cursor`); 0 when the iteration is complete
    keys: tuple[bytes, ...]  # stream keys not seen in an earlier call of this iteration
    scanned: int  # keys SCAN was asked to look at so far: the sum of the COUNTs sent
    missed: tuple[str, ...] = ()


def listing_cursor(index: int, node_cursor: int) -> int:
    """The one integer cursor of a listing over every primary: node ``index`` (slot order), its own cursor.

    0 is both "start" (node 0, cursor 0) and "done": :func:`scan_streams` never hands out node 0's
    start again. On standalone (one node, index 0) it is exactly Redis's own SCAN cursor.
    """
    return (index << NODE_SHIFT) | node_cursor


def split_cursor(conn: str, cursor: int, nodes: int) -> tuple[int, int]:
    """``(node index, node cursor)`` of a listing cursor; InvalidArgument if no such node is listed."""
    if cursor < 0:
        raise InvalidArgument("cursor must not be negative.", conn=conn)
    index, node_cursor = cursor >> NODE_SHIFT, cursor & _NODE_MASK
    if index >= nodes:
        raise InvalidArgument("That cursor belongs to another listing: start again without a cursor.", conn=conn)
    return index, node_cursor


def scan_streams(
    conn: str,
    *,
    match: bytes | None = None,
    cursor: int = 0,
    count: int = SCAN_COUNT,
    grow_to: int | None = None,
    budget: int | None = None,
    key_type: str = "stream",
) -> Iterator[ScanStep]:
    """``SCAN cursor [MATCH match] COUNT count TYPE stream`` on every primary in turn, one step per call.

    ``key_type`` names another type for the few listings of other keys (``zset``: the event bus's
    delayed-retry sets), so there stays one SCAN loop.

    SCAN answers for one node only, so on a cluster the iteration walks the primaries in slot order,
    one after another, and ``cursor`` carries the node's index with that node's own cursor
    (:func:`listing_cursor`): a page may end on one node and the next page carry on from there.
    A primary that does not answer is skipped and named in ``missed`` (unless the slot map, read anew,
    shows a replica promoted in its place: the listing reads on there), as are primaries the cluster
    itself reports failing (its ``CLUSTER INFO``, read in the same round trip as the first SCAN of
    each node: no extra round trip while the cluster is healthy).

    Stops after the call that completes the last node or brings ``scanned`` to ``budget``; the caller
    may stop earlier. SCAN may return a key twice across calls: each key is yielded once. With
    ``grow_to``, COUNT grows fourfold (up to it) after a call that found nothing, so a sparse match
    on a big server takes fewer round trips.
    """
    with translated(conn):
        nodes = primaries(conn)
    cluster = is_cluster(conn)
    index, node_cursor = split_cursor(conn, cursor, len(nodes))
    seen: set[bytes] = set()
    missed: list[str] = []
    scanned = 0
    step = count
    checked: set[int] = set()
    while index < len(nodes):
        node = nodes[index]
        args: list[object] = ["SCAN", node_cursor]
        if match is not None:
            args += ["MATCH", match]
        args += ["COUNT", step, "TYPE", key_type]
        state = None
        try:
            with translated(conn):
                if cluster and index not in checked:
                    checked.add(index)
                    state, (node_cursor, batch) = pipelined(node.client, [("CLUSTER", "INFO"), args])
                else:
                    node_cursor, batch = node.client.execute_command(*args)
        except Unreachable:
            if not cluster:
                raise  # one server that does not answer: the whole listing fails, as before
            if primary_failed(conn):  # the cluster may have promoted a replica in its place: read on there
                with translated(conn):
                    promoted = primaries(conn)
                if len(promoted) == len(nodes) and promoted[index].name != node.name:
                    nodes, node_cursor = promoted, 0  # the same slots, so the same place in the slot order
                    continue
            _note(missed, node.name)
            index, node_cursor = index + 1, 0
            yield ScanStep(cursor=listing_cursor(index, 0) if index < len(nodes) else 0, keys=(),
                           scanned=scanned, missed=tuple(missed))
            continue
        if state is not None:
            for name in _cluster_trouble(node, state):
                _note(missed, name)
        node_cursor = int(node_cursor)
        scanned += step
        fresh: list[bytes] = []
        for key in batch:
            if key not in seen:
                seen.add(key)
                fresh.append(key)
        if node_cursor == 0:
            index += 1
        next_cursor = listing_cursor(index, node_cursor) if index < len(nodes) else 0
        yield ScanStep(cursor=next_cursor, keys=tuple(fresh), scanned=scanned, missed=tuple(missed))
        if next_cursor == 0 or (budget is not None and scanned >= budget):
            return
        if not batch and grow_to is not None:
            step = min(step * 4, grow_to)


def _note(missed: list[str], name: str) -> None:
    if name not in missed:
        missed.append(name)


def _cluster_trouble(node: Node, state: object) -> list[str]:
    """What a node's ``CLUSTER INFO`` says the listing misses: failing primaries, unserved slots.

    Only when ``cluster_state`` is not ``ok`` is ``CLUSTER NODES`` read (one more round trip, on a
    sick cluster only) to name the primaries flagged ``fail`` or ``fail?``; if none is, the node
    that reported the state is named.
    """
    facts = _cluster_info(state)
    if facts.get("cluster_state", "ok") == "ok":
        return []
    out: list[str] = []
    try:
        listing = node.client.execute_command("CLUSTER", "NODES")
    except redis.RedisError:
        listing = b""
    if isinstance(listing, dict):  # redis-py may parse it: {address: {"flags": ..., ...}}
        rows = [(address, str(row.get("flags", ""))) for address, row in listing.items()]
    else:
        text = listing.decode(errors="replace") if isinstance(listing, bytes) else str(listing)
        rows = [(parts[1], parts[2]) for parts in (line.split() for line in text.splitlines()) if len(parts) > 2]
    for address, flags in rows:
        if "master" in flags and "fail" in flags:
            out.append(address.split("@")[0])
    # Slots of a failing primary are named by that primary; these belong to no primary at all.
    unserved = 16384 - int(facts.get("cluster_slots_assigned", "16384") or 0)
    if unserved > 0:
        out.append(f"{unserved} slots unserved")
    return out or [f"{node.name} (cluster_state: {facts.get('cluster_state')})"]


def _cluster_info(reply: object) -> dict[str, str]:
    if isinstance(reply, dict):
        return {str(k): str(v) for k, v in reply.items()}
    text = reply.decode(errors="replace") if isinstance(reply, bytes) else str(reply)
    return dict(line.split(":", 1) for line in text.splitlines() if ":" in line)


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
    client: SyncClient,
    key: bytes,
    commands: Sequence[Sequence[object]],
    *,
    transaction: bool = False,
) -> list[Any]:
    """The replies to ``commands``, sent in one round trip behind ``TYPE key`` (in one MULTI with it
    when ``transaction``); NotFound unless ``key`` holds a stream, and an error reply is raised.

    A cluster client has no MULTI, so a transaction goes to the primary owning ``key``'s slot
    (:func:`~.client.key_client`): every command in it must touch keys of that slot only (the caller
    checks with :func:`~.client.same_slot`). Without ``transaction``, the cluster client routes
    each command to its own key's node.
    """
    with translated(conn):
        if transaction and is_cluster(conn):
            client = key_client(conn, key)
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


def pipelined(client: SyncClient, commands: Iterable[Sequence[object]], *, raise_on_error: bool = True) -> list[Any]:
    """The replies to ``commands``, sent in one round trip without MULTI: a fact per key or group."""
    pipe = client.pipeline(transaction=False)
    for command in commands:
        pipe.execute_command(*command)
    return pipe.execute(raise_on_error=raise_on_error)


#: Replies that say a key's node could not answer, not that the key is missing or refused.
_NODE_TROUBLE = (
    redis.ConnectionError, redis.TimeoutError, ClusterDownError, TryAgainError, AskError, SlotNotCoveredError,
)


@dataclass(frozen=True, slots=True)
class KeyedReplies:
    """The replies of :func:`keyed_pipeline`: per key its replies, or None when its node did not answer."""

    replies: list[list[Any] | None]
    missed: tuple[str, ...]  # primaries (host:port) whose keys got None


def server_ms(conn: str) -> int:
    """The clock of the server (the first primary of a cluster) in ms: the cheapest call that raises when
    the server is not there, and the clock that Redis-side due times are measured on."""
    with translated(conn):
        seconds, micros = primaries(conn)[0].client.time()
    return int(seconds) * 1000 + int(micros) // 1000


def node_of(conn: str, key: bytes) -> str:
    """The ``host:port`` of the primary that serves ``key`` (the one server on standalone)."""
    client = get_client(conn)
    if not is_cluster(conn):
        return primaries(conn)[0].name
    with translated(conn):
        name: str = cast(RedisCluster, client).get_node_from_key(key).name
        return name


def keyed_pipeline(
    conn: str, keys: Sequence[bytes], commands: Callable[[bytes], Sequence[Sequence[object]]]
) -> KeyedReplies:
    """The replies to ``commands(key)`` for each of ``keys``, in one pipelined round trip, error replies
    included (a vanished key answers an error, the caller decides what it means).

    On a cluster one silent primary must not hide the others' keys: redis-py's cluster pipeline fails
    whole when one node refuses the connection, so the keys are then sent again node by node and the
    silent node's keys get None, its name in ``missed``; so do keys whose reply says their node is
    down (CLUSTERDOWN, a timeout, a slot in move). Standalone raises :class:`Unreachable` as before.
    """
    client = get_client(conn)
    per_key = [list(commands(key)) for key in keys]
    try:
        with translated(conn):
            flat = pipelined(client, [c for cs in per_key for c in cs], raise_on_error=False) if keys else []
        groups: list[tuple[list[int], list[Any] | None]] = [(list(range(len(keys))), flat)]
    except Unreachable:
        if not is_cluster(conn):
            raise
        by_node: dict[str, list[int]] = {}
        for i, key in enumerate(keys):
            by_node.setdefault(node_of(conn, key), []).append(i)
        groups = []
        for members in by_node.values():
            try:
                with translated(conn):
                    replies = pipelined(client, [c for i in members for c in per_key[i]], raise_on_error=False)
            except Unreachable:
                replies = None
            groups.append((members, replies))
    out: list[list[Any] | None] = [None] * len(keys)
    missed: list[str] = []
    for members, flat_replies in groups:
        at = 0
        for i in members:
            mine = flat_replies[at : at + len(per_key[i])] if flat_replies is not None else None
            at += len(per_key[i])
            if mine is None or any(isinstance(reply, _NODE_TROUBLE) for reply in mine):
                _note(missed, node_of(conn, keys[i]))
            else:
                out[i] = mine
    return KeyedReplies(replies=out, missed=tuple(missed))


def stream_read(conn: str, client: SyncClient, key: bytes, *command: object) -> Any:
    """The reply to one read ``command`` on ``key``, sent with the key's TYPE (see :func:`stream_pipeline`)."""
    return stream_pipeline(conn, client, key, [command])[0]


def lookup(key: bytes, entry_id: str | bytes) -> tuple[object, ...]:
    """The command reading one entry by its exact ID: O(log N), an empty reply if it is gone."""
    return ("XRANGE", key, entry_id, entry_id, "COUNT", 1)


def entries_by_id(
    conn: str,
    client: SyncClient,
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
