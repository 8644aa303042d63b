"""One client's tail of one stream: the bounded queue the hub's reader fills and the pump that drains it.

Split from :mod:`streams_app.live.hub` (which creates, feeds and removes subscriptions, and whose
docstring tells the whole design: hand-over from replay to live, fan-out, backpressure, filters);
this module is what one websocket client holds.
"""

from __future__ import annotations

import asyncio
from collections import deque
from collections.abc import Awaitable, Callable, Sequence
from typing import TYPE_CHECKING, Any, Protocol

from django.conf import settings

from eventbus.text import id_order
from streams_app.live.filtering import Counts, TailFilter, costly_frame, select
from streams_app.live.frames import FRAME_MAX, Batch, LiveEntry, Sid, chunks, dumps, entries_frame
from streams_app.live.wire import DirectSocket

if TYPE_CHECKING:
    from streams_app.live.filtering import FilterGroup

Send = Callable[[str], Awaitable[None]]

#: What :meth:`Subscription.pump` returns when its client asked for another filter (not a close code).
RESTART = -1


def replay_max() -> int:
    return int(settings.BUSCONSOLE_TAIL_REPLAY_MAX)


class Tail(Protocol):
    """What a subscription needs of its connection's tail (``hub.StreamTail``)."""

    counts: Counts

    async def replay(self, key: bytes, *, after: str, until: str, limit: int) -> tuple[list[LiveEntry], str | None]: ...


