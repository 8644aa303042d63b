"""One node's reader loop for the tail hub: XREAD the tailed keys the node serves, say when it cannot.

The hub (:mod:`streams_app.live.hub`) keeps, per monitored connection, one :class:`NodeReader` per
node that serves a tailed key: the one server on standalone, each primary owning a tailed key's slot
on a Redis Cluster. Each holds one blocked XREAD on its node's reader connection (``TailReader``), and
on a cluster one per tailed slot up to a bound, so Redis connections follow nodes and slots (bounded),
never clients. What the loop reads goes back to the hub, which
owns the cursors and the subscribers (the :class:`Owner` protocol): this module decides only what to
read next and whether the node is receiving.

Reading. On a cluster each tailed slot of the node first gets a slot reader of its own, a connection
blocked in that slot's XREAD (:mod:`streams_app.live.slot_reader`), up to
``BUSCONSOLE_TAIL_SLOT_READERS_PER_NODE`` per node; this loop reads the keys of the slots beyond that
bound (every key, on standalone), and stops while there are none. Keys of one slot are one ``XREAD BLOCK`` of
``BUSCONSOLE_TAIL_BLOCK_MS``, interrupted by ``CLIENT UNBLOCK`` when a key joins, as before the cluster
existed; on a server that renames CLIENT away or refuses it (managed services) nothing can interrupt it,
so it blocks for :data:`UNINTERRUPTIBLE_BLOCK_MS` at most and a joining key waits that long. Polled keys
of several slots on one cluster node cannot share an XREAD (CROSSSLOT), so a round is one
round trip with one XREAD per slot, none of them blocking (``TailReader.read_slots``); a round that
brought entries is followed at once by the next, one that brought none by a wait of
``BUSCONSOLE_TAIL_POLL_MS`` (10 ms) that a joining key cuts short, four times that once the node has
brought nothing for a second. So a busy node is read as fast as Redis answers, an entry of a node that
is being written to waits at most about POLL_MS (the first one after a quiet second about 4 x POLL_MS),
and a quiet node costs 25 round trips a second (about 0.25 ms of CPU each for 33 slots: the XREADs
of a round are encoded once and reused while their IDs do not change). The wait is the hub's own
timer, not a short BLOCK on one of the slots: Redis ends a BLOCK that times out only at its next
server tick (1000 / ``hz`` ms, 100 ms by default), so rounds with a short BLOCK ran far fewer times a
second than their BLOCK said (docs/performance.md#figures-behind-the-design). ``bench/tail.py`` measures the cluster case against a floor of one
blocked connection per key.

Pacing. Handing a batch out costs per client (a socket write each, :mod:`streams_app.live.wire`), not
per entry, so a reader that read again the moment it had handed out would, at high rates, write one
frame per entry to every client and spend the process on system calls. Hand-outs therefore get a budget:
a share of the wall time that passes (``BUSCONSOLE_TAIL_FANOUT_PERCENT``, 80 %; saved up to
:data:`PACE_BURST_S`), and each spends its CPU time T. While the budget lasts the reader reads again at
once, so an entry waits for no pacing when the process is not busy handing out. Once it is spent, the
reader waits until it is back to zero (at most ``BUSCONSOLE_TAIL_PACE_MAX_MS``, 4 ms): at a steady high
rate that is ``T x (1 / share - 1)`` after each hand-out, the entries that arrive meanwhile go out together,
and handing out takes at most that share of the process's time whatever the rate. A quiet stream's
entry always goes out at once (the wait follows a hand-out, it never precedes one). A wait after every
hand-out, budget or not, was measured first: its p99 was worse than the budget's. T is the event loop thread's CPU time, not the wall
clock: on a busy machine a hand-out that was merely descheduled took longer without costing more, and a
wall-clock T turned each such stall into a second, longer one of the reader's own (docs/performance.md#figures-behind-the-design). The gathering wait grows with a process's clients;
the cap bounds it, and so the latency it adds, however many clients one process holds. A share
of one half (a wait of T) was measured too: the same p99, for more CPU per delivered entry on the server
and the clients. With hundreds of clients a hand-out takes milliseconds (a socket write each), and an
entry's latency is about one wait plus one hand-out: a deployment that wants it lower gives hand-outs
more of the process (a higher share, a lower cap), or its clients more processes
(docs/performance.md#the-tail-at-1000-clients).

Saying so. A reader that cannot read tells the subscribers of its keys, with ``status`` frames:
``reconnecting`` at the first failure to reach the node (a restart or a failover is often over
quickly), ``stalled`` with the ``reason`` once it has failed for :data:`STALL_AFTER_S` or at once when
Redis refuses the XREAD (an ACL, a cluster that serves no slot...), and ``live`` again when a read
succeeds. A page that says "live" is receiving. MOVED is not a failure: the slot's keys move to the
reader of the node named by the reply (the hub re-routes them; cursors stay, so nothing is lost or
repeated).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import time
from collections.abc import Iterable, Sequence
from typing import Any, Protocol

from django.conf import settings

from streams_app.live.slot_reader import SlotReader, slot_readers_per_node
from streams_app.redis_ops.client import slot_of
from streams_app.redis_ops.errors import NotFound, OpsError, Unreachable
from streams_app.redis_ops.tail import Moved, RawRead, TailReader, TailSource

log = logging.getLogger(__name__)

#: Entries per key per XREAD (at most a client's queue).
READ_COUNT = 500
#: Attempts of CLIENT UNBLOCK while the XREAD it targets is still on its way to the server.
UNBLOCK_ATTEMPTS = 25
#: The BLOCK of a reader nothing can interrupt (its server renames CLIENT away or refuses it, as managed
#: services do): a key joining its read waits for the XREAD to end, so at most this long (its cursor is
#: set when it joins: its entries come with the next read, none lost), for 4 idle XREADs a second.
UNINTERRUPTIBLE_BLOCK_MS = 250
#: A node whose multi-slot rounds brought nothing for this long waits QUIET_FACTOR x POLL_MS between them.
QUIET_AFTER_S = 1.0
QUIET_FACTOR = 4
#: Seconds of failing reads after which a node's tails are "stalled" rather than "reconnecting".
STALL_AFTER_S = 2.0
#: The longest wait between two attempts of a failing node: a failover ends within a second of the
#: promotion on the tail's side (``bench/failover.py``; waits doubling to 5 s made it slower after a
#: cluster promotion), for one connection attempt (and on a cluster one ``CLUSTER SLOTS``) a second.
RETRY_MAX_S = 1.0
#: The most hand-out time a reader may save up while it has little to hand out (see "Pacing").
PACE_BURST_S = 0.010


def queue_capacity() -> int:
    return int(settings.BUSCONSOLE_TAIL_QUEUE)


def fanout_share() -> float:
    """The share of its time a reader may spend handing out what it read ("Pacing" in the module docstring)."""
    return int(settings.BUSCONSOLE_TAIL_FANOUT_PERCENT) / 100


def pace_max_s() -> float:
    """The longest a reader waits after a hand-out (a bound on the latency pacing adds, however many clients)."""
    return int(settings.BUSCONSOLE_TAIL_PACE_MAX_MS) / 1000


def block_ms() -> int:
    return int(settings.BUSCONSOLE_TAIL_BLOCK_MS)


def poll_ms() -> int:
    """The wait between quiet rounds over several slots of one cluster node (see the module docstring)."""
    return int(settings.BUSCONSOLE_TAIL_POLL_MS)


def read_count() -> int:
    """Entries per key per XREAD: no more than a client's queue holds, so a client that keeps up never skips."""
    return max(1, min(READ_COUNT, queue_capacity()))


