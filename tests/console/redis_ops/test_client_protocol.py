"""What the console's and the bus's Redis clients ask of redis-py, whatever redis-py's defaults are.

redis-py 8 changed two defaults the console relies on not having:

- it speaks RESP3 (``HELLO 3``), where XINFO replies are maps: the console's parsers and the bus's
  raw ``execute_command`` replies read RESP2's flat arrays, so every client asks for RESP2 itself;
- ``redis.Redis(...)`` retries a command up to 10 times on a connection error or timeout (redis-py
  5: never), so a write whose reply was lost could run twice and a dead server takes ten tries to
  report. The clients built ``from_url``, as the console's and the bus's are, still try once; the
  last two tests keep it so (they passed before the RESP2 change too: they guard, they fixed nothing).

The protocol is read from Redis itself (``CLIENT LIST``'s ``resp=`` and ``name=``); the tries are
counted by a listening socket that accepts each connection and closes it at once.
"""

from __future__ import annotations

import asyncio
import socket
import threading
from collections.abc import Iterator

import pytest
import redis

from eventbus import Bus
from streams_app.redis_ops import client as redis_client


def _resp_of(r: redis.Redis, name: str) -> set[str]:
    """The ``resp=`` of every connection named ``name`` in ``CLIENT LIST``, as Redis reports it."""
    found = set()
    for line in r.execute_command("CLIENT", "LIST").decode().splitlines():
        fields = dict(part.split("=", 1) for part in line.split(" ") if "=" in part)
        if fields.get("name") == name:
            found.add(fields["resp"])
    return found


def test_console_and_tail_clients_speak_resp2(settings, redis_server, r: redis.Redis) -> None:
    settings.BUS_REDIS_URLS = {"default": redis_server.url(0)}
    redis_client.reset()
    client = redis_client.get_client("default")
    r.xadd("s", {"f": "v"})
    # XINFO STREAM as the console sends it: RESP2's flat [name, value, ...] list, not a RESP3 map.
    reply = client.execute_command("XINFO", "STREAM", "s")
    assert isinstance(reply, list) and reply[0::2][:1] == [b"length"]
    assert _resp_of(r, "busconsole") == {"2"}

    async def tail_connects() -> None:
        tail = redis_client.async_client(redis_server.url(0), client_name="busconsole-tail-test")
        try:
            await tail.ping()
            assert _resp_of(r, "busconsole-tail-test") == {"2"}
        finally:
            await tail.aclose()

    asyncio.run(tail_connects())


def test_bus_clients_speak_resp2(redis_server, r: redis.Redis) -> None:
    bus = Bus.from_url(redis_server.url(0), redis_kwargs={"client_name": "bus-resp-test"})
    try:
        bus.client.ping()
        assert _resp_of(r, "bus-resp-test") == {"2"}
    finally:
        bus.close()


class ClosingListener:
    """A TCP listener on 127.0.0.1 that accepts each connection and closes it at once, counting them."""

    def __init__(self) -> None:
        self.sock = socket.create_server(("127.0.0.1", 0))
        self.port = self.sock.getsockname()[1]
        self.accepted = 0
        self._stop = threading.Event()
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def _serve(self) -> None:
        self.sock.settimeout(0.05)
        while not self._stop.is_set():
            try:
                conn, _ = self.sock.accept()
            except TimeoutError:
                continue
            self.accepted += 1
            conn.close()

    def close(self) -> None:
        self._stop.set()
        self.thread.join(5)
        self.sock.close()


@pytest.fixture
def closing_listener() -> Iterator[ClosingListener]:
    listener = ClosingListener()
    yield listener
    listener.close()


def test_console_client_tries_a_command_once(settings, closing_listener: ClosingListener) -> None:
    settings.BUS_REDIS_URLS = {"default": f"redis://127.0.0.1:{closing_listener.port}/0?cluster=no"}
    redis_client.reset()
    with pytest.raises(redis.ConnectionError):
        redis_client.get_client("default").execute_command("XADD", "s", "*", "f", "v")
    assert closing_listener.accepted == 1


def test_bus_client_tries_a_command_once(closing_listener: ClosingListener) -> None:
    bus = Bus.from_url(f"redis://127.0.0.1:{closing_listener.port}/0?cluster=no")
    try:
        with pytest.raises(redis.ConnectionError):
            bus.client.execute_command("XADD", "s", "*", "f", "v")
    finally:
        bus.close()
    assert closing_listener.accepted == 1


@pytest.mark.slow
def test_bus_clients_wait_out_a_block_longer_than_redis_py_8s_read_timeout(redis_server, r: redis.Redis) -> None:
    """A worker's XREADGROUP BLOCK (``block_ms``) or a progress read may block longer than 5 s, redis-py
    8's default read timeout (redis-py 5: none): the bus's clients keep redis-py 5's, so an idle BLOCK
    of 6 s ends empty rather than in ``redis.TimeoutError``."""
    bus = Bus.from_url(redis_server.url(0))
    try:
        assert bus.client.xread({"idle": "$"}, block=6_000) in ([], {}, None)
    finally:
        bus.close()
