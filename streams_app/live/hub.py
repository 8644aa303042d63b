"""The per-process tail hub: one blocking XREAD per monitored server (per node on a cluster), fanned out
to bounded queues.

Why a hub: a tail per websocket would cost one Redis connection and one blocked client per browser
tab. Here every ASGI process (strictly: every event loop) keeps, per monitored connection and node,
ONE task holding ONE ``XREAD BLOCK ... STREAMS k1 k2 ... id1 id2 ...`` over every stream of that node
that any of its clients tails, on a dedicated connection. Entries are decoded and encoded to their
JSON frame once, then handed to every client (see "Fan-out"). Redis connections and commands do not
grow with clients: a tailed server sees two connections per process (the blocked reader and a control
connection for replays, start positions and interrupts) and one XREAD per batch of new entries. Each
primary of a cluster sees its control connection and one blocked reader per tailed slot, up to a bound
per node, the slots beyond it polled on one more (:mod:`streams_app.live.slot_reader`,
:mod:`streams_app.live.node_reader`, which also says how a tail that is not receiving says so).
Those connections and every command on them belong to :mod:`streams_app.redis_ops.tail`; this module
decides only who receives what. How an entry looks (its JSON) is the screen's: :func:`get_hub` is
handed it.

Interrupting the blocked read. When a client starts tailing a stream the reader does not yet read,
the XREAD in flight must be restarted with the new key. We use ``CLIENT UNBLOCK <reader id>`` from
the control connection (which exists anyway, for replays), so a new tail goes live at once instead of
after a timeout. ``CLIENT UNBLOCK`` can race the XREAD on its way to the server (it answers 0 when
the reader is not blocked yet): the interrupter retries a bounded number of times while the same
XREAD is still in flight, and ``BLOCK`` stays bounded (``BUSCONSOLE_TAIL_BLOCK_MS``, 2 s) as the
backstop. A short BLOCK plus an asyncio.Event would have cost one XREAD per interval per process
forever and up to one interval of latency for every new tail.

Hand-over from replay to live (no gap, no duplicate). The reader keeps a cursor per key: every entry
up to the cursor has been dispatched; every later entry will be, in ID order, to the subscribers
registered at dispatch time (dispatch and cursor update happen together, without an ``await``). A
client is registered at the key's cursor P in one synchronous step (for a key new to the reader, P is
the stream's newest ID read first; ``0-0`` for a missing stream) and from then on receives exactly
the entries > P; its replay reads (after, P] with exclusive-start ranges. The two ranges are disjoint
and their union is every entry after ``after``. Two guards keep it so at the edges: dispatch drops
entries at or below the key's current cursor (an XREAD in flight may predate a cursor reset), and
each subscription drops entries at or below the newest ID it has (``after`` may be ahead of P).

Fan-out. The cost of a tail is per client and frame, not per Redis read: each reply is decoded,
masked and encoded once per entry, and each batch of one stream becomes one websocket frame
(:class:`Batch`), the same ``bytes`` for every client. A client that keeps up (its pump idle, its
socket's write buffer small) gets that frame written straight to its socket by the reader, with no
task switch and no per-client encoding (:mod:`streams_app.live.wire`); the channel layer carries
operator events once per stream and process (:mod:`streams_app.live.relay`), never entries.

Filters. A client may hold a filter (search's language, compiled by the websocket consumer and handed
in as a :class:`~streams_app.live.filtering.TailFilter`). The reader hands each batch to the unfiltered
clients first, as above, then to one :class:`~streams_app.live.filtering.FilterGroup` per distinct
filter text of the stream, which evaluates every entry once for all its clients, on the masked entry
the frame was built from, in slices that yield to the event loop, and hands what it kept to them as
one shared batch. A filtered client's replay is filtered by its own pump the same way.

Backpressure. A client that does not keep up (or negotiated permessage-deflate, which compresses per
client) gets entries through its own bounded queue and pump instead, over the ASGI ``send``, which
waits while its socket is full. The queue holds at most ``BUSCONSOLE_TAIL_QUEUE`` entries (500). When
an entry arrives at a full queue the client is behind: the queued entries are dropped (the client skips
ahead to fresh entries) and it is sent ``{"type": "skipped", "count", "resume_after", "last_skipped"}``:
the entries in (resume_after, last_skipped] were not sent, and ``entries?after=resume_after`` or a
reconnect with ``after=resume_after`` fetches them. Once its pump has emptied the queue, the client is
back on shared frames. A process's memory is so bounded by clients x (queue size x one entry's preview
+ ``wire.BUFFER_MAX``), whatever the stream's rate.

Overload. The reader paces itself (:mod:`streams_app.live.node_reader`, "Pacing"): after a hand-out
that took T of CPU it lets entries gather for about 2T (at most 12 ms), so a quiet stream's entry goes
out at once and a busy stream's travel in batches, the bigger the busier the process, with hand-outs
held to a share of its time. A pump takes everything queued (up to ``FRAME_MAX``) into one ``entries``
frame. When the whole process cannot keep up, its XREADs come back full: once that has
lasted ``BUSCONSOLE_TAIL_MAX_LAG_MS`` (1 s), the reader jumps to the stream's newest entry and every
client of it gets a ``skipped`` frame (``count`` null: nobody counted the entries jumped over, and
counting would read them). The backlog stays in Redis; the tail stays fresh; memory stays bounded.

Pauses. A frame that is late because the event loop stood still is late for every client at once. The
longest stills were CPython's full garbage collections: each walks every object the collector tracks
(the loaded Django project, and a few hundred objects per open websocket), every few seconds at high
rates, and a tail's p99 was the length of one of them (docs/performance.md#figures-behind-the-design). So the live tails of a process freeze the heap (``gc.freeze``: what is alive moves out
of the collector's sight, and is still freed by reference counting) each time their number grows to
:data:`FREEZE_GROWTH` times what it was at the last freeze, after one collection so that no garbage is
frozen; a full collection then walks only what is newer. Freezes happen only at new highs (28 up to 500
tails), so what they hold is bounded by the busiest moment; when the process's last tail closes, the
heap is unfrozen and the collector sees everything again (reference cycles among frozen objects that
died meanwhile are collected then). See :class:`HeapFreezer`.
"""