_closing: set[asyncio.Task[None]] = set()  # slot readers' connections being closed (strong references)


class Owner(Protocol):
    """What a node reader needs from the hub's tail of its connection (``hub.StreamTail``)."""

    conn: str
    source: TailSource
    cursors: dict[bytes, str]
    xread_calls: int
    interrupts: int

    def dispatch(self, reply: RawRead, count: int, *, read: Iterable[bytes]) -> list[bytes]: ...

    async def skip_to_head(self, key: bytes) -> None: ...

    def moved(self, node: NodeReader, exc: Moved) -> None: ...

    async def refresh(self, node: NodeReader) -> None: ...

    async def evict_non_streams(self, keys: Sequence[bytes], exc: OpsError) -> bool: ...

    def broadcast(self, keys: Iterable[bytes], frame: dict[str, Any]) -> None: ...

    def node_idle(self, node: NodeReader) -> None: ...


class NodeReader:
    """The reader loop of one node and what its subscribers were last told (``state``)."""

    def __init__(self, owner: Owner, name: str, *, cluster: bool) -> None:
        self.owner = owner
        self.name = name
        self.cluster = cluster
        self.keys: set[bytes] = set()  # every tailed key this node serves
        self.polled: set[bytes] = set()  # those this loop reads: the ones no slot reader reads
        self.slots: dict[int, SlotReader] = {}  # on a cluster: slot -> its own blocked reader
        self._closing_slots = 0  # slot readers whose connection is being closed (they count to the bound)
        self._refreshing = False
        self.task: asyncio.Task[None] | None = None
        self.in_flight: frozenset[bytes] | None = None  # keys of the XREAD now blocked, if any
        self._interrupter: asyncio.Task[None] | None = None
        self.state = "live"  # live | reconnecting | stalled
        self.reason: str | None = None
        self._failing_since: float | None = None
        self._failures = 0
        # Who last failed to read (this loop, or a slot reader): the node is "live" again only once none is.
        self._failing: set[object] = set()
        self._wake = asyncio.Event()  # set when the keys change: cuts a multi-slot round's wait short
        self._last_entry_at = 0.0  # when a multi-slot round last brought entries (monotonic)
        self._budget = 0.0  # CPU seconds of hand-out the reader may still spend without waiting ("Pacing")
        self._paced_at = 0.0  # when the budget was last topped up (monotonic; 0: never)
        self.rounds = 0

    # -- keys

    @property
    def idle(self) -> bool:
        """Nothing read here and no connection being let go: the hub may forget this node."""
        return not self.keys and self.task is None and not self.slots and not self._closing_slots

    def add(self, key: bytes) -> None:
        """Read ``key`` from now on (its cursor is set): by its slot's reader, or this loop's XREAD."""
        self.keys.add(key)
        if self.cluster:
            slot = slot_of(key)
            reader = self.slots.get(slot)
            if reader is None and self._room():
                reader = self._open_slot(slot)
            if reader is not None:
                reader.add(key)
                return
        self._poll(key)

    def _poll(self, key: bytes) -> None:
        self.polled.add(key)
        self._wake.set()
        if self.task is None:
            self.task = asyncio.get_running_loop().create_task(
                self._run(), name=f"tail-reader-{self.owner.conn}-{self.name}")
        self.interrupt_if_needed()

    def discard(self, key: bytes) -> None:
        self.keys.discard(key)
        if key in self.polled:
            self.polled.discard(key)
            if not self.polled:
                self._wake.set()
                self.interrupt_if_needed()  # let the loop stop and the connection go now
        elif self.cluster:
            reader = self.slots.get(slot_of(key))
            if reader is not None:
                reader.discard(key)

    # -- slot readers (see streams_app.live.slot_reader)

    def _room(self) -> bool:
        return len(self.slots) + self._closing_slots < slot_readers_per_node()

    def _open_slot(self, slot: int) -> SlotReader:
        """A slot reader for ``slot``, taking over the keys of that slot this loop polled (cursors stay)."""
        reader = self.slots[slot] = SlotReader(self, slot)
        taken = [key for key in self.polled if slot_of(key) == slot]
        for key in taken:
            self.polled.discard(key)
            reader.add(key)
        if taken:  # this loop's XREAD may name them: it restarts without (a read in flight is harmless)
            self._wake.set()
            self.interrupt_if_needed()
        return reader

    def slot_ended(self, reader: SlotReader) -> None:
        """A slot reader's loop ended (no keys left): close its connection, then give its room to a
        polled slot. The connection is counted until it is closed, so the bound holds on the server."""
        if self.slots.get(reader.slot) is reader:
            del self.slots[reader.slot]
        self._failing.discard(reader)
        tail_reader = self.owner.source.detach_slot(self.name, reader.slot)
        self._closing_slots += 1
        task = asyncio.get_running_loop().create_task(self._close_slot(tail_reader))
        _closing.add(task)
        task.add_done_callback(_closing.discard)

    async def _close_slot(self, tail_reader: TailReader | None) -> None:
        try:
            if tail_reader is not None:
                await self.owner.source.close_slot_reader(self.name, tail_reader)
        finally:
            self._closing_slots -= 1
            while self.polled and self._room():
                self._open_slot(slot_of(next(iter(self.polled))))
            self.owner.node_idle(self)

    def status_frame(self) -> dict[str, Any]:
        if self.state == "stalled":
            return {"type": "status", "state": "stalled", "reason": self.reason, "node": self.name}
        if self.state == "reconnecting":
            where = f"Redis node {self.name} of {self.owner.conn!r}" if self.cluster else f"Redis server {self.owner.conn!r}"
            return {"type": "status", "state": "reconnecting", "message": f"{where} is unreachable; retrying.",
                    "node": self.name}
        return {"type": "status", "state": "live"}

    # -- interrupting the blocked read

    def interrupt_if_needed(self) -> None:
        if self.in_flight is not None and self._interrupter is None:
            self._interrupter = asyncio.get_running_loop().create_task(self._interrupt())

    def _read_is_stale(self) -> bool:
        flight = self.in_flight
        return flight is not None and (not self.polled or not self.polled <= flight)

    async def _interrupt(self) -> None:
        """CLIENT UNBLOCK the reader while its XREAD misses a key (or is no longer wanted at all)."""
        try:
            for attempt in range(UNBLOCK_ATTEMPTS):
                reader = self.owner.source.readers.get(self.name)
                if not self._read_is_stale() or reader is None or reader.reader_id is None:
                    return
                if await reader.unblock_reader():
                    self.owner.interrupts += 1
                    return
                await asyncio.sleep(0.002 * (attempt + 1))  # the XREAD has not reached the server yet
        except Exception as exc:  # noqa: BLE001 - the bounded BLOCK is the backstop
            log.debug("tail %s %s: CLIENT UNBLOCK failed: %s", self.owner.conn, self.name, exc)
        finally:
            self._interrupter = None

    # -- the loop

    async def _run(self) -> None:
        try:
            while self.polled:
                try:
                    await self._round()
                except Exception:
                    log.exception("tail reader %s %s: unexpected error", self.owner.conn, self.name)
                    await asyncio.sleep(1.0)
        finally:
            # No await between the loop's last check and this: a key added after it starts a new task.
            self.task = None
            self._failing.discard(self)
            self.owner.node_idle(self)

    async def _round(self) -> None:
        owner = self.owner
        self._wake.clear()  # a key that joins from here on cuts the wait after this round short
        try:
            reader = owner.source.reader(self.name)
            await reader.connect_reader(block_ms=block_ms())
        except OpsError as exc:
            await self.failed(exc)
            return
        # From here to the XREAD being sent there is no await: keys, groups and cursors agree.
        keys = list(self.polled)
        layout = owner.source.current
        groups = layout.groups(keys) if layout is not None else [keys]
        if not groups:
            return
        blocking = 0 if len(groups) == 1 else None
        block, count = self.read_params(reader)
        self.in_flight = frozenset(keys) if blocking is not None else None  # only a blocked XREAD is interrupted
        try:
            replies = await reader.read_slots([(g, [owner.cursors[k] for k in g]) for g in groups],
                                              count=count, block_ms=block, blocking=blocking)
        except OpsError as exc:
            await self.failed(exc)
            return
        finally:
            self.in_flight = None
        self.rounds += 1
        owner.xread_calls += len(groups)
        got = await self.take(groups, replies, keys, count=count)
        if blocking is None and not got and not self._wake.is_set():
            wait = poll_ms() / 1000
            if time.monotonic() - self._last_entry_at > QUIET_AFTER_S:
                wait *= QUIET_FACTOR
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()

    def read_params(self, reader: TailReader) -> tuple[int, int]:
        """The BLOCK (ms) and COUNT of an XREAD on ``reader``: a reader nothing can interrupt blocks less."""
        block = block_ms() if reader.interruptible else min(block_ms(), UNINTERRUPTIBLE_BLOCK_MS)
        return block, read_count()

    async def take(self, groups: Sequence[Sequence[bytes]], replies: Sequence[RawRead | OpsError],
                   keys: Sequence[bytes], *, count: int, by: object = None) -> bool:
        """Hand out what a round read (this loop's or a slot reader's); whether it brought entries.

        A group answered MOVED goes to its new node, one whose keys hold another type ends their tails,
        another refusal is this node's failure; the others' entries are handed out, then paced.
        """
        owner = self.owner
        entries: list[tuple[bytes, Any]] = []
        problem: OpsError | None = None
        for group, reply in zip(groups, replies, strict=True):
            if isinstance(reply, Moved):
                owner.moved(self, reply)
            elif isinstance(reply, NotFound):  # a key now holds another type: end its tails only
                if not await owner.evict_non_streams(group, reply):
                    problem = reply
            elif isinstance(reply, OpsError):
                problem = reply
            else:
                entries.extend(reply)
        fanout_s = 0.0
        if entries:
            began = time.thread_time()
            lagging = owner.dispatch(entries, count, read=keys)
            fanout_s = time.thread_time() - began
            for key in lagging:
                await owner.skip_to_head(key)
        if problem is not None:
            await self.failed(problem, by=by)
            return bool(entries)
        self._recovered(by=by)
        if entries:
            self._last_entry_at = time.monotonic()
            await self._pace(fanout_s)
        return bool(entries)

    async def _pace(self, fanout_s: float) -> None:
        """After a hand-out that took ``fanout_s`` of CPU, let entries gather if hand-outs overspent."""
        wait = self.pace_wait(fanout_s, now=time.monotonic())
        if wait > 0.0005 and not self._wake.is_set():
            with contextlib.suppress(TimeoutError):
                async with asyncio.timeout(wait):
                    await self._wake.wait()

    def pace_wait(self, fanout_s: float, *, now: float) -> float:
        """Spend a hand-out of ``fanout_s`` CPU seconds at ``now`` (monotonic); the seconds to wait after it.

        The budget grows by the share (:func:`fanout_share`) of the wall time that passes (up to
        :data:`PACE_BURST_S`) and each hand-out spends its CPU time: while it lasts the reader reads again
        at once; once spent, it waits until the budget is back to zero, at most :func:`pace_max_s`:
        ``T x (1 / share - 1)`` after a hand-out of T at a steady high rate.
        """
        share = fanout_share()
        earned = (now - self._paced_at) * share if self._paced_at else PACE_BURST_S
        self._paced_at = now
        self._budget = min(PACE_BURST_S, self._budget + earned) - fanout_s
        if self._budget >= 0:
            return 0.0
        return min(pace_max_s(), -self._budget / share)

    # -- saying so

    async def failed(self, exc: OpsError, *, by: object = None) -> None:
        """Tell the subscribers (once per change of state), then wait before the next attempt.

        ``by`` is the slot reader that failed (None: this loop); the node's state is one for all of them.
        """
        now = time.monotonic()
        self._failing.add(self if by is None else by)
        self._failures += 1
        if self._failing_since is None:
            self._failing_since = now
        if not isinstance(exc, Unreachable) or now - self._failing_since >= STALL_AFTER_S:
            state = "stalled"
        else:
            state = "reconnecting"
        if state != self.state and not (state == "reconnecting" and self.state == "stalled"):
            self.state, self.reason = state, exc.message
            log.warning("tail reader %s %s: %s (%s)", self.owner.conn, self.name, state, exc.message)
            self.owner.broadcast(self.keys, self.status_frame())
        if self.cluster and isinstance(exc, Unreachable) and self._failures > 1 and not self._refreshing:
            self._refreshing = True  # once for the node, not once per slot reader failing with it
            try:
                await self.owner.refresh(self)  # a replica may serve its slots now: they move to its reader
            finally:
                self._refreshing = False
        await asyncio.sleep(min(RETRY_MAX_S, 0.1 * 2 ** min(self._failures, 10)))

    def _recovered(self, *, by: object = None) -> None:
        """A read succeeded: "live" again once no reader of the node is failing (one slot's refusal, an
        ACL's say, keeps the node "stalled" as a refused group of a polled round did)."""
        self._failing.discard(self if by is None else by)
        if self._failing:
            return
        self._failures, self._failing_since = 0, None
        if self.state != "live":
            log.warning("tail reader %s %s: live again", self.owner.conn, self.name)
            self.state, self.reason = "live", None
            self.owner.broadcast(self.keys, self.status_frame())

    def stats(self) -> dict[str, Any]:
        return {"keys": len(self.keys), "state": self.state, "reason": self.reason, "rounds": self.rounds,
                "reading": self.task is not None or bool(self.slots), "slot_readers": len(self.slots),
                "polled_keys": len(self.polled)}
