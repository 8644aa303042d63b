"""The per-process tail hub: one blocking XREAD per monitored server, fanned out to bounded queues.

Why a hub: a tail per websocket would cost one Redis connection and one blocked client per browser
tab. Here every ASGI process (strictly: every event loop) keeps, per monitored connection, ONE task
holding ONE ``XREAD BLOCK ... STREAMS k1 k2 ... id1 id2 ...`` over every stream that any of its
clients tails, on a dedicated connection. Entries are decoded and encoded to their JSON frame once,
then handed to each client's bounded queue. Redis connections and commands do not grow with clients:
a tailed server sees two connections per process (the blocked reader and a control connection for
replays, start positions and interrupts) and one XREAD per batch of new entries. Those connections and
every command on them belong to :class:`streams_app.redis_ops.tail.TailReader`; this module decides only
who receives what. How an entry looks (its JSON) is the screen's: :func:`get_hub` is handed it.

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

Backpressure. A client's queue holds at most ``BUSCONSOLE_TAIL_QUEUE`` entries (500). When an entry
arrives at a full queue the client is behind: the queued entries are dropped (the client skips ahead
to fresh entries) and it is sent ``{"type": "skipped", "count", "resume_after", "last_skipped"}``:
the entries in (resume_after, last_skipped] were not sent, and ``entries?after=resume_after`` or a
reconnect with ``after=resume_after`` fetches them. Encoded frames are shared between clients, and
a slow socket makes its sender wait (the websocket write buffer applies backpressure), so a process's
memory is bounded by clients x queue size x one entry's preview, whatever the stream's rate.

Overload. The cost of a tail is per frame and per byte sent to each client (permessage-deflate
compresses every frame for every client), not per Redis read. A client's sender takes everything
queued (up to ``FRAME_MAX``) into one ``entries`` frame, so a quiet stream's entry goes out at once
and a busy stream's travel in batches, the more so the busier the process (a fixed coalescing delay
was tried: it cost more latency than it saved CPU at the budget's 100 clients x 200 entries/s).
When the whole process cannot keep up, its XREADs come back full: once that has
lasted ``BUSCONSOLE_TAIL_MAX_LAG_MS`` (1 s), the reader jumps to the stream's newest entry and every
client of it gets a ``skipped`` frame (``count`` null: nobody counted the entries jumped over, and
counting would read them). The backlog stays in Redis; the tail stays fresh; memory stays bounded.
"""

from __future__ import annotations

import asyncio
import json
import logging
import time
import weakref
from collections import deque
from collections.abc import Awaitable, Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from django.conf import settings

from streams_app.redis_ops.decoding import display_text
from streams_app.redis_ops.errors import OpsError, Unreachable
from streams_app.redis_ops.ids import id_order, parse_id, reply_id
from streams_app.redis_ops.parsers import parse_entry
from streams_app.redis_ops.tail import RawRead, TailReader
from streams_app.redis_ops.types import Entry

log = logging.getLogger(__name__)

Sid = tuple[int, int]
Send = Callable[[str], Awaitable[None]]
EntryJson = Callable[[str, bytes, Entry], dict[str, Any]]
"""The JSON of one entry, ``{"id", "fields", "decoded"}``, as the page and the API show it: the
screen's business, so the caller of :func:`get_hub` hands it in."""

#: Entries per websocket frame at most (a frame of 200 small entries is ~100 KB).
FRAME_MAX = 200
#: Entries per key per XREAD (at most a client's queue).
READ_COUNT = 500
#: Attempts of CLIENT UNBLOCK while the XREAD it targets is still on its way to the server.
UNBLOCK_ATTEMPTS = 25


def queue_capacity() -> int:
    return int(settings.BUSCONSOLE_TAIL_QUEUE)


def replay_max() -> int:
    return int(settings.BUSCONSOLE_TAIL_REPLAY_MAX)


def block_ms() -> int:
    return int(settings.BUSCONSOLE_TAIL_BLOCK_MS)


def max_lag_s() -> float:
    return int(settings.BUSCONSOLE_TAIL_MAX_LAG_MS) / 1000



