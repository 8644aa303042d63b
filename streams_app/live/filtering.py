"""The live tail's filters: each entry evaluated once per distinct filter, never once per client, in slices.

A client may tail a stream through a filter (search's language: the websocket consumer compiles it and
hands the hub a :class:`TailFilter`, a text and a predicate over the masked entry its frame is built
from). The hub keeps, per stream, one :class:`FilterGroup` per distinct filter text: the reader's
batches go to the group, which evaluates each entry once for all its clients and hands the entries it
kept to them as one :class:`~streams_app.live.frames.Batch`, so clients of one filter share frames as
unfiltered clients do (:mod:`streams_app.live.wire`). Unfiltered clients do not wait for any of it: the
reader hands them each batch before a group looks at it.

Why a task per group and slices. An evaluation runs on the event loop that also serves every other
client and request of the process, and the CEL library holds the GIL while it executes, so a thread
would not help. One evaluation is kept small where the query is compiled (``compile_query`` refuses
expressions over its cost bound); here a group evaluates for at most :data:`SLICE_S` (or one entry,
if that is longer), hands what it kept so far, and then leaves the loop to the rest of the process
for as long as the slice took: evaluating takes at most half the process's time. A bare ``sleep(0)``
was tried first: it gives the loop one turn per slice, and a request needs a few dozen turns (the ASGI
handler, the thread of a sync view, the response), so with a dear filter (milliseconds an entry, allowed)
replaying, ``/healthz`` took about three times as long as with the wait (the test suite's in-process
server, ``tests/security/test_cost_matrix_tail.py``; docs/performance.md#figures-behind-the-design). Batches wait in order; when more than a client's
queue of entries waits for one group (the process cannot evaluate as fast as the stream grows), the
waiting entries are dropped and the group's clients get a ``skipped`` note (``count`` null, reason
``lagging``), as when the reader itself falls behind: memory stays bounded and the tail stays fresh.

Saying how far it read. A filter that keeps nothing sends nothing, so a client would know only the ID
of its last match and a reconnect after it would replay (and perhaps cut at the replay limit) entries
already tested. A group therefore tells its clients where it has read, at most once every
:data:`TELL_S` (``{"type": "tested", "last_id"}``, sent after the client's queued entries).

Saying what it left out. Search's evaluator does not run an expression on an entry whose own data
(a long list a comprehension runs over) would make it too costly: that entry is no match, and counted.
As search's answer says how many, the tail says so, ``{"type": "status", "state": "filter_costly",
"count", "message"}``, after each batch or replay that left some out.
"""

from __future__ import annotations

import asyncio
import logging
import time
from collections import deque
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from eventbus.text import id_order
from streams_app.live.frames import Batch, LiveEntry, Sid
from streams_app.redis_ops.types import Entry

log = logging.getLogger(__name__)

#: Seconds a group (or a replay) evaluates before it lets the event loop run something else.
SLICE_S = 0.002
#: A group tells its clients how far it read at most this often.
TELL_S = 1.0


def _nothing_left_out() -> int:
    return 0


@dataclass(frozen=True, slots=True)
class TailFilter:
    """A client's filter: ``text`` is the query as read (clients with the same text share a group);
    ``matches`` answers for one masked entry and does not raise; ``left_out`` counts the entries it has
    not evaluated so far because their own data made it too costly (search's ``Query.too_costly``)."""

    text: str
    matches: Callable[[Entry], bool]
    left_out: Callable[[], int] = _nothing_left_out


def costly_frame(count: int) -> dict[str, object]:
    """What a client is told when ``count`` entries were left out, as search's answer tells it."""
    return {"type": "status", "state": "filter_costly", "count": count,
            "message": f"{count} {'entry was' if count == 1 else 'entries were'} not evaluated: their own data "
                       "(a long list the filter runs over) made the filter too costly. They are not shown."}


class Counts:
    """A tail's filter figures (the hub's stats): entries evaluated, group by group and replay by replay."""

    __slots__ = ("evaluations",)

    def __init__(self) -> None:
        self.evaluations = 0


class Member(Protocol):
    """What a group needs of a client's subscription (``hub.Subscription``)."""

    def offer(self, batch: Batch) -> None: ...

    def advance(self, entry_id: str) -> None: ...

    def jump(self, head: str) -> None: ...

    def post(self, frame: dict[str, Any]) -> None: ...


