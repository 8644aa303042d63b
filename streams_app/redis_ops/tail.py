"""The live tail's reads of one monitored connection, from asyncio (the tail hub's side of the door).

The hub (:mod:`streams_app.live.hub`) decides which client gets which entry; this module is how the
entries are read. :class:`TailSource` is one connection: where each key is read (:class:`Layout`)
and one :class:`TailReader` per node that reads. A standalone server is one node; a Redis Cluster is
one node per primary, each reading the tailed keys whose slots it owns, so the connections a process
opens grow with the nodes, never with clients or keys. Each :class:`TailReader` keeps two connections
to its node:

* the **reader**, which spends its life blocked in ``XREAD BLOCK ... STREAMS k1 k2 ... id1 id2 ...``
  over the tailed keys of its node, and therefore can do nothing else;
* the **control** connection, for everything else: newest IDs, replay ranges, TYPE checks, and
  ``CLIENT UNBLOCK`` of the reader when its XREAD must restart with another set of keys (that is why
  it is a second connection: the reader's is busy blocking; and why it is per node: a client ID
  means something only on its own server). A server that renames CLIENT away or refuses it gives no
  client ID: the reader is then not :attr:`~TailReader.interruptible`, and the caller blocks less.

On a cluster one XREAD may name keys of one hash slot only, even when one node owns all the slots
(CROSSSLOT is checked per command, not per node). So a node's tailed slots are read by **slot
readers** first: :meth:`TailSource.slot_reader` is one more reader connection (named
``busconsole-tail-slot``) blocked in one slot's XREAD, up to a bound per node that the hub keeps
(``BUSCONSOLE_TAIL_SLOT_READERS_PER_NODE``; one per slot, unbounded, would cost up to 16,384
connections per node and process). The slots beyond the bound are read by :meth:`TailReader.read_slots`:
one round trip carrying one XREAD per slot, answered at once, the hub deciding how often
(:mod:`streams_app.live.node_reader`). A slot reader's XREAD is cut short from its node's control
connection (:meth:`TailReader.unblock_client`). Keyspace notifications would need a server setting a
monitoring console must not change.

Replies stay as Redis sends them (``[id, [name, value, ...]]``, bytes): the hub decodes each entry
once for all its clients. Every failure is an :class:`~streams_app.redis_ops.errors.OpsError`, as on
the sync side; an unreachable server is :class:`~streams_app.redis_ops.errors.Unreachable`, a key
whose slot another node now serves is :class:`Moved` (the caller re-routes it and reads on).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Awaitable, Callable, Coroutine, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, TypeVar, cast

import redis
import redis.asyncio as aioredis
from django.conf import settings
from redis.cluster import RedisCluster

from .client import async_client, connection_url, get_client, is_cluster, node_url, primaries, slot_of
from .errors import OpsError, RedisRefused, Unreachable, reply_text, translated
from .ids import reply_id
from .types import RawEntry

T = TypeVar("T")

log = logging.getLogger(__name__)

RawRead = Sequence[tuple[bytes, Sequence[RawEntry]]]
"""An XREAD reply: ``[[key, [entry, ...]], ...]``, only the keys that have new entries."""

#: Entries per XREVRANGE page of :meth:`TailReader.newest_first`.
RANGE_PAGE = 500
#: Slots of a Redis Cluster.
SLOTS = 16384
#: Times a command routed by key follows MOVED before it gives up (a reshard moves a slot once).
MOVED_HOPS = 3


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class Moved(Unreachable):
    """A key's slot is served by another node now (MOVED): re-route it and read on.

    An :class:`Unreachable` for callers that do not re-route (it is transient, and a retry works).
    """

    def __init__(self, conn: str, *, slot: int, node: str, host: str, port: int) -> None:
        super().__init__(f"Redis Cluster {conn!r} moved slot {slot} to {node}; try again.", conn=conn)
        self.slot, self.node, self.host, self.port = slot, node, host, port


def _refused(conn: str, exc: redis.ResponseError) -> OpsError:
    """An error reply as the access layer's error, cluster redirections included.

    The tail's connections are plain ones to one node (a cluster client cannot hold a blocked XREAD
    and be interrupted by its client ID), so redis-py parses ``MOVED 123 host:port`` and its kin as
    a plain ResponseError (redis-py 8: as classes of their own, the code kept apart): they are
    recognised here by their text, as Redis documents them.
    """
    text = reply_text(exc)
    word = text.split(" ", 1)[0]
    if word == "MOVED":
        with contextlib.suppress(ValueError):
            _, slot, address = text.split(" ")
            host, port = address.rsplit(":", 1)
            return Moved(conn, slot=int(slot), node=address, host=host, port=int(port))
    if word in ("ASK", "TRYAGAIN"):
        return Unreachable(f"Redis Cluster {conn!r} is moving this key between nodes; try again.", conn=conn)
    if word in ("CLUSTERDOWN", "MASTERDOWN"):
        return Unreachable(f"Redis Cluster {conn!r} cannot serve this key now: {text}", conn=conn)
    try:
        with translated(conn):
            raise exc
    except OpsError as out:
        return out
    return RedisRefused(text, conn=conn)  # pragma: no cover - translated() always raises


@contextlib.contextmanager
def _translated(conn: str) -> Iterator[None]:
    """:func:`~streams_app.redis_ops.errors.translated`, with the cluster replies of a plain connection."""
    with translated(conn):
        try:
            yield
        except redis.ResponseError as exc:
            raise _refused(conn, exc) from exc


# ------------------------------------------------------------------------------------ the layout


@dataclass(frozen=True, slots=True)
class Layout:
    """Which node reads which key: one node on standalone, the owner of the key's slot on a cluster."""

    #: node name (``host:port``) -> the URL its readers connect to
    urls: dict[str, str]
    #: slot -> node name on a cluster (``""`` for a slot nobody serves); None on standalone
    owners: tuple[str, ...] | None = None

    @property
    def cluster(self) -> bool:
        return self.owners is not None

    def node_of(self, key: bytes) -> str:
        """The node whose reader reads ``key`` ("" when the cluster serves its slot nowhere)."""
        if self.owners is None:
            return next(iter(self.urls))
        return self.owners[slot_of(key)]

    def groups(self, keys: Sequence[bytes]) -> list[list[bytes]]:
        """The keys one XREAD may name together: all of them on standalone, one slot's on a cluster."""
        if self.owners is None:
            return [list(keys)] if keys else []
        by_slot: dict[int, list[bytes]] = {}
        for key in keys:
            by_slot.setdefault(slot_of(key), []).append(key)
        return list(by_slot.values())

    def moved(self, conn: str, exc: Moved) -> Layout:
        """This layout with ``exc.slot`` served by ``exc.node`` (what MOVED says, node added if new)."""
        assert self.owners is not None
        owners = list(self.owners)
        owners[exc.slot] = exc.node
        urls = dict(self.urls)
        if exc.node not in urls:
            urls[exc.node] = node_url(conn, exc.host, exc.port)
        return Layout(urls=urls, owners=tuple(owners))


