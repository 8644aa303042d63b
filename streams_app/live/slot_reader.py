"""One blocked XREAD per tailed slot of a cluster node, up to a bound per node.

Redis refuses an XREAD over keys of several hash slots (CROSSSLOT), so without these a node whose
tailed keys span several slots could only be polled (:mod:`streams_app.live.node_reader`), and an entry
waited up to a poll interval. A :class:`SlotReader` holds its own connection to the node
(``busconsole-tail-slot``, :meth:`~streams_app.redis_ops.tail.TailSource.slot_reader`) blocked in
``XREAD BLOCK`` over the tailed keys of one slot, so an entry is handed out the moment Redis has it,
as on standalone. A node keeps at most ``BUSCONSOLE_TAIL_SLOT_READERS_PER_NODE`` of them per process
(:func:`slot_readers_per_node`); the slots beyond are polled by the node's own loop, and a slot reader
that ends (its last client left, or its slot moved) makes room for one of them. So the connections a
process opens to one node stay at most that bound plus two (the node's control and polling reader).

No gap, no duplicate. The cursors are the hub's, one per key, whoever reads it: a key handed from the
polling loop to a slot reader (or back, or to another node's reader after MOVED) is read on from its
cursor, and dispatch drops whatever an XREAD still in flight brings at or below it. An XREAD's reply for
a key is contiguous from the cursor it was sent with, so what is past the current cursor follows it
without a hole.

The reader is interrupted (``CLIENT UNBLOCK`` of its client ID, from the node's control connection) when
a key joins its slot or its last key leaves, as the node's own blocked reader is; failures and MOVED are
handled by its node (:meth:`NodeReader.failed <streams_app.live.node_reader.NodeReader.failed>`,
:meth:`~streams_app.live.node_reader.NodeReader.take`), whose status the subscribers see.
"""

from __future__ import annotations

import asyncio
import logging
from collections.abc import Sequence
from typing import Protocol

from django.conf import settings

from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.tail import RawRead, TailReader, TailSource

log = logging.getLogger(__name__)

#: Attempts of CLIENT UNBLOCK while the XREAD it targets is still on its way to the server.
UNBLOCK_ATTEMPTS = 25


class SlotOwner(Protocol):
    """What a slot reader reads from the hub's tail of its connection (``hub.StreamTail``)."""

    conn: str
    source: TailSource
    cursors: dict[bytes, str]
    xread_calls: int
    interrupts: int


class Node(Protocol):
    """What a slot reader needs from its node's reader (``node_reader.NodeReader``), which hands out
    what it reads and says when it cannot (an import of it here would be a cycle)."""

    name: str
    rounds: int

    @property
    def owner(self) -> SlotOwner: ...

    def read_params(self, reader: TailReader) -> tuple[int, int]: ...

    async def take(self, groups: Sequence[Sequence[bytes]], replies: Sequence[RawRead | OpsError],
                   keys: Sequence[bytes], *, count: int, by: object = None) -> bool: ...

    async def failed(self, exc: OpsError, *, by: object = None) -> None: ...

    def slot_ended(self, reader: SlotReader) -> None: ...


def slot_readers_per_node() -> int:
    """The most slot readers one process keeps per cluster node (0: every slot is polled)."""
    return max(0, int(settings.BUSCONSOLE_TAIL_SLOT_READERS_PER_NODE))


class SlotReader:
    """The blocked XREAD of one slot's tailed keys on one node; its loop runs while it has keys."""

    def __init__(self, node: Node, slot: int) -> None:
        self.node = node
        self.slot = slot
        self.keys: set[bytes] = set()
        self.task: asyncio.Task[None] | None = None
        self.in_flight: frozenset[bytes] | None = None
        self._interrupter: asyncio.Task[None] | None = None

    def add(self, key: bytes) -> None:
        self.keys.add(key)
        if self.task is None:
            owner = self.node.owner
            self.task = asyncio.get_running_loop().create_task(
                self._run(), name=f"tail-slot-{owner.conn}-{self.node.name}-{self.slot}")
        self.interrupt_if_needed()

    def discard(self, key: bytes) -> None:
        self.keys.discard(key)
        if not self.keys:
            self.interrupt_if_needed()  # let the loop end and the connection go now

    # -- interrupting the blocked read

    def interrupt_if_needed(self) -> None:
        if self.in_flight is not None and self._interrupter is None:
            self._interrupter = asyncio.get_running_loop().create_task(self._interrupt())

    def _read_is_stale(self) -> bool:
        flight = self.in_flight
        return flight is not None and (not self.keys or not self.keys <= flight)

    async def _interrupt(self) -> None:
        source = self.node.owner.source
        try:
            for attempt in range(UNBLOCK_ATTEMPTS):
                reader = source.slot_readers.get((self.node.name, self.slot))
                control = source.readers.get(self.node.name)
                if not self._read_is_stale() or reader is None or control is None or reader.reader_id is None:
                    return
                if await control.unblock_client(reader.reader_id):
                    self.node.owner.interrupts += 1
                    return
                await asyncio.sleep(0.002 * (attempt + 1))  # the XREAD has not reached the server yet
        except Exception as exc:  # noqa: BLE001 - the bounded BLOCK is the backstop
            log.debug("tail %s %s slot %s: CLIENT UNBLOCK failed: %s",
                      self.node.owner.conn, self.node.name, self.slot, exc)
        finally:
            self._interrupter = None

    # -- the loop

    async def _run(self) -> None:
        try:
            while self.keys:
                try:
                    await self._round()
                except Exception:
                    log.exception("tail slot reader %s %s %s: unexpected error",
                                  self.node.owner.conn, self.node.name, self.slot)
                    await asyncio.sleep(1.0)
        finally:
            # No await between the loop's last check and this: a key added after it goes elsewhere.
            self.task = None
            self.node.slot_ended(self)

    async def _round(self) -> None:
        node, owner = self.node, self.node.owner
        try:
            owner.source.reader(node.name)  # the node's control connection, for interrupts
            reader = owner.source.slot_reader(node.name, self.slot)
            await reader.connect_reader(block_ms=int(settings.BUSCONSOLE_TAIL_BLOCK_MS))
        except OpsError as exc:
            await node.failed(exc, by=self)
            return
        # From here to the XREAD being sent there is no await: keys and cursors agree.
        keys = list(self.keys)
        if not keys:
            return
        block, count = node.read_params(reader)  # the BLOCK may shrink once CLIENT ID was refused
        self.in_flight = frozenset(keys)
        try:
            replies = await reader.read_slots([(keys, [owner.cursors[k] for k in keys])],
                                              count=count, block_ms=block, blocking=0)
        except OpsError as exc:
            await node.failed(exc, by=self)
            return
        finally:
            self.in_flight = None
        node.rounds += 1
        owner.xread_calls += 1
        await node.take([keys], replies, keys, count=count, by=self)
