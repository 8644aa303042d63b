"""The console's channel layer: channels-redis's, with a read that outlives the socket that started it.

channels-redis gives every process ONE channel in Redis for all its consumers: whichever consumer's
``receive()`` holds the process's receive lock runs the ``BZPOPMIN`` (``_brpop_with_clean``) and hands
each message to the consumer it names. When that consumer goes away (a websocket closes) its receive is
cancelled, and the read it was running with it: a message the server had already popped for another
consumer, between the ``BZPOPMIN`` reply and the ``ZADD`` to the backup queue that should keep it, is
lost. One tab closing could so swallow the event meant for the user's other tab (an operator action, a
revocation).

Here the read runs in a task of its own, shielded from its caller's cancellation, and a read whose
caller was cancelled is handed to the next caller on that channel instead of starting a second
``BZPOPMIN`` beside it. Every message the read pops reaches a consumer, one read at a time, as before.

Each round of that ``BZPOPMIN`` blocks for ``brpop_timeout`` (5 s) when nothing comes. redis-py 8
reads with a 5 s timeout unless told otherwise (redis-py 5: none), so an idle round could end in
``redis.TimeoutError`` and crash the websocket consumer waiting on it: the pools here read for a round
plus :data:`READ_MARGIN_S` (a ``socket_timeout`` in the host's URL or options wins).

A host given by address gets a pool that waits for a free connection (redis-py's
``BlockingConnectionPool``) instead of channels-redis's, which fails a command outright once its
:data:`POOL_MAX` connections are busy: a thousand websockets opening at once each ``group_add`` their
groups, and past the hundredth the stock pool raised "Too many connections", so those sockets went
without live revocation. A command now waits up to :data:`POOL_WAIT_S` for a connection. (A Sentinel
host keeps channels-redis's Sentinel pool.)
"""

from __future__ import annotations

import asyncio
from typing import Any

from channels_redis.core import RedisChannelLayer as _RedisChannelLayer
from channels_redis.utils import create_pool

from streams_app.redis_ops.client import async_waiting_pool

#: How long past a ``BZPOPMIN`` round a read may wait for Redis's answer before it is a timeout.
READ_MARGIN_S = 5.0
#: Connections a process's pool opens to one host (redis-py's own default), and how long a command
#: waits for one of them to come free before it fails; ``max_connections`` / ``timeout`` in the host's
#: options win.
POOL_MAX = 100
POOL_WAIT_S = 20.0


def _retrieve(read: asyncio.Future[Any]) -> None:
    """Mark a read's error as seen: it reaches whichever caller takes the read over, if any does."""
    if not read.cancelled():
        read.exception()


class RedisChannelLayer(_RedisChannelLayer):
    """``channels_redis.core.RedisChannelLayer`` whose read of a channel survives its caller's cancellation."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        # reads whose caller was cancelled, by channel key: the next caller takes them over
        self._orphaned_reads: dict[str, asyncio.Future[Any]] = {}

    def create_pool(self, index: int) -> Any:
        """channels-redis's pool for host ``index``, reading long enough for a whole ``BZPOPMIN`` round."""
        host = self.hosts[index]
        if "socket_timeout" not in host:
            host = {**host, "socket_timeout": self.brpop_timeout + READ_MARGIN_S}
        if "address" not in host:
            return create_pool(host)
        options = {"max_connections": POOL_MAX, "wait_s": host.get("timeout", POOL_WAIT_S), **host}
        options.pop("timeout", None)
        return async_waiting_pool(options.pop("address"), **options)

    async def _brpop_with_clean(self, index: int, channel: str, timeout: float) -> Any:
        """One ``BZPOPMIN`` (and the backup of what it popped), carried on past a cancelled caller.

        A read orphaned on another event loop (a server restarted in the same process) is dropped: its
        message, if any, sits in the backup queue, which the fresh read puts back first.
        """
        read = self._orphaned_reads.pop(channel, None)
        if read is None or read.get_loop() is not asyncio.get_running_loop():
            read = asyncio.ensure_future(super()._brpop_with_clean(index, channel, timeout))
            read.add_done_callback(_retrieve)
        try:
            return await asyncio.shield(read)
        except asyncio.CancelledError:
            # Finished or not, what it pops is this channel's: a finished read's message is in the
            # backup queue too, but handing the read over delivers it without waiting for a re-read.
            # A failed read is not handed over: its error was this caller's, and the next one retries.
            if not read.done() or (not read.cancelled() and read.exception() is None):
                self._orphaned_reads[channel] = read
            raise