def load_layout(conn: str) -> Layout:
    """The layout of ``conn`` now (blocking: run it in a thread).

    On a cluster the slot map is the shared client's, refreshed first (``CLUSTER SLOTS``): the tail
    asks only when it starts or when a node answered MOVED, so it wants the present one.
    """
    with translated(conn):
        if not is_cluster(conn):
            node = primaries(conn)[0]
            return Layout(urls={node.name: connection_url(conn)})
        client = cast(RedisCluster, get_client(conn))  # is_cluster(conn) above
        manager = client.nodes_manager
        manager.initialize()
        owners = [""] * SLOTS
        for slot, nodes in manager.slots_cache.items():
            if nodes:
                owners[slot] = nodes[0].name
        urls = {node.name: node_url(conn, node.host, node.port) for node in client.get_primaries()}
        return Layout(urls=urls, owners=tuple(owners))


# ------------------------------------------------------------------------------- one node's reader


class TailReader:
    """The reader and control connections of one node (the server, on standalone), built on first use.

    ``TailReader(conn)`` reads the connection's own URL; the :class:`TailSource` of a cluster makes
    one per primary with ``url`` pointing at it. Raises :class:`~streams_app.redis_ops.errors.NotFound`
    at once when ``conn`` is not configured. Not thread-safe: one instance belongs to one event loop.
    """

    def __init__(self, conn: str, *, url: str | None = None, node: str | None = None,
                 name: str = "busconsole-tail-reader") -> None:
        self.conn = conn
        self.name = name  # the reader connection's CLIENT SETNAME (operators count them by it)
        self._conn_url = connection_url(conn)
        self._url = url or self._conn_url
        self.node = node
        self._reader: aioredis.Redis | None = None
        self._control: aioredis.Redis | None = None
        self._reader_id: int | None = None
        # CLIENT ID refused (CLIENT renamed away or denied, as managed services do): nothing can interrupt
        # the reader's XREAD, so it is not asked again on this connection (see ``interruptible``).
        self._no_client_id = False
        self._packed: dict[tuple[Any, ...], bytes] = {}  # the last round's XREADs, encoded

    def configured(self) -> bool:
        """Whether the settings still point ``conn`` where this reader reads (tests change them)."""
        return settings.BUS_REDIS_URLS.get(self.conn) == self._conn_url

    @property
    def reader_id(self) -> int | None:
        """The reader connection's ``CLIENT ID`` once it is connected, else None."""
        return self._reader_id

    @property
    def interruptible(self) -> bool:
        """Whether :meth:`unblock_reader` can cut the reader's blocked XREAD short (it knows its CLIENT ID).

        False on a server that renames CLIENT away or refuses it: a caller then blocks for less time, as
        a key joining the read waits for the XREAD to end by itself.
        """
        return self._reader_id is not None

    # -- the reader connection

    async def connect_reader(self, *, block_ms: int) -> None:
        """Open the reader connection and learn its ``CLIENT ID`` (for :meth:`unblock_reader`).

        Its read timeout is ``block_ms`` past the usual one: the reader is silent for a whole BLOCK.
        """
        if self._reader is not None and (self._reader_id is not None or self._no_client_id):
            return
        with self._reader_failures():
            if self._reader is None:
                self._reader = async_client(self._url, client_name=self.name, wait_s=block_ms / 1000)
            try:
                self._reader_id = int(await self._reader.execute_command("CLIENT", "ID"))
            except redis.ResponseError as exc:  # CLIENT renamed away or denied: read on, uninterruptible
                self._no_client_id = True
                log.info("tail %s: no CLIENT ID (%s): the reader cannot be interrupted", self.conn, exc)

    async def read(self, keys: Sequence[bytes], ids: Sequence[str], *, count: int, block_ms: int) -> RawRead:
        """``XREAD COUNT count BLOCK block_ms STREAMS keys... ids...``; empty when the block timed out.

        One call for all keys. On :class:`Unreachable` the reader connection is dropped, so the next
        read starts over on a fresh one. A key holding another type fails the whole read
        (:class:`~streams_app.redis_ops.errors.NotFound`): :meth:`types` tells which.
        """
        [reply] = await self.read_slots([(keys, ids)], count=count, block_ms=block_ms, blocking=0)
        if isinstance(reply, OpsError):
            raise reply
        return reply

    async def read_slots(self, groups: Sequence[tuple[Sequence[bytes], Sequence[str]]], *, count: int,
                         block_ms: int, blocking: int | None) -> list[RawRead | OpsError]:
        """One XREAD per group (keys, their IDs), sent in one round trip; a reply or an error per group.

        Only the group at index ``blocking`` (if any) has ``BLOCK block_ms``; the others answer at
        once (Redis runs them in order: a blocking one delays those after it). A refused XREAD (a key of another
        type, MOVED...) is that group's :class:`OpsError` and the others' replies still count; an
        unreachable node raises :class:`Unreachable` for the round, and the next starts on a fresh
        connection.
        """
        await self.connect_reader(block_ms=block_ms)
        assert self._reader is not None
        out: list[RawRead | OpsError] = []
        with self._reader_failures():
            await self._reader.initialize()
            connection = self._reader.connection  # the client's one connection (single_connection_client)
            assert connection is not None
            # redis-py's pipeline would take a second connection from the pool: send the round ourselves.
            # A quiet node's rounds repeat the same XREADs (same keys, same IDs) many times a second:
            # each is encoded once and reused while it does not change (encoding was most of a round's CPU).
            before, self._packed = self._packed, {}
            commands = []
            for index, (keys, ids) in enumerate(groups):
                block = ("BLOCK", block_ms) if index == blocking else ()
                command = ("XREAD", "COUNT", count, *block, "STREAMS", *keys, *ids)
                encoded = before.get(command) or b"".join(connection.pack_command(*command))
                self._packed[command] = encoded
                commands.append(encoded)
            await connection.send_packed_command(commands)
            for _ in commands:
                try:
                    out.append(await connection.read_response() or [])
                except redis.ResponseError as exc:  # this group's refusal; keep reading the others
                    out.append(_refused(self.conn, exc))
        return out

    @contextlib.contextmanager
    def _reader_failures(self) -> Iterator[None]:
        try:
            with _translated(self.conn):
                yield
        except Unreachable:
            self._reader_id = None
            if self._reader is not None:  # start over on a fresh connection
                reader, self._reader = self._reader, None
                _spawn(_close_quietly(reader))
            raise

    # -- the control connection

    def _control_client(self) -> aioredis.Redis:
        if self._control is None:
            self._control = async_client(self._url, client_name="busconsole-tail-control")
        return self._control

    async def _command(self, *args: Any) -> Any:
        """A command on the control connection, shielded: a cancelled caller must not cut a reply in half."""
        with _translated(self.conn):
            return await asyncio.shield(self._control_client().execute_command(*args))

    async def newest_id(self, key: bytes) -> str:
        """The newest entry ID of ``key``; ``0-0`` when it is missing or empty."""
        raw = await self._command("XREVRANGE", key, "+", "-", "COUNT", 1)
        return reply_id(raw[0] if raw else None) or "0-0"

    async def newest_first(self, key: bytes, *, after: str, until: str, limit: int) -> list[RawEntry]:
        """At most ``limit`` entries of (after, until], newest first.

        Read in pages of :data:`RANGE_PAGE` with exclusive ranges, so each page is O(log N + page)
        whatever the stream's length.
        """
        out: list[RawEntry] = []
        end = until
        while len(out) < limit:
            want = min(RANGE_PAGE, limit - len(out))
            raw = await self._command("XREVRANGE", key, end, "(" + after, "COUNT", want)
            out.extend(raw)
            if len(raw) < want:
                break
            end = f"({reply_id(raw[-1])}"
        return out

    async def types(self, keys: Sequence[bytes]) -> list[str]:
        """``TYPE`` of each key (``none`` for a missing key).

        One command at a time on the one control connection: a pipeline would open a second one, and
        this runs only when an XREAD was refused.
        """
        return [_text(await self._command("TYPE", key)) for key in keys]

    async def unblock_reader(self) -> bool:
        """``CLIENT UNBLOCK`` the reader: True if it was blocked, False if it is not (yet, or at all).

        The XREAD may still be on its way to the server: the caller retries while it matters.
        """
        if self._reader_id is None:
            return False
        return await self.unblock_client(self._reader_id)

    async def unblock_client(self, client_id: int) -> bool:
        """``CLIENT UNBLOCK client_id`` from this node's control connection (a slot reader's, say)."""
        return bool(await self._command("CLIENT", "UNBLOCK", client_id))

    async def kill_client(self, client_id: int) -> None:
        """``CLIENT KILL ID client_id`` from this node's control connection (a slot reader let go)."""
        await self._command("CLIENT", "KILL", "ID", client_id)

    # -- both

    def close(self) -> None:
        """Let both connections go, in the background (an in-flight XREAD ends with its socket).

        For synchronous callers such as the hub's bookkeeping; the next command connects again.
        """
        clients = self._detach()
        with contextlib.suppress(RuntimeError):  # the loop is shutting down: its sockets go with it
            for client in clients:
                _spawn(_close_quietly(client))

    async def aclose(self) -> None:
        """Close both connections and wait for it (for callers that end the event loop next)."""
        for client in self._detach():
            await _close_quietly(client)

    def _detach(self) -> list[aioredis.Redis]:
        clients = [c for c in (self._reader, self._control) if c is not None]
        self._reader = self._control = None
        self._reader_id = None
        return clients


