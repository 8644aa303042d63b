"""The live tail's reads of one monitored connection, from asyncio (the tail hub's side of the door).

The hub (:mod:`streams_app.live.hub`) decides which client gets which entry; this module is how the
entries are read. Per connection and event loop it keeps two connections:

* the **reader**, which spends its life blocked in ``XREAD BLOCK ... STREAMS k1 k2 ... id1 id2 ...``
  over every tailed key, and therefore can do nothing else;
* the **control** connection, for everything else: newest IDs, replay ranges, TYPE checks, and
  ``CLIENT UNBLOCK`` of the reader when its XREAD must restart with another set of keys (that is why
  it is a second connection: the reader's is busy blocking).

Replies stay as Redis sends them (``[id, [name, value, ...]]``, bytes): the hub decodes each entry
once for all its clients. Every failure is an :class:`~streams_app.redis_ops.errors.OpsError`, as on
the sync side; an unreachable server is :class:`~streams_app.redis_ops.errors.Unreachable`.
"""

from __future__ import annotations

import asyncio
import contextlib
from collections.abc import Coroutine, Iterator, Sequence
from typing import Any

import redis.asyncio as aioredis
from django.conf import settings

from .client import async_client, connection_url
from .errors import Unreachable, translated
from .ids import reply_id
from .types import RawEntry

RawRead = Sequence[tuple[bytes, Sequence[RawEntry]]]
"""An XREAD reply: ``[[key, [entry, ...]], ...]``, only the keys that have new entries."""

#: Entries per XREVRANGE page of :meth:`TailReader.newest_first`.
RANGE_PAGE = 500


def _text(value: bytes | str) -> str:
    return value.decode() if isinstance(value, bytes) else value


class TailReader:
    """The reader and control connections of one monitored connection, built on first use.

    Raises :class:`~streams_app.redis_ops.errors.NotFound` at once when ``conn`` is not configured.
    Not thread-safe: one instance belongs to one event loop.
    """

    def __init__(self, conn: str) -> None:
        self.conn = conn
        self._url = connection_url(conn)
        self._reader: aioredis.Redis | None = None
        self._control: aioredis.Redis | None = None
        self._reader_id: int | None = None

    def configured(self) -> bool:
        """Whether the settings still point ``conn`` where this reader reads (tests change them)."""
        return settings.BUS_REDIS_URLS.get(self.conn) == self._url

    @property
    def reader_id(self) -> int | None:
        """The reader connection's ``CLIENT ID`` once it is connected, else None."""
        return self._reader_id

    # -- the reader connection

    async def connect_reader(self, *, block_ms: int) -> None:
        """Open the reader connection and learn its ``CLIENT ID`` (for :meth:`unblock_reader`).

        Its read timeout is ``block_ms`` past the usual one: the reader is silent for a whole BLOCK.
        """
        if self._reader is not None and self._reader_id is not None:
            return
        with self._reader_failures():
            if self._reader is None:
                self._reader = async_client(self._url, client_name="busconsole-tail-reader", wait_s=block_ms / 1000)
            self._reader_id = int(await self._reader.execute_command("CLIENT", "ID"))

    async def read(self, keys: Sequence[bytes], ids: Sequence[str], *, count: int, block_ms: int) -> RawRead:
        """``XREAD COUNT count BLOCK block_ms STREAMS keys... ids...``; empty when the block timed out.

        One call for all keys. On :class:`Unreachable` the reader connection is dropped, so the next
        read starts over on a fresh one. A key holding another type fails the whole read
        (:class:`~streams_app.redis_ops.errors.NotFound`): :meth:`types` tells which.
        """
        await self.connect_reader(block_ms=block_ms)
        assert self._reader is not None
        with self._reader_failures():
            reply = await self._reader.execute_command("XREAD", "COUNT", count, "BLOCK", block_ms, "STREAMS", *keys, *ids)
        return reply or []

    @contextlib.contextmanager
    def _reader_failures(self) -> Iterator[None]:
        try:
            with translated(self.conn):
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
        with translated(self.conn):
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
        """``TYPE`` of each key, in one round trip (``none`` for a missing key)."""
        with translated(self.conn):
            pipe = self._control_client().pipeline(transaction=False)
            for key in keys:
                pipe.type(key)
            return [_text(kind) for kind in await asyncio.shield(pipe.execute())]

    async def unblock_reader(self) -> bool:
        """``CLIENT UNBLOCK`` the reader: True if it was blocked, False if it is not (yet, or at all).

        The XREAD may still be on its way to the server: the caller retries while it matters.
        """
        if self._reader_id is None:
            return False
        return bool(await self._command("CLIENT", "UNBLOCK", self._reader_id))

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


_background: set[asyncio.Task[None]] = set()


def _spawn(coro: Coroutine[Any, Any, None]) -> None:
    """Run ``coro`` in the background, holding a reference (the loop keeps only weak ones)."""
    task = asyncio.get_running_loop().create_task(coro)
    _background.add(task)
    task.add_done_callback(_background.discard)


async def _close_quietly(client: aioredis.Redis) -> None:
    with contextlib.suppress(Exception):
        await client.aclose()
