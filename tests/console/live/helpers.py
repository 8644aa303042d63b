"""Client-side helpers for the live tail tests: open a tail websocket, read its frames, write entries.

The tests compare what a client receives with IDs from Redis's own XADD replies, connection counts
with the server's CLIENT LIST and command counts with INFO commandstats; these helpers only carry
frames and IDs, they compute no expected value. Nothing is timed: reads are bounded by frame counts,
and ``run``'s generous bound only turns a hang into a failure.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import urlencode, urlsplit

import redis
from websockets.asyncio.client import ClientConnection, connect

from streams_app.live.hub import running_hubs
from tests.console.helpers import seg
from tests.polling import until

HANG = 60  # seconds before a stuck scenario fails (a safety net, not an assertion on speed)


def tail_url(server, key: bytes, *, conn: str = "default", after: str | None = None, filter: str | None = None) -> str:
    url = f"ws://127.0.0.1:{server.port}/ws/c/{conn}/streams/{seg(key)}/tail/"
    query = {name: value for name, value in (("after", after), ("filter", filter)) if value is not None}
    return url + (f"?{urlencode(query)}" if query else "")


def cookie_header(cookies: dict[str, str]) -> str:
    return "; ".join(f"{k}={v}" for k, v in cookies.items())


@asynccontextmanager
async def open_tail(server, cookies: dict[str, str] | None, key: bytes, *, after: str | None = None,
                    origin: str | None = None, conn: str = "default",
                    filter: str | None = None) -> AsyncIterator[ClientConnection]:
    headers = {"Cookie": cookie_header(cookies)} if cookies else {}
    async with connect(
        tail_url(server, key, conn=conn, after=after, filter=filter), origin=origin or server.url,
        additional_headers=headers,
        proxy=None, max_size=None, compression=None,
    ) as ws:
        yield ws


async def frame(ws: ClientConnection) -> dict[str, Any]:
    return json.loads(await ws.recv())


async def until_live(ws: ClientConnection) -> list[dict[str, Any]]:
    """Frames up to and including the ``live`` status (replayed entries, skipped notes...)."""
    seen = []
    for _ in range(100_000):
        f = await frame(ws)
        seen.append(f)
        if f["type"] == "status" and f["state"] == "live":
            return seen
    raise AssertionError("no live status")


def entries_of(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in frames:
        if f["type"] == "entry":
            out.append(f)
        elif f["type"] == "entries":
            out.extend(f["entries"])
    return out


async def entries_until(ws: ClientConnection, last_id: str, *, frames: list | None = None) -> list[dict[str, Any]]:
    """Entries received until the one with ``last_id`` (IDs from XADD, so the stop is independent)."""
    got: list[dict[str, Any]] = []
    for _ in range(100_000):
        f = await frame(ws)
        if frames is not None:
            frames.append(f)
        got.extend(entries_of([f]))
        if got and got[-1]["id"] == last_id:
            return got
    raise AssertionError("the last entry never came")


def id_key(entry_id: str) -> tuple[int, int]:
    ms, _, seq = entry_id.partition("-")
    return int(ms), int(seq or 0)


async def filtered_through(ws: ClientConnection, last_id: str, *, frames: list | None = None) -> list[dict[str, Any]]:
    """Entries a filtered tail sends until it has tested ``last_id`` (an ID from XADD): the entry itself
    when it matches, else a ``tested`` frame at or past it (a filtered tail's word for "read up to here")."""
    got: list[dict[str, Any]] = []
    for _ in range(100_000):
        f = await frame(ws)
        if frames is not None:
            frames.append(f)
        got.extend(entries_of([f]))
        if got and got[-1]["id"] == last_id:
            return got
        if f["type"] == "tested" and id_key(f["last_id"]) >= id_key(last_id):
            return got
    raise AssertionError("the tail never reached the last entry")


def xadd_many(r: redis.Redis, key: bytes, n: int, *, start: int = 0, size: int = 0) -> list[str]:
    pipe = r.pipeline(transaction=False)
    for i in range(start, start + n):
        pipe.xadd(key, {"n": str(i), "data": json.dumps({"i": i, "pad": "x" * size})})
    return [entry_id.decode() for entry_id in pipe.execute()]


def hub_stats() -> dict[str, Any]:
    """Stats of the live server's hub, read on its own event loop (it runs in another thread)."""
    out: dict[str, Any] = {}
    for loop, hub in running_hubs():
        if loop.is_running():

            async def snapshot(h=hub) -> dict[str, Any]:
                return h.stats()

            out.update(asyncio.run_coroutine_threadsafe(snapshot(), loop).result(10))
    return out


def tail_connections(r: redis.Redis, *, ignore: set[int] = frozenset()) -> list[dict[str, Any]]:
    return [c for c in r.client_list() if c["name"].startswith("busconsole-tail") and int(c["id"]) not in ignore]


async def reader_settled(r: redis.Redis, ignore: set[int]) -> list[dict[str, Any]]:
    """The tail connections once the reader is blocked in XREAD (it starts in the background)."""

    def settled() -> list[dict[str, Any]] | None:
        conns = tail_connections(r, ignore=ignore)
        if any(c["name"] == "busconsole-tail-reader" and c["cmd"] == "xread" for c in conns):
            return conns
        return None

    return await until(settled, what="the reader to block in XREAD", timeout=10)


def run(coro) -> Any:
    return asyncio.run(asyncio.wait_for(coro, HANG))


class RawClient:
    """A websocket client on a raw socket (a tiny receive buffer: it reads nothing until told), frames as sent."""

    def __init__(self, server, cookies: dict[str, str], key: bytes, *, conn: str = "default",
                 filter: str | None = None) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect(("127.0.0.1", server.port))
        parts = urlsplit(tail_url(server, key, conn=conn, filter=filter))
        path = parts.path + (f"?{parts.query}" if parts.query else "")
        nonce = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {nonce}\r\nSec-WebSocket-Version: 13\r\nOrigin: {server.url}\r\n"
            f"Cookie: {cookie_header(cookies)}\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(4096)
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def raw_frame(self) -> tuple[int, bytes]:
        """The next frame's opcode and payload, exactly as the server sent them (no extension was offered)."""
        b0, b1 = self._read(2)
        length = b1 & 0x7F
        if length == 126:
            length = int.from_bytes(self._read(2), "big")
        elif length == 127:
            length = int.from_bytes(self._read(8), "big")
        return b0 & 0x0F, self._read(length)

    def frame(self) -> dict[str, Any] | None:
        """The next text frame as JSON (control frames are skipped: returns None)."""
        opcode, payload = self.raw_frame()
        return json.loads(payload) if opcode == 0x1 else None

    def close(self) -> None:
        self.sock.close()