from __future__ import annotations

import asyncio
import gc
import logging
import time
import weakref
from collections.abc import Callable, Iterable, Sequence
from typing import Any, cast

from django.conf import settings

from eventbus.text import display_text, id_order
from streams_app.live.filtering import Counts, FilterGroup, TailFilter
from streams_app.live.frames import FRAME_MAX, Batch, LiveEntry, Sid, dumps
from streams_app.live.node_reader import NodeReader, queue_capacity
from streams_app.live.relay import EventRelay
from streams_app.live.subscription import RESTART, Subscription
from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.ids import parse_id, reply_id
from streams_app.redis_ops.parsers import parse_entry
from streams_app.redis_ops.tail import Layout, Moved, RawRead, TailSource
from streams_app.redis_ops.types import Entry

log = logging.getLogger(__name__)

__all__ = ["FRAME_MAX", "RESTART", "Batch", "Hub", "LiveEntry", "StreamTail", "Subscription", "TailFilter", "get_hub"]

EntryJson = Callable[[str, bytes, Entry], dict[str, Any]]
"""The JSON of one entry, ``{"id", "fields", "decoded"}``, as the page and the API show it: the
screen's business, so the caller of :func:`get_hub` hands it in."""
Shown = Callable[[str, bytes, Entry], Entry]
"""What every client may see of an entry (masked): the frame is built from it and filters read it."""

#: The live tails of a process freeze the heap again once they are this many times what they were at the
#: last freeze (see "Pauses" in the module docstring).
FREEZE_GROWTH = 1.2