def dumps(frame: dict[str, Any]) -> str:
    return json.dumps(frame, ensure_ascii=False, separators=(",", ":"), default=str)


# ------------------------------------------------------------------------------------------ frames


@dataclass(frozen=True, slots=True)
class LiveEntry:
    """One entry as every client receives it: its frame is encoded once and shared."""

    id: str
    sid: Sid
    frame: str  # {"type": "entry", "id", "fields", "decoded"} (SPEC section 4)


def entries_frame(batch: Sequence[LiveEntry]) -> str:
    """One entry as itself, several as ``{"type": "entries", "entries": [...]}`` (pre-encoded JSON)."""
    if len(batch) == 1:
        return batch[0].frame
    return '{"type":"entries","entries":[' + ",".join(e.frame for e in batch) + "]}"


def _chunks(items: Sequence[LiveEntry], size: int) -> Iterable[Sequence[LiveEntry]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


# ------------------------------------------------------------------------------------ subscription


class Subscription:
    """One client's tail of one stream: a bounded queue filled by the reader, drained by :meth:`pump`."""

    def __init__(self, tail: StreamTail, key: bytes, *, start: str, after: str | None, capacity: int) -> None:
        self.tail = tail
        self.key = key
        self.start = start  # P: the reader's cursor for the key when this client registered
        self.after = after
        self.capacity = capacity
        newest = start if after is None or id_order(after) <= id_order(start) else after
        self._newest: Sid = id_order(newest)  # newest ID the client has or will have from its replay
        self._last_taken = newest  # newest ID taken off the queue for sending
        self._pending: deque[LiveEntry] = deque()
        self._control: deque[str] = deque(maxlen=32)  # status and channel-layer events, out of band
        self._skipped = 0
        self._skip_counted = True  # False when a skip includes entries nobody counted (reader lag)
        self._skip_after: str | None = None
        self._last_skipped: str | None = None
        self._wake = asyncio.Event()
        self.close_code: int | None = None
        self.high_water = 0  # the most entries this queue ever held (never above capacity)
        self.skipped_total = 0
        self.active = True

    # -- called by the reader (synchronously, on the event loop)

    def offer(self, batch: Sequence[LiveEntry]) -> None:
        if batch[0].sid > self._newest and len(self._pending) + len(batch) <= self.capacity:
            self._pending.extend(batch)  # the common case, without a Python loop per entry per client
            self._newest = batch[-1].sid
            self.high_water = max(self.high_water, len(self._pending))
            self._wake.set()
            return
        for item in batch:
            if item.sid <= self._newest:
                continue
            self._newest = item.sid
            if len(self._pending) >= self.capacity:
                self._skip_ahead()
            self._pending.append(item)
        self.high_water = max(self.high_water, len(self._pending))
        self._wake.set()

    def _skip_ahead(self) -> None:
        """The client is behind: forget what is queued, count it, and note the gap for the client."""
        if not self._skipped:
            self._skip_after = self._last_taken
        self._skipped += len(self._pending)
        self.skipped_total += len(self._pending)
        self._last_skipped = self._pending[-1].id
        self._pending.clear()

    def jump(self, head: str) -> None:
        """The reader skipped (…, head] of this stream: whatever is queued goes too, uncounted."""
        if id_order(head) <= self._newest:
            return
        if self._pending:
            self._skip_ahead()
        elif not self._skipped:
            self._skip_after = self._last_taken
        self._skipped += 1  # at least one; the true number was not counted
        self._skip_counted = False
        self._last_skipped = head
        self._newest = id_order(head)
        self._wake.set()

    def post(self, frame: dict[str, Any]) -> None:
        """Queue a small control frame (status, operator action, job progress) ahead of entries."""
        self._control.append(dumps(frame))
        self._wake.set()

    def end(self, code: int, frame: dict[str, Any]) -> None:
        """Stop this tail from the server side: send ``frame``, then the consumer closes with ``code``."""
        self.post(frame)
        self.close_code = code

    @property
    def queued(self) -> int:
        return len(self._pending)

    # -- called by the consumer

    async def pump(self, send: Send) -> int | None:
        """Replay what the client missed, then send live entries until the hub ends the tail.

        Returns the close code the hub asked for (the consumer's disconnect cancels it otherwise).
        """
        if self.after is not None and id_order(self.after) < id_order(self.start):
            await self._replay(send)
        await send(dumps({"type": "status", "state": "live", "last_id": self._last_taken}))
        while True:
            await self._wake.wait()
            self._wake.clear()
            while self._control or self._skipped or self._pending:
                if self._control:
                    await send(self._control.popleft())
                elif self._skipped:
                    frame = {"type": "skipped", "count": self._skipped if self._skip_counted else None,
                             "resume_after": self._skip_after, "last_skipped": self._last_skipped}
                    if not self._skip_counted:
                        frame["reason"] = "lagging"
                    self._skipped, self._skip_after, self._last_skipped = 0, None, None
                    self._skip_counted = True
                    await send(dumps(frame))
                else:
                    batch = [self._pending.popleft() for _ in range(min(FRAME_MAX, len(self._pending)))]
                    self._last_taken = batch[-1].id
                    await send(entries_frame(batch))
            if self.close_code is not None:
                return self.close_code

    async def _replay(self, send: Send) -> None:
        assert self.after is not None
        await send(dumps({"type": "status", "state": "replaying", "after": self.after, "until": self.start}))
        entries, overflow = await self.tail.replay(self.key, after=self.after, until=self.start, limit=replay_max())
        if overflow is not None:
            # Older than what is replayed: not counted (that would read the whole range), but bounded.
            await send(dumps({"type": "skipped", "count": None, "resume_after": self.after,
                              "last_skipped": overflow, "reason": "replay_limit"}))
        for chunk in _chunks(entries, FRAME_MAX):
            await send(entries_frame(chunk))


# ------------------------------------------------------------------------------- one server's tail


class StreamTail:
    """Everything tailed on one monitored connection, in one event loop."""

    def __init__(self, source: TailReader, *, entry_json: EntryJson) -> None:
        self.conn = source.conn
        self.source = source
        self.entry_json = entry_json
        self.cursors: dict[bytes, str] = {}
        self._cursor_sids: dict[bytes, Sid] = {}
        self.subscribers: dict[bytes, set[Subscription]] = {}
        self._task: asyncio.Task[None] | None = None
        self._in_flight: frozenset[bytes] | None = None  # keys of the XREAD now blocked, if any
        self._interrupter: asyncio.Task[None] | None = None
        self._lookups: dict[bytes, asyncio.Future[str]] = {}
        self._joining = 0
        self._behind_since: dict[bytes, float] = {}  # keys whose XREADs come back full, since when
        self.xread_calls = 0
        self.jumps = 0
        self.interrupts = 0
        self.entries_read = 0

    def live_entry(self, key: bytes, entry: Entry) -> LiveEntry:
        """An entry decoded like the page and the API do, its frame encoded once for every client."""
        frame = dumps({"type": "entry", **self.entry_json(self.conn, key, entry)})
        return LiveEntry(id=entry.id, sid=id_order(entry.id), frame=frame)

    # -- joining and leaving

    async def subscribe(self, key: bytes, *, after: str | None) -> Subscription:
        after_id = str(parse_id(after, what="after")) if after is not None else None
        self._joining += 1
        try:
            if key not in self.cursors:
                newest = await self._newest_id(key)
                if key not in self.cursors:  # nobody registered it while we waited
                    self._set_cursor(key, newest)
                    self._interrupt_if_needed()
            # From here to the registration there is no await: the reader cannot dispatch in between.
            sub = Subscription(self, key, start=self.cursors[key], after=after_id, capacity=queue_capacity())
            self.subscribers.setdefault(key, set()).add(sub)
        finally:
            self._joining -= 1
            if not self.cursors and not self._joining and self._task is None:
                self.source.close()  # the lookup failed and nothing else is tailed here
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"tail-reader-{self.conn}")
        return sub

    def unsubscribe(self, sub: Subscription) -> None:
        sub.active = False
        subs = self.subscribers.get(sub.key)
        if subs is None or sub not in subs:
            return
        subs.discard(sub)
        if not subs:
            del self.subscribers[sub.key]
            self.cursors.pop(sub.key, None)
            self._cursor_sids.pop(sub.key, None)
            if not self.cursors:
                self._interrupt_if_needed()  # let the reader stop and release its connections now

    async def _newest_id(self, key: bytes) -> str:
        """The newest entry ID of ``key`` (``0-0`` when missing or empty), one lookup per key at a time."""
        future = self._lookups.get(key)
        if future is None:
            future = asyncio.ensure_future(self.source.newest_id(key))
            self._lookups[key] = future
            future.add_done_callback(lambda _f, k=key: self._lookups.pop(k, None))
        return await asyncio.shield(future)

    def _set_cursor(self, key: bytes, entry_id: str) -> None:
        self.cursors[key] = entry_id
        self._cursor_sids[key] = id_order(entry_id)

    async def replay(self, key: bytes, *, after: str, until: str, limit: int) -> tuple[list[LiveEntry], str | None]:
        """The newest ``limit`` entries in (after, until], oldest first, and the newest one left out."""
        raw = await self.source.newest_first(key, after=after, until=until, limit=limit + 1)
        overflow = reply_id(raw[limit]) if len(raw) > limit else None
        return [self.live_entry(key, parse_entry(item)) for item in reversed(raw[:limit])], overflow

    # -- the reader

    def _interrupt_if_needed(self) -> None:
        if self._in_flight is not None and self._interrupter is None:
            self._interrupter = asyncio.get_running_loop().create_task(self._interrupt())

    def _read_is_stale(self) -> bool:
        flight = self._in_flight
        return flight is not None and (not self.cursors or not self.cursors.keys() <= flight)

    async def _interrupt(self) -> None:
        """CLIENT UNBLOCK the reader while its XREAD misses a key (or is no longer wanted at all)."""
        try:
            for attempt in range(UNBLOCK_ATTEMPTS):
                if not self._read_is_stale() or self.source.reader_id is None:
                    return
                if await self.source.unblock_reader():
                    self.interrupts += 1
                    return
                await asyncio.sleep(0.002 * (attempt + 1))  # the XREAD has not reached the server yet
        except Exception as exc:  # noqa: BLE001 - the bounded BLOCK is the backstop
            log.debug("tail %s: CLIENT UNBLOCK failed: %s", self.conn, exc)
        finally:
            self._interrupter = None

    async def _run(self) -> None:
        failures = 0
        try:
            while self.cursors:
                keys = list(self.cursors)
                ids = [self.cursors[k] for k in keys]
                try:
                    await self.source.connect_reader(block_ms=block_ms())
                    self._in_flight = frozenset(keys)
                    try:
                        # No more per key than a client's queue holds: a client that keeps up never skips.
                        count = max(1, min(READ_COUNT, queue_capacity()))
                        reply = await self.source.read(keys, ids, count=count, block_ms=block_ms())
                    finally:
                        self._in_flight = None
                except Unreachable as exc:
                    failures += 1
                    self._reader_failed(exc, failures)
                    await asyncio.sleep(min(5.0, 0.1 * 2**failures))
                    continue
                except OpsError as exc:  # Redis refused the XREAD as a whole
                    await self._evict_non_streams(keys, exc)
                    continue
                except Exception:
                    log.exception("tail reader %s: unexpected error", self.conn)
                    await asyncio.sleep(1.0)
                    continue
                if failures:
                    failures = 0
                    self._broadcast({"type": "status", "state": "live"})
                self.xread_calls += 1
                if reply:
                    lagging = self._dispatch(reply, count)
                    for key in lagging:
                        await self._skip_to_head(key)
        finally:
            # No await between the loop's last check and this: a client joining after it starts a new task.
            self._task = None
            if not self.cursors and not self._joining:
                self.source.close()

    def _dispatch(self, reply: RawRead, count: int) -> list[bytes]:
        """Fan a reply out; return the keys the reader has been behind on for longer than allowed."""
        now = time.monotonic()
        full = {bytes(raw_key) for raw_key, raw_entries in reply if len(raw_entries) >= count}
        for key in list(self._behind_since):
            if key not in full:
                del self._behind_since[key]  # caught up (or no longer tailed)
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
            batch = []
            for raw in raw_entries:
                entry = parse_entry(raw)
                if id_order(entry.id) > cursor:
                    batch.append(self.live_entry(key, entry))
            if not batch:
                continue
            self._set_cursor(key, batch[-1].id)
            self.entries_read += len(batch)
            for sub in subs:
                sub.offer(batch)
        return lagging

    async def _skip_to_head(self, key: bytes) -> None:
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
        for sub in self.subscribers.get(key, ()):
            sub.jump(head)

    def _reader_failed(self, exc: Unreachable, failures: int) -> None:
        """Say so once per outage; the reader starts over on a fresh connection (TailReader.read)."""
        if failures == 1:
            log.warning("tail reader %s: Redis unreachable (%s); retrying", self.conn, exc)
            self._broadcast({"type": "status", "state": "reconnecting",
                             "message": f"Redis server {self.conn!r} is unreachable; retrying."})

    async def _evict_non_streams(self, keys: list[bytes], exc: OpsError) -> None:
        """XREAD failed as a whole (a tailed key now holds another type): end those tails only."""
        try:
            types = await self.source.types(keys)
        except OpsError:
            await asyncio.sleep(1.0)
            return
        evicted = [key for key, kind in zip(keys, types, strict=True) if kind not in ("stream", "none")]
        if not evicted:
            log.error("tail reader %s: XREAD refused: %s", self.conn, exc)
            await asyncio.sleep(1.0)
            return
        for key in evicted:
            for sub in list(self.subscribers.get(key, ())):
                sub.end(4404, {"type": "status", "state": "error",
                               "message": f"{display_text(key)} no longer holds a stream."})
                self.unsubscribe(sub)

    def _broadcast(self, frame: dict[str, Any]) -> None:
        for subs in self.subscribers.values():
            for sub in subs:
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
            "xread_calls": self.xread_calls,
            "interrupts": self.interrupts,
            "jumps": self.jumps,
            "entries_read": self.entries_read,
            "reading": self._task is not None,
        }


