"""The live tail's async reader (``redis_ops.tail``) against a real redis-server.

What each call must return is read from the same server with a plain redis-py client; errors must
come out as the access layer's one family (``OpsError``), never as redis-py's own exceptions.
"""

from __future__ import annotations

import asyncio
from collections.abc import Awaitable, Callable, Coroutine
from typing import Any, TypeVar

import pytest
import redis

from streams_app.redis_ops.errors import NotFound, OpsError, Unreachable
from streams_app.redis_ops.tail import RANGE_PAGE, TailReader
from streams_app.redis_ops.types import RawEntry
from tests.servers import free_port

CONN = "default"
T = TypeVar("T")


def run(scenario: Callable[[TailReader], Coroutine[Any, Any, T]], conn: str = CONN) -> T:
    """Run ``scenario`` with a fresh reader on a fresh event loop, closing its connections after."""

    async def main() -> T:
        reader = TailReader(conn)
        try:
            return await scenario(reader)
        finally:
            await reader.aclose()

    return asyncio.run(asyncio.wait_for(main(), 30))


def as_pairs(raw: list[RawEntry]) -> list[tuple[bytes, dict[bytes, bytes]]]:
    """Raw ``[id, [name, value, ...]]`` entries in the shape redis-py's parsed XRANGE gives."""
    return [(item[0], dict(zip(item[1][0::2], item[1][1::2], strict=True))) for item in raw]


async def raised(call: Awaitable[object]) -> OpsError:
    with pytest.raises(OpsError) as info:
        await call
    return info.value


@pytest.fixture
def down(settings) -> str:
    """A configured connection whose server does not answer (nothing listens on its port)."""
    settings.BUS_REDIS_URLS = {**settings.BUS_REDIS_URLS, "down": f"redis://127.0.0.1:{free_port()}/0"}
    return "down"


def test_an_unreachable_server_raises_unreachable_from_every_call(down: str) -> None:
    async def scenario(reader: TailReader) -> list[OpsError]:
        errors = [
            await raised(reader.connect_reader(block_ms=100)),
            await raised(reader.read([b"s"], ["0-0"], count=10, block_ms=100)),
            await raised(reader.newest_id(b"s")),
            await raised(reader.newest_first(b"s", after="0-0", until="+", limit=10)),
            await raised(reader.types([b"s"])),
        ]
        assert reader.reader_id is None  # a failed reader starts over on a fresh connection
        assert await reader.unblock_reader() is False  # no reader: nothing to interrupt, no command
        return errors

    errors = run(scenario, down)
    for error in errors:
        assert type(error) is Unreachable
        assert error.conn == down and error.status == 503 and error.code == "unreachable"
        assert not isinstance(error, redis.RedisError)


def test_an_unknown_connection_is_not_found(settings) -> None:
    with pytest.raises(NotFound):
        TailReader("nope")
    reader = TailReader(CONN)
    assert reader.configured()
    settings.BUS_REDIS_URLS = {"other": settings.BUS_REDIS_URLS[CONN]}
    assert not reader.configured()


def test_a_key_of_another_type_fails_the_read_as_not_found(r: redis.Redis) -> None:
    r.set(b"plain", b"1")
    r.xadd(b"s", {b"f": b"v"})
    expected_types = [r.type(key).decode() for key in (b"s", b"plain", b"missing")]

    async def scenario(reader: TailReader) -> tuple[OpsError, list[str]]:
        error = await raised(reader.read([b"s", b"plain"], ["0-0", "0-0"], count=10, block_ms=100))
        return error, await reader.types([b"s", b"plain", b"missing"])

    error, types = run(scenario)
    assert type(error) is NotFound and "another type" in error.message
    assert types == expected_types == ["stream", "string", "none"]


def test_reads_match_what_redis_returns(r: redis.Redis) -> None:
    for n in range(RANGE_PAGE * 2 + 50):  # replays cross page boundaries
        r.xadd(b"big", {b"n": str(n).encode(), b"\xff\x00bin": bytes([n % 256, 0x80])})
    r.xadd(b"other", {b"a": b"1"})
    ids = [entry_id for entry_id, _ in r.xrange(b"big")]
    after, until = ids[10].decode(), ids[-20].decode()

    async def scenario(reader: TailReader) -> dict[str, Any]:
        return {
            "newest": await reader.newest_id(b"big"),
            "missing": await reader.newest_id(b"missing"),
            "replay": await reader.newest_first(b"big", after=after, until=until, limit=RANGE_PAGE + 7),
            "short": await reader.newest_first(b"big", after=ids[-4].decode(), until="+", limit=100),
            "read": await reader.read([b"big", b"other"], [ids[-3].decode(), "0-0"], count=10, block_ms=100),
            "quiet": await reader.read([b"big"], [ids[-1].decode()], count=10, block_ms=50),
        }

    got = run(scenario)
    assert got["newest"] == ids[-1].decode()
    assert got["missing"] == "0-0"
    assert as_pairs(got["replay"]) == r.xrevrange(b"big", until, "(" + after, count=RANGE_PAGE + 7)
    assert as_pairs(got["short"]) == r.xrevrange(b"big", "+", "(" + ids[-4].decode())
    expected = r.xread({b"big": ids[-3], b"other": "0-0"}, count=10)
    assert [(key, as_pairs(entries)) for key, entries in got["read"]] == [
        (key, list(entries)) for key, entries in expected
    ]
    assert got["quiet"] == []  # the block timed out


def test_unblock_interrupts_a_blocked_read(r: redis.Redis) -> None:
    async def scenario(reader: TailReader) -> tuple[bool, bool, object]:
        await reader.connect_reader(block_ms=20_000)
        idle = await reader.unblock_reader()  # connected but not blocked: nothing to interrupt
        pending = asyncio.ensure_future(reader.read([b"quiet"], ["$"], count=10, block_ms=20_000))
        for _ in range(1000):
            blocked = [c for c in r.client_list() if int(c["id"]) == reader.reader_id and "b" in c["flags"]]
            if blocked:
                break
            await asyncio.sleep(0.01)
        assert blocked and blocked[0]["name"] == "busconsole-tail-reader"
        interrupted = await reader.unblock_reader()
        return idle, interrupted, await asyncio.wait_for(pending, 5)  # long before its 20 s BLOCK

    idle, interrupted, reply = run(scenario)
    assert (idle, interrupted, reply) == (False, True, [])
