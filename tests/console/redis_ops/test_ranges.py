"""The exporter's raw range reader (``redis_ops.ranges``) against a real redis-server."""

from __future__ import annotations

import pytest
import redis

from streams_app.redis_ops.errors import Unreachable
from streams_app.redis_ops.ranges import range_pages
from tests.servers import free_port

CONN = "default"


def test_pages_cover_the_stream_once_in_order_with_the_asked_sizes(r: redis.Redis) -> None:
    for n in range(23):
        r.xadd(b"s", {b"\xff\x00": bytes([n, 0x80]), b"plain": b"1"})
    expected = r.xrange(b"s")
    sizes = iter([5, 1, 7, 100])
    asked: list[int] = []

    def count() -> int:
        asked.append(next(sizes))
        return asked[-1]

    pages = list(range_pages(CONN, b"s", "-", count=count))
    assert [len(page) for page in pages] == [5, 1, 7, 10]
    assert asked == [5, 1, 7, 100]
    flat = [item for page in pages for item in page]
    assert [(item[0], dict(zip(item[1][0::2], item[1][1::2], strict=True))) for item in flat] == expected


def test_an_exclusive_start_and_an_exact_last_page(r: redis.Redis) -> None:
    ids = [r.xadd(b"s", {b"n": str(n).encode()}) for n in range(6)]
    pages = list(range_pages(CONN, b"s", "(" + ids[1].decode(), count=lambda: 2))
    assert [[item[0] for item in page] for page in pages] == [ids[2:4], ids[4:6]]  # then an empty page
    assert list(range_pages(CONN, b"missing", "-", count=lambda: 10)) == []


def test_an_unreachable_server_raises_unreachable(settings) -> None:
    settings.BUS_REDIS_URLS = {"down": f"redis://127.0.0.1:{free_port()}/0"}
    with pytest.raises(Unreachable):
        list(range_pages("down", b"s", "-", count=lambda: 10))