def _matches(tail_filter: TailFilter, item: LiveEntry) -> bool:
    try:
        return tail_filter.matches(item.shown) is True
    except Exception:  # the evaluator promises not to raise; if it does, this entry does not match
        log.exception("tail filter %r failed on %s", tail_filter.text, item.id)
        return False


async def select(tail_filter: TailFilter, entries: Sequence[LiveEntry], counts: Counts) -> list[LiveEntry]:
    """The entries ``tail_filter`` keeps, evaluated in slices (a client's replay)."""
    kept: list[LiveEntry] = []
    began = time.perf_counter()
    for item in entries:
        if _matches(tail_filter, item):
            kept.append(item)
        counts.evaluations += 1
        if time.perf_counter() - began >= SLICE_S:
            await _breathe(began)
            began = time.perf_counter()
    return kept


async def _breathe(began: float) -> None:
    """After a slice that began at ``began``: leave the loop to the others as long (module docstring)."""
    await asyncio.sleep(time.perf_counter() - began)


class FilterGroup:
    """The clients of one stream holding one filter, and the entries waiting to be evaluated for them."""

    def __init__(self, tail_filter: TailFilter, *, counts: Counts, capacity: int) -> None:
        self.filter = tail_filter
        self.counts = counts
        self.capacity = capacity
        self.members: set[Member] = set()
        self._waiting: deque[Sequence[LiveEntry]] = deque()
        self._queued = 0
        self._task: asyncio.Task[None] | None = None
        self._timer: asyncio.TimerHandle | None = None
        self._read: str | None = None  # the newest ID evaluated
        self._known: Sid = (0, 0)  # the newest ID the members were handed or told
        self._told_at = 0.0

    def enqueue(self, entries: Sequence[LiveEntry]) -> None:
        """A batch the reader read (called synchronously by the hub's dispatch, in ID order)."""
        if self._waiting and self._queued + len(entries) > self.capacity:
            self.drop_waiting(self._waiting[-1][-1].id)
        self._waiting.append(entries)
        self._queued += len(entries)
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(), name=f"tail-filter {self.filter.text[:40]}")

    def drop_waiting(self, head: str) -> None:
        """Entries up to ``head`` will not be evaluated: the members skip them (uncounted)."""
        self._waiting.clear()
        self._queued = 0
        for member in list(self.members):
            member.jump(head)

    async def _run(self) -> None:
        try:
            while self._waiting:
                entries = self._waiting.popleft()
                self._queued -= len(entries)
                await self._evaluate(entries)
        finally:
            # No await since the loop's last check: a batch enqueued from now on starts a task of its own.
            if self._task is asyncio.current_task():
                self._task = None

    async def _evaluate(self, entries: Sequence[LiveEntry]) -> None:
        kept: list[LiveEntry] = []
        left_out = self.filter.left_out()
        began = time.perf_counter()
        for item in entries:
            if _matches(self.filter, item):
                kept.append(item)
            self.counts.evaluations += 1
            if time.perf_counter() - began >= SLICE_S:
                self._hand(kept, item.id)  # what it kept so far goes out now, not after the whole batch
                kept = []
                await _breathe(began)
                began = time.perf_counter()
        self._hand(kept, entries[-1].id)
        self._tell()
        left_out = self.filter.left_out() - left_out
        if left_out > 0:
            for member in list(self.members):
                member.post(costly_frame(left_out))

    def _hand(self, kept: list[LiveEntry], read: str) -> None:
        self._read = read
        if not kept:
            return
        batch = Batch(kept)
        for member in list(self.members):
            member.offer(batch)
        self._known = max(self._known, kept[-1].sid)

    def _tell(self) -> None:
        """Tell the members how far the filter read, now or once :data:`TELL_S` has passed since last time."""
        if self._read is None or id_order(self._read) <= self._known:
            return
        now = time.monotonic()
        wait = self._told_at + TELL_S - now
        if wait > 0:
            if self._timer is None:
                self._timer = asyncio.get_running_loop().call_later(wait, self._tell_due)
            return
        self._told_at = now
        self._known = id_order(self._read)
        for member in list(self.members):
            member.advance(self._read)

    def _tell_due(self) -> None:
        self._timer = None
        self._tell()

    def close(self) -> None:
        """The last member left."""
        self._waiting.clear()
        self._queued = 0
        if self._task is not None:
            self._task.cancel()
            self._task = None
        if self._timer is not None:
            self._timer.cancel()
            self._timer = None