# ------------------------------------------------------------------------------------------- hub


class Hub:
    """The tails of one event loop (one ASGI process), one :class:`StreamTail` per connection."""

    def __init__(self, *, entry_json: EntryJson) -> None:
        self.entry_json = entry_json
        self.tails: dict[str, StreamTail] = {}

    def tail(self, conn: str) -> StreamTail:
        """The connection's tail; raises NotFound for a connection that is not configured (any more)."""
        tail = self.tails.get(conn)
        if tail is None or not tail.source.configured():
            tail = self.tails[conn] = StreamTail(TailReader(conn), entry_json=self.entry_json)
        return tail

    async def subscribe(self, conn: str, key: bytes, *, after: str | None = None) -> Subscription:
        """Register a client; raises :class:`OpsError` (unknown connection, bad ``after``, not a stream...)."""
        return await self.tail(conn).subscribe(key, after=after)

    def unsubscribe(self, sub: Subscription) -> None:
        sub.tail.unsubscribe(sub)

    def stats(self) -> dict[str, dict[str, Any]]:
        return {conn: tail.stats() for conn, tail in self.tails.items()}


_hubs: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, Hub] = weakref.WeakKeyDictionary()


def get_hub(*, entry_json: EntryJson) -> Hub:
    """The hub of the running event loop (uvicorn runs one loop per process).

    ``entry_json`` shapes every entry frame of the loop's hub; the first call builds the hub with it,
    so every caller hands in the same function (the screen's one JSON shape of an entry).
    """
    loop = asyncio.get_running_loop()
    hub = _hubs.get(loop)
    if hub is None:
        hub = _hubs[loop] = Hub(entry_json=entry_json)
    return hub


def running_hubs() -> list[tuple[asyncio.AbstractEventLoop, Hub]]:
    """Every live hub of this process with its loop (tests and the benchmark read their stats)."""
    return [(loop, hub) for loop, hub in list(_hubs.items()) if not loop.is_closed()]