class Subscription:
    """One client's tail of one stream: a bounded queue filled by the reader, drained by :meth:`pump`.

    With a ``filter``, the client's live entries come from its :class:`~streams_app.live.filtering.FilterGroup`
    (the entries that filter kept, evaluated once for every client holding it) and its replay is
    filtered here; ``tested`` frames tell it how far the filter has read when nothing matched.
    """

    def __init__(self, tail: Tail, key: bytes, *, start: str, after: str | None, capacity: int,
                 filter: TailFilter | None = None) -> None:
        self.tail = tail
        self.key = key
        self.start = start  # P: the reader's cursor for the key when this client registered
        self.after = after
        self.capacity = capacity
        self.filter = filter
        self.group: FilterGroup | None = None
        newest = start if after is None or id_order(after) <= id_order(start) else after
        self._newest: Sid = id_order(newest)  # newest ID the client has or will have from its replay
        self._last_taken = newest  # newest ID taken off the queue for sending
        self._tested: str | None = None  # newest ID its filter read, to tell the client (``tested`` frame)
        self._pending: deque[LiveEntry] = deque()
        self._control: deque[str] = deque(maxlen=32)  # status and channel-layer events, out of band
        self._skipped = 0
        self._skip_counted = True  # False when a skip includes entries nobody counted (reader lag)
        self._skip_after: str | None = None
        self._last_skipped: str | None = None
        self._wake = asyncio.Event()
        # The pump is (or must start) sending: replay, control frames, queued entries. Entries go to the
        # queue behind them meanwhile; only an idle pump lets offers write to the socket directly.
        self._busy = True
        self.socket: DirectSocket | None = None  # set by the pump once the client is live
        self.close_code: int | None = None
        self.high_water = 0  # the most entries this queue ever held (never above capacity)
        self.skipped_total = 0
        self.direct_frames = 0  # shared frames written straight to the socket
        self.active = True
        self.counted = False  # among the live tails of the process's HeapFreezer

    # -- called by the reader (synchronously, on the event loop)

    def offer(self, batch: Batch) -> None:
        entries = batch.entries
        if entries[0].sid > self._newest:
            socket = self.socket
            if socket is not None and not self._busy and socket.ready():
                # The common case: the client is keeping up; it gets the stream's shared frames.
                for frame in batch.wire():
                    socket.write(frame)
                self.direct_frames += 1
                self._newest = entries[-1].sid
                self._last_taken = entries[-1].id
                return
            if len(self._pending) + len(entries) <= self.capacity:
                self._pending.extend(entries)  # no Python loop per entry per client
                self._newest = entries[-1].sid
                self.high_water = max(self.high_water, len(self._pending))
                self._wakeup()
                return
        self._offer_one_by_one(entries)

    def _offer_one_by_one(self, batch: Sequence[LiveEntry]) -> None:
        for item in batch:
            if item.sid <= self._newest:
                continue
            self._newest = item.sid
            if len(self._pending) >= self.capacity:
                self._skip_ahead()
            self._pending.append(item)
        self.high_water = max(self.high_water, len(self._pending))
        self._wakeup()

    def _wakeup(self) -> None:
        self._busy = True
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
        self._wakeup()

    def advance(self, entry_id: str) -> None:
        """Its filter read up to ``entry_id`` and kept nothing more: the client is told, after its queue."""
        if id_order(entry_id) <= self._newest:
            return
        self._newest = id_order(entry_id)
        self._tested = entry_id
        self._wakeup()

    def restart(self) -> None:
        """The client asked for another filter: :meth:`pump` returns :data:`RESTART` once what is queued
        has gone out, and the consumer subscribes again from :attr:`position`."""
        self.close_code = RESTART
        self._wakeup()

    @property
    def position(self) -> str:
        """The newest ID this client has been sent or told it was read: a new tail goes on after it."""
        return self._last_taken

    def post(self, frame: dict[str, Any]) -> None:
        """Queue a small control frame (status, operator action, job progress) ahead of entries."""
        self._control.append(dumps(frame))
        self._wakeup()

    def end(self, code: int, frame: dict[str, Any]) -> None:
        """Stop this tail from the server side: send ``frame``, then the consumer closes with ``code``."""
        self.post(frame)
        self.close_code = code

    @property
    def queued(self) -> int:
        return len(self._pending)

    # -- called by the consumer

    async def pump(self, send: Send, *, socket: Callable[[], DirectSocket | None] | None = None) -> int | None:
        """Replay what the client missed, then send live entries until the hub ends the tail.

        ``send`` is the ASGI path, used for what only this client receives (replay, control frames,
        its queue once it fell behind); ``socket``, called once the client is live, gives the socket
        the stream's shared frames are written to while the client keeps up (None: ``send`` for all).
        Returns the close code the hub asked for, or :data:`RESTART` (the consumer's disconnect cancels
        it otherwise).
        """
        if self.after is not None and id_order(self.after) < id_order(self.start):
            await self._replay(send)
        await send(dumps({"type": "status", "state": "live", "last_id": self._last_taken}))
        if socket is not None:
            self.socket = socket()
        while True:
            while self._control or self._skipped or self._pending or self._tested:
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
                elif self._pending:
                    batch = [self._pending.popleft() for _ in range(min(FRAME_MAX, len(self._pending)))]
                    self._last_taken = batch[-1].id
                    await send(entries_frame(batch))
                else:  # after the queue: every entry up to it has gone out
                    tested, self._tested = self._tested, None
                    if tested is not None and id_order(tested) > id_order(self._last_taken):
                        self._last_taken = tested
                        await send(dumps({"type": "tested", "last_id": tested}))
            if self.close_code is not None:
                return self.close_code
            # Drained, with no await since the loop's last check: offers may write directly again.
            self._busy = False
            await self._wake.wait()
            self._wake.clear()

    async def _replay(self, send: Send) -> None:
        assert self.after is not None
        await send(dumps({"type": "status", "state": "replaying", "after": self.after, "until": self.start}))
        entries, overflow = await self.tail.replay(self.key, after=self.after, until=self.start, limit=replay_max())
        if overflow is not None:
            # Older than what is replayed: not counted (that would read the whole range), but bounded.
            await send(dumps({"type": "skipped", "count": None, "resume_after": self.after,
                              "last_skipped": overflow, "reason": "replay_limit"}))
        if self.filter is not None:
            left_out = self.filter.left_out()
            entries = await select(self.filter, entries, self.tail.counts)
            left_out = self.filter.left_out() - left_out
            if left_out > 0:
                await send(dumps(costly_frame(left_out)))
        for chunk in chunks(entries, FRAME_MAX):
            await send(entries_frame(chunk))
