"""The exporter's raw range reader (``redis_ops.ranges``) against a real redis-server."""

from __future__ import annotations

import pytest
import redis

from streams_app.redis_ops.errors import Unreachable
from streams_app.redis_ops.ranges import range_pages
from tests.servers import free_port

CONN = "default"

# redis-py deprecated get_connection's command name in 5.3 (gone in a later major): the reader must not use it.
pytestmark = pytest.mark.filterwarnings("error:Call to 'get_connection':DeprecationWarning")


def test_pages_cover_the_stream_once_in_order_with_the_asked_sizes(r: redis.Redis) -> None:
    for n in range(23):
        r.xadd(b"s", {b"\xff\x00": bytes([n, 0x80]), b"plain": b"1"})
    expected = r.xrange(b"s")
    sizes = iter([5, 1, 7, 100])
    asked: list[int] = []

    def count() -> int:
        asked.append(next(sizes))
        return asked[-1]

    pages = list(range_pages(CONN, b"s", "-", count=count, mask=None))
    assert [len(page) for page in pages] == [5, 1, 7, 10]
    assert asked == [5, 1, 7, 100]
    flat = [item for page in pages for item in page]
    assert [(item[0], dict(zip(item[1][0::2], item[1][1::2], strict=True))) for item in flat] == expected


def test_an_exclusive_start_and_an_exact_last_page(r: redis.Redis) -> None:
    ids = [r.xadd(b"s", {b"n": str(n).encode()}) for n in range(6)]
    pages = list(range_pages(CONN, b"s", "(" + ids[1].decode(), count=lambda: 2, mask=None))
    assert [[item[0] for item in page] for page in pages] == [ids[2:4], ids[4:6]]  # then an empty page
    assert list(range_pages(CONN, b"missing", "-", count=lambda: 10, mask=None)) == []


def test_an_unreachable_server_raises_unreachable(settings) -> None:
    settings.BUS_REDIS_URLS = {"down": f"redis://127.0.0.1:{free_port()}/0"}
    with pytest.raises(Unreachable):
        list(range_pages("down", b"s", "-", count=lambda: 10, mask=None))


def test_a_reader_stopped_with_a_page_in_flight_leaves_the_pool_clean(r: redis.Redis) -> None:
    """The next page is asked for before one is handed over: a caller that stops there must not leave
    that reply for the next command on the same connection."""
    from streams_app.redis_ops.client import get_client

    ids = [r.xadd(b"s", {b"n": str(n).encode()}) for n in range(10)]
    asked = 0

    def count() -> int:
        nonlocal asked
        asked += 1
        if asked == 2:  # the second request waits in Redis until the caller has left
            r.client_pause(300, all=True)
        return 3

    pages = range_pages(CONN, b"s", "-", count=count, mask=None)
    assert [item[0] for item in next(pages)] == ids[:3]  # the second page is in flight now, unanswered
    pages.close()
    pool = get_client(CONN).connection_pool
    assert not pool._in_use_connections  # handed back
    assert get_client(CONN).execute_command("XLEN", b"s") == 10  # not the in-flight XRANGE's reply
    assert get_client(CONN).execute_command("GET", b"missing") is None


def test_a_key_that_changes_type_mid_read_raises_and_leaves_the_pool_clean(r: redis.Redis) -> None:
    from streams_app.redis_ops.client import get_client
    from streams_app.redis_ops.errors import OpsError

    for n in range(6):
        r.xadd(b"s", {b"n": str(n).encode()})
    pages = range_pages(CONN, b"s", "-", count=lambda: 2, mask=None)
    next(pages)  # the second page is in flight: it will find the stream
    r.delete(b"s")
    r.set(b"s", b"a string now")
    assert len(next(pages)) == 2  # asked before the change, answered from the stream
    with pytest.raises(OpsError):
        next(pages)  # asked after it: WRONGTYPE
    assert get_client(CONN).execute_command("GET", b"s") == b"a string now"