# ------------------------------------------------------------------------------- one connection


class TailSource:
    """The tail's side of one connection: its layout and one :class:`TailReader` per node.

    Commands about one key (newest ID, replay, TYPE) go to the node that owns it and follow MOVED,
    so callers never route. Raises :class:`~streams_app.redis_ops.errors.NotFound` at once when
    ``conn`` is not configured. Not thread-safe: one instance belongs to one event loop.
    """

    def __init__(self, conn: str) -> None:
        self.conn = conn
        self._url = connection_url(conn)
        self._layout: Layout | None = None
        self._loading: asyncio.Future[Layout] | None = None
        self.readers: dict[str, TailReader] = {}
        #: (node, slot) -> the reader connection blocked in that slot's XREAD (the hub bounds them per node)
        self.slot_readers: dict[tuple[str, int], TailReader] = {}

    def configured(self) -> bool:
        """Whether the settings still point ``conn`` where this source reads (tests change them)."""
        return settings.BUS_REDIS_URLS.get(self.conn) == self._url

    async def layout(self) -> Layout:
        """The layout, read once (in a thread: the shared client's detection and slot map block)."""
        if self._layout is not None:
            return self._layout
        if self._loading is None:
            self._loading = asyncio.ensure_future(asyncio.to_thread(load_layout, self.conn))
            self._loading.add_done_callback(self._loaded)
        return await asyncio.shield(self._loading)

    def _loaded(self, future: asyncio.Future[Layout]) -> None:
        self._loading = None
        if not future.cancelled() and future.exception() is None:
            self._layout = future.result()

    @property
    def current(self) -> Layout | None:
        """The layout if it is known (it is once any key was routed)."""
        return self._layout

    def moved(self, exc: Moved) -> Layout:
        """Take a MOVED reply into the layout: ``exc.slot`` is served by ``exc.node`` from now on."""
        assert self._layout is not None
        self._layout = self._layout.moved(self.conn, exc)
        return self._layout

    async def refresh(self) -> Layout:
        """The layout read anew (the cluster's present slot map), in a thread."""
        self._layout = await asyncio.to_thread(load_layout, self.conn)
        return self._layout

    async def node_of(self, key: bytes) -> str:
        """The node that reads ``key``, the layout read first if it is not known yet.

        The layout it awaited, not ``self._layout``: a :meth:`close` (the last tail of the process
        left) may forget the layout between the load finishing and this caller resuming.
        """
        return self._owner(await self.layout(), key)

    def owner(self, key: bytes) -> str:
        """:meth:`node_of` once the layout is known (no await: for callers that must not yield)."""
        if self._layout is None:
            raise Unreachable(f"The layout of {self.conn!r} is being read again; try again.", conn=self.conn)
        return self._owner(self._layout, key)

    def _owner(self, layout: Layout, key: bytes) -> str:
        node = layout.node_of(key)
        if not node:
            raise Unreachable(f"Redis Cluster {self.conn!r} serves the slot of this key nowhere now.", conn=self.conn)
        return node

    def reader(self, node: str) -> TailReader:
        """The reader of ``node`` (a node of the present layout, or one that served keys before)."""
        reader = self.readers.get(node)
        if reader is None:
            layout = self._layout
            url = layout.urls.get(node) if layout is not None else None
            if url is None:
                raise Unreachable(f"Redis node {node} is not a primary of {self.conn!r} now.", conn=self.conn)
            reader = self.readers[node] = TailReader(self.conn, url=url, node=node)
        return reader

    def slot_reader(self, node: str, slot: int) -> TailReader:
        """The reader connection of one slot of ``node`` (its reader only: interrupts go through
        :meth:`reader`'s control connection, one per node)."""
        reader = self.slot_readers.get((node, slot))
        if reader is None:
            url = self.reader(node)._url  # the node's URL, or Unreachable when it is not a primary now
            reader = self.slot_readers[(node, slot)] = TailReader(self.conn, url=url, node=node,
                                                                  name="busconsole-tail-slot")
        return reader

    def detach_slot(self, node: str, slot: int) -> TailReader | None:
        """Forget one slot reader, for the caller to :meth:`close_slot_reader` (a successor gets a new one)."""
        return self.slot_readers.pop((node, slot), None)

    async def close_slot_reader(self, node: str, reader: TailReader) -> None:
        """Close a detached slot reader, gone from the server when this returns.

        ``CLIENT KILL ID`` from the node's control connection first: closing our socket alone leaves the
        server to notice at its next event, and the hub opens the next slot reader at once, so its CLIENT
        LIST could show one connection past the bound for a moment. A server that refuses CLIENT KILL
        (managed services) is left to notice the close.
        """
        control = self.readers.get(node)
        if control is not None and reader.reader_id is not None:
            with contextlib.suppress(OpsError):
                await control.kill_client(reader.reader_id)
        await reader.aclose()

    async def _routed(self, key: bytes, call: Callable[[TailReader], Awaitable[T]]) -> T:
        """``call(reader)`` on the reader of ``key``'s node, following MOVED a bounded number of times."""
        for hop in range(MOVED_HOPS + 1):
            reader = self.reader(await self.node_of(key))
            try:
                return await call(reader)
            except Moved as exc:
                if hop == MOVED_HOPS or self._layout is None:
                    raise
                self.moved(exc)
        raise AssertionError("unreachable")  # pragma: no cover

    async def newest_id(self, key: bytes) -> str:
        """The newest entry ID of ``key``; ``0-0`` when it is missing or empty."""
        return await self._routed(key, lambda reader: reader.newest_id(key))

    async def newest_first(self, key: bytes, *, after: str, until: str, limit: int) -> list[RawEntry]:
        """At most ``limit`` entries of (after, until], newest first (:meth:`TailReader.newest_first`)."""
        return await self._routed(key, lambda r: r.newest_first(key, after=after, until=until, limit=limit))

    async def types(self, keys: Sequence[bytes]) -> list[str]:
        """``TYPE`` of each key (``none`` for a missing key), each asked of its own node."""

        async def one(key: bytes) -> str:
            return (await self._routed(key, lambda reader: reader.types([key])))[0]

        return [await one(key) for key in keys]

    def release(self, node: str) -> None:
        """Let one node's connections go (nothing it reads is tailed any more)."""
        reader = self.readers.pop(node, None)
        if reader is not None:
            reader.close()
        for where in [w for w in self.slot_readers if w[0] == node]:
            self.slot_readers.pop(where).close()

    def close(self) -> None:
        """Let every connection go and forget the layout: the next tail reads the topology anew."""
        for node in {*self.readers, *(node for node, _ in self.slot_readers)}:
            self.release(node)
        if self._loading is None:
            self._layout = None

    async def aclose(self) -> None:
        readers, self.readers = [*self.readers.values(), *self.slot_readers.values()], {}
        self.slot_readers = {}
        for reader in readers:
            await reader.aclose()
        self._layout = None


_background: set[asyncio.Task[None]] = set()


def _spawn(coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` in the background, holding a reference (the loop keeps only weak ones)."""
    task = asyncio.get_running_loop().create_task(coro)
    _background.add(task)
    task.add_done_callback(_background.discard)


async def _close_quietly(client: aioredis.Redis) -> None:
    with contextlib.suppress(Exception):
        await client.aclose()