def max_lag_s() -> float:
    return int(settings.BUSCONSOLE_TAIL_MAX_LAG_MS) / 1000



# ------------------------------------------------------------------------- one connection's tail


class StreamTail:
    """Everything tailed on one monitored connection, in one event loop: cursors, subscribers, readers.

    One :class:`~streams_app.live.node_reader.NodeReader` per node serving a tailed key does the
    reading (one on standalone); this class owns what they share: the cursor of every key, its
    subscribers, and the routing of keys to nodes (``node_of``), which a MOVED reply changes.
    """

    def __init__(self, source: TailSource, *, entry_json: EntryJson, shown: Shown) -> None:
        self.conn = source.conn
        self.source = source
        self.entry_json = entry_json
        self.shown = shown
        self.cursors: dict[bytes, str] = {}
        self._cursor_sids: dict[bytes, Sid] = {}
        self.subscribers: dict[bytes, set[Subscription]] = {}  # every client of a key
        self.plain: dict[bytes, set[Subscription]] = {}  # those without a filter: handed every batch
        self.groups: dict[bytes, dict[str, FilterGroup]] = {}  # the others, by filter text
        self.counts = Counts()
        self.nodes: dict[str, NodeReader] = {}
        self.node_of: dict[bytes, NodeReader] = {}
        self._lookups: dict[bytes, asyncio.Future[str]] = {}
        self._joining = 0
        self._behind_since: dict[bytes, float] = {}  # keys whose XREADs come back full, since when
        self.xread_calls = 0
        self.jumps = 0
        self.interrupts = 0
        self.entries_read = 0
        self.moves = 0

    def live_entry(self, key: bytes, entry: Entry) -> LiveEntry:
        """An entry decoded like the page and the API do, its frame encoded once for every client."""
        shown = self.shown(self.conn, key, entry)
        frame = dumps({"type": "entry", **self.entry_json(self.conn, key, shown)})
        return LiveEntry(id=entry.id, sid=id_order(entry.id), frame=frame, shown=shown)

    # -- joining and leaving

    async def subscribe(self, key: bytes, *, after: str | None, filter: TailFilter | None = None) -> Subscription:
        after_id = str(parse_id(after, what="after")) if after is not None else None
        self._joining += 1
        try:
            if key not in self.cursors:
                await self.source.node_of(key)  # the layout, read once while anything is tailed
                newest = await self._newest_id(key)
                node = await self.source.node_of(key)  # now: a MOVED seen meanwhile counts
                if key not in self.cursors:  # nobody registered it while we waited
                    self._set_cursor(key, newest)
                    self._assign(key, node)
            # From here to the registration there is no await: the reader cannot dispatch in between.
            sub = Subscription(self, key, start=self.cursors[key], after=after_id, capacity=queue_capacity(),
                               filter=filter)
            self.subscribers.setdefault(key, set()).add(sub)
            if filter is None:
                self.plain.setdefault(key, set()).add(sub)
            else:
                groups = self.groups.setdefault(key, {})
                group = groups.get(filter.text)
                if group is None:
                    group = groups[filter.text] = FilterGroup(filter, counts=self.counts, capacity=queue_capacity())
                group.members.add(sub)
                sub.group = group
        finally:
            self._joining -= 1
            self._release_idle()  # a lookup failed: its node's connections go unless something reads there
        reader = self.node_of[key]
        if reader.state != "live":  # the page says "live" only while entries can come
            sub.post(reader.status_frame())
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        sub.active = False
        subs = self.subscribers.get(sub.key)
        if subs is None or sub not in subs:
            return
        subs.discard(sub)
        self._leave_group(sub)
        if not subs:
            del self.subscribers[sub.key]
            self.cursors.pop(sub.key, None)
            self._cursor_sids.pop(sub.key, None)
            reader = self.node_of.pop(sub.key, None)
            if reader is not None:
                reader.discard(sub.key)

    def _leave_group(self, sub: Subscription) -> None:
        plain = self.plain.get(sub.key)
        if plain is not None:
            plain.discard(sub)
            if not plain:
                del self.plain[sub.key]
        group, sub.group = sub.group, None
        if group is None:
            return
        group.members.discard(sub)
        if not group.members:
            group.close()
            groups = self.groups[sub.key]
            del groups[group.filter.text]
            if not groups:
                del self.groups[sub.key]

    def _assign(self, key: bytes, node: str) -> NodeReader:
        """Read ``key`` (its cursor set) on ``node``'s reader, started if it was not reading."""
        reader = self.nodes.get(node)
        if reader is None:
            layout = self.source.current
            reader = self.nodes[node] = NodeReader(self, node, cluster=layout is not None and layout.cluster)
        self.node_of[key] = reader
        reader.add(key)
        return reader

    def moved(self, node: NodeReader, exc: Moved) -> None:
        """A node answered MOVED: its keys of that slot go to the reader of the node that serves it now.

        The cursors stay: the new reader reads on from where the old one stopped, and dispatch drops
        anything at or below a cursor, so a key read by both for a moment is not delivered twice.
        """
        self._reroute(self.source.moved(exc), node)

    async def refresh(self, node: NodeReader) -> None:
        """A cluster node keeps failing: read the slot map again, in case a replica took over its slots.

        A failed primary answers no MOVED; only the cluster's present view tells where its keys went.
        """
        try:
            layout = await self.source.refresh()
        except OpsError as exc:
            log.debug("tail %s: slot map not refreshed: %s", self.conn, exc)
            return
        self._reroute(layout, node)

    def _reroute(self, layout: Layout, node: NodeReader) -> None:
        for key in [k for k in node.keys if layout.node_of(k) not in ("", node.name)]:
            node.discard(key)
            target = self._assign(key, layout.node_of(key))
            self.moves += 1
            if target.state != node.state:
                self.broadcast([key], target.status_frame())

    def node_idle(self, node: NodeReader) -> None:
        """A node's loop ended (it reads nothing now): let its connections go if nothing is joining."""
        self._release_idle()

    def _release_idle(self) -> None:
        if self._joining:
            return
        for name, reader in list(self.nodes.items()):
            if reader.idle:
                del self.nodes[name]
        for name in list(self.source.readers):
            if name not in self.nodes:
                self.source.release(name)
        if not self.cursors and not self.nodes:
            self.source.close()  # the next tail reads the topology anew

    async def _newest_id(self, key: bytes) -> str:
        """The newest entry ID of ``key`` (``0-0`` when missing or empty), one lookup per key at a time."""
        future = self._lookups.get(key)
        if future is None:
            future = asyncio.ensure_future(self.source.newest_id(key))
            self._lookups[key] = future

            def forget(_done: asyncio.Future[str], k: bytes = key) -> None:
                self._lookups.pop(k, None)

            future.add_done_callback(forget)
        return await asyncio.shield(future)

    def _set_cursor(self, key: bytes, entry_id: str) -> None:
        self.cursors[key] = entry_id
        self._cursor_sids[key] = id_order(entry_id)

    async def replay(self, key: bytes, *, after: str, until: str, limit: int) -> tuple[list[LiveEntry], str | None]:
        """The newest ``limit`` entries in (after, until], oldest first, and the newest one left out."""
        raw = await self.source.newest_first(key, after=after, until=until, limit=limit + 1)
        overflow = reply_id(raw[limit]) if len(raw) > limit else None
        return [self.live_entry(key, parse_entry(item)) for item in reversed(raw[:limit])], overflow

    # -- what the readers read

    def dispatch(self, reply: RawRead, count: int, *, read: Iterable[bytes]) -> list[bytes]:
        """Fan a reply out; return the keys the reader has been behind on for longer than allowed.

        ``read`` is every key the reply answers for: those of them that came back short are caught up.
        """
        now = time.monotonic()
        full = {bytes(raw_key) for raw_key, raw_entries in reply if len(raw_entries) >= count}
        for key in read:
            if key not in full:
                self._behind_since.pop(key, None)  # caught up (or no longer tailed)
        lagging = []
        for key in full:
            since = self._behind_since.setdefault(key, now)
            if now - since > max_lag_s():
                lagging.append(key)
        for raw_key, raw_entries in reply:
            key = bytes(raw_key)
            subs, cursor = self.subscribers.get(key), self._cursor_sids.get(key)
            if not subs or cursor is None:
                continue
            fresh = []
            for raw in raw_entries:
                entry = parse_entry(raw)
                if id_order(entry.id) > cursor:
                    fresh.append(self.live_entry(key, entry))
            if not fresh:
                continue
            self._set_cursor(key, fresh[-1].id)
            self.entries_read += len(fresh)
            plain = self.plain.get(key)
            if plain:
                batch = Batch(fresh)
                for sub in plain:
                    sub.offer(batch)
            groups = self.groups.get(key)
            if groups:  # evaluated by each filter's task, after the unfiltered clients have their frames
                for group in groups.values():
                    group.enqueue(fresh)
        return lagging

    async def skip_to_head(self, key: bytes) -> None:
        """Behind for too long (the process cannot keep up): jump to the newest entry, and say so.

        Without this, an overloaded process would show ever older entries while Redis holds the
        backlog; a tail is worth more fresh with a visible gap than complete and minutes late.
        """
        try:
            head = await self.source.newest_id(key)  # 0-0 when the stream went: never past a cursor
        except OpsError:
            return
        cursor = self._cursor_sids.get(key)
        if cursor is None or id_order(head) <= cursor:
            return
        log.warning("tail %s: reader behind on %s for over %.1f s: skipping to %s",
                    self.conn, display_text(key), max_lag_s(), head)
        self._set_cursor(key, head)
        self._behind_since.pop(key, None)
        self.jumps += 1
        for group in self.groups.get(key, {}).values():
            group.drop_waiting(head)
        for sub in self.subscribers.get(key, ()):
            sub.jump(head)

    async def evict_non_streams(self, keys: Sequence[bytes], exc: OpsError) -> bool:
        """An XREAD failed as a whole: end the tails of the keys that now hold another type, if any.

        False when none does (the refusal was about something else: the reader reports it).
        """
        try:
            types = await self.source.types(keys)
        except OpsError:
            return False
        evicted = [key for key, kind in zip(keys, types, strict=True) if kind not in ("stream", "none")]
        for key in evicted:
            for sub in list(self.subscribers.get(key, ())):
                sub.end(4404, {"type": "status", "state": "error",
                               "message": f"{display_text(key)} no longer holds a stream."})
                self.unsubscribe(sub)
        if not evicted:
            log.error("tail reader %s: XREAD refused: %s", self.conn, exc)
        return bool(evicted)

    def broadcast(self, keys: Iterable[bytes], frame: dict[str, Any]) -> None:
        """A control frame to every subscriber of ``keys``."""
        for key in list(keys):
            for sub in self.subscribers.get(key, ()):
                sub.post(frame)

    def stats(self) -> dict[str, Any]:
        subs = [s for group in self.subscribers.values() for s in group]
        return {
            "keys": len(self.cursors),
            "subscribers": len(subs),
            "queued": sum(s.queued for s in subs),
            "max_queued": max((s.high_water for s in subs), default=0),
            "capacity": queue_capacity(),
            "skipped": sum(s.skipped_total for s in subs),
            "direct_frames": sum(s.direct_frames for s in subs),
            "filters": sum(len(groups) for groups in self.groups.values()),
            "filter_evaluations": self.counts.evaluations,
            "xread_calls": self.xread_calls,
            "interrupts": self.interrupts,
            "jumps": self.jumps,
            "moves": self.moves,
            "entries_read": self.entries_read,
            "reading": any(node.task is not None for node in self.nodes.values()),
            "nodes": {name: node.stats() for name, node in self.nodes.items()},
        }


