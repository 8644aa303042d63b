"""Progress streams (the eventbus convention, seed 000) for the console's Server-Sent Events endpoint.

The replay-then-follow logic is eventbus's own (:func:`eventbus.progress.subscribe`): this module
only binds it to a configured connection, translates redis-py's errors into :class:`OpsError` and
drives the blocking generator from async code. Each step (one XRANGE page, or one XREAD BLOCK of
at most :data:`BLOCK_MS`) runs in a small dedicated thread pool, so a follower holds a thread only
while Redis is blocking for it, never the event loop, and a disconnected client costs at most one
more block before its generator is dropped.
"""

from __future__ import annotations

import asyncio
from collections.abc import AsyncIterator
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from functools import cache
from typing import cast

from django.conf import settings

from eventbus.progress import ProgressEvent, parse_entry, subscribe

from .client import get_client
from .errors import NotFound, translated
from .ids import StreamId, parse_id
from .types import Entry, EntryMask

#: Longest single XREAD BLOCK: also how often an idle follower emits a keepalive. It stays well
#: under the connection's socket timeout, or the blocked read would fail as a timeout.
BLOCK_MS = 2_000
#: Followers that may be blocked in Redis at once; more wait their turn (a console, not a CDN).
MAX_FOLLOWERS = 64

_END = object()


@dataclass(frozen=True, slots=True)
class ProgressHead:
    """The newest entry of a progress stream, to decide whether a resuming client needs anything."""

    last_id: str | None
    last_event: str | None

    def finished_by(self, after: StreamId) -> bool:
        """True when the stream ended (done/error) at or before ``after``: nothing will follow."""
        if self.last_id is None or self.last_event not in ("done", "error"):
            return False
        return parse_id(self.last_id) <= after


@cache
def _threads() -> ThreadPoolExecutor:
    return ThreadPoolExecutor(max_workers=MAX_FOLLOWERS, thread_name_prefix="progress-sse")


def _block_ms() -> int:
    return max(100, min(BLOCK_MS, int(settings.BUSCONSOLE_REDIS_TIMEOUT * 1000 / 2)))


def progress_head(conn: str, key: bytes) -> ProgressHead:
    """The newest entry of ``key``; :class:`NotFound` unless ``key`` is a stream."""
    with translated(conn):
        client = get_client(conn)
        pipe = client.pipeline(transaction=False)
        pipe.type(key)
        pipe.xrevrange(key, "+", "-", count=1)
        key_type, newest = pipe.execute(raise_on_error=False)
    if key_type not in (b"stream", "stream"):
        raise NotFound("No such progress stream.", conn=conn)
    if not newest or isinstance(newest, Exception):
        return ProgressHead(last_id=None, last_event=None)
    event = parse_entry(*newest[0])
    return ProgressHead(last_id=event.id, last_event=event.event)


async def progress_follow(
    conn: str, key: bytes, *, after: StreamId, mask: EntryMask | None
) -> AsyncIterator[ProgressEvent | None]:
    """The events of ``key`` after ``after`` (exclusive), then new ones, until a terminal event, each
    as ``mask`` shows it: the event's name and data are masked as the fields ``event`` and ``data`` of
    the entry they came from (what a client receives is exactly what was masked).

    Yields ``None`` after each idle block: the caller's cue to send a keepalive. Raises
    :class:`OpsError` when Redis fails mid-way; the events yielded until then stand.
    """
    with translated(conn):
        client = get_client(conn)
    steps = subscribe(client, key, after=str(after), block_ms=_block_ms(), keepalive=True)
    loop = asyncio.get_running_loop()
    while True:
        with translated(conn):
            item = await loop.run_in_executor(_threads(), next, steps, _END)
        if item is _END:
            return
        event = cast("ProgressEvent | None", item)  # what subscribe yields, once it is not _END
        yield event if event is None or mask is None else _masked_event(event, mask)


def _masked_event(event: ProgressEvent, mask: EntryMask) -> ProgressEvent:
    fields = ((b"event", event.event.encode()), (b"data", event.data.encode()))
    shown = mask(Entry(id=event.id, fields=fields))
    # (the end of the stream is decided on the stored name, before this: a masked name ends it too)
    return parse_entry(event.id, [part for pair in shown.fields for part in pair])