# ------------------------------------------------------------------------------------------ heap


class HeapFreezer:
    """Keeps the objects of a process's live tails out of CPython's full collections (see "Pauses").

    One per process (the collector is): it counts the tails of every hub. ``gc.freeze`` is the
    standard library's own tool for long-lived objects; a threshold tuned with ``gc.set_threshold``
    would make full collections rarer, not shorter.
    """

    def __init__(self) -> None:
        self.live = 0
        self.frozen_at = 0  # live tails at the last freeze; 0: nothing frozen by us
        self.freezes = 0

    def opened(self) -> None:
        self.live += 1
        if self.live > self.frozen_at and self.live >= self.frozen_at * FREEZE_GROWTH:
            gc.collect()  # garbage frozen now would be kept until the unfreeze: collect it first
            gc.freeze()
            self.frozen_at = self.live
            self.freezes += 1

    def closed(self) -> None:
        self.live -= 1
        if self.live == 0 and self.frozen_at:
            gc.unfreeze()
            self.frozen_at = 0


heap = HeapFreezer()


# ------------------------------------------------------------------------------------------- hub


class Hub:
    """The tails of one event loop (one ASGI process), one :class:`StreamTail` per connection."""

    def __init__(self, *, entry_json: EntryJson, shown: Shown) -> None:
        self.entry_json = entry_json
        self.shown = shown
        self.tails: dict[str, StreamTail] = {}
        self.relay = EventRelay(self._deliver)

    def tail(self, conn: str) -> StreamTail:
        """The connection's tail; raises NotFound for a connection that is not configured (any more)."""
        tail = self.tails.get(conn)
        if tail is None or not tail.source.configured():
            tail = self.tails[conn] = StreamTail(TailSource(conn), entry_json=self.entry_json, shown=self.shown)
        return tail

    async def subscribe(self, conn: str, key: bytes, *, after: str | None = None,
                        filter: TailFilter | None = None) -> Subscription:
        """Register a client; raises :class:`OpsError` (unknown connection, bad ``after``, not a stream...).

        Returns once the process hears the stream's operator events too (before the client is "live").
        Registered first, joined second: a last client leaving meanwhile cannot take the membership away.
        """
        sub = await self.tail(conn).subscribe(key, after=after, filter=filter)
        await self.relay.join(conn, key)
        sub.counted = True
        heap.opened()
        if sub.key not in cast(StreamTail, sub.tail).subscribers:  # it left while the join was under way
            self.relay.leave(conn, key)
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        tail = cast(StreamTail, sub.tail)  # the hub's subscriptions are on its own tails
        tail.unsubscribe(sub)
        if sub.counted:
            sub.counted = False
            heap.closed()
        if sub.key not in tail.subscribers:
            self.relay.leave(tail.conn, sub.key)

    def _deliver(self, conn: str, key: bytes, frame: dict[str, Any]) -> None:
        tail = self.tails.get(conn)
        if tail is not None:
            tail.broadcast([key], frame)

    def stats(self) -> dict[str, dict[str, Any]]:
        return {conn: {**tail.stats(), "events": self.relay.events} for conn, tail in self.tails.items()}


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()


def get_hub(*, entry_json: EntryJson, shown: Shown) -> Hub:
    """The hub of the running event loop (uvicorn runs one loop per process).

    ``entry_json`` shapes every entry frame of the loop's hub from what ``shown`` lets every client see of
    the entry (masked; filters read the same); the first call builds the hub with them, so every caller
    hands in the same functions (the screen's one JSON shape of an entry, the one masking).
    """
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None:
        hub = _hubs[loop] = Hub(entry_json=entry_json, shown=shown)
    return hub


def running_hubs() -> list[tuple[asyncio.AbstractEventLoop, Hub]]:
    """Every live hub of this process with its loop (tests and the benchmark read their stats)."""
    return [(loop, hub) for loop, hub in list(_hubs.items()) if not loop.is_closed()]
