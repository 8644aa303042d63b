"""A Redis ACL user refused CLIENT SETNAME still gets the console: its pages, the API and the live tail's
asyncio connections (reader and control) connect without naming themselves; where Redis allows it, the
console's connections are still named (``busconsole``, or the URL's ``client_name``).

Each test has a redis-server of its own (``spare_redis``), so the ACL user and CLIENT LIST are the test's
alone; the premise (this user may read but not run CLIENT SETNAME) is checked against Redis itself.
"""

from __future__ import annotations

import asyncio
from collections.abc import Iterator

import pytest
import redis
from django.test import Client

from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops.tail import TailReader
from tests.console.helpers import CONN, api, stream_api, stream_url
from tests.servers import RedisServer

LIMITED_PASSWORD = "limited-pw-3"


@pytest.fixture
def limited_url(spare_redis: RedisServer) -> Iterator[str]:
    """A read-only ACL user on a server of the test's own: reads streams, may not name its connection."""
    admin = redis.Redis.from_url(spare_redis.url(0))
    admin.execute_command(
        "ACL", "SETUSER", "limited", "on", f">{LIMITED_PASSWORD}", "~*", "&*",
        "+@read", "+@connection", "+info", "-client|setname",
    )
    admin.xadd("orders", {"n": "1"})
    admin.xadd("orders", {"n": "2"})
    admin.xgroup_create("orders", "workers", id="0")
    yield f"redis://limited:{LIMITED_PASSWORD}@127.0.0.1:{spare_redis.port}/0"
    admin.close()


def test_the_acl_really_refuses_client_setname(limited_url: str) -> None:
    """The premise, from Redis itself: this user can read but not name its connection."""
    plain = redis.Redis.from_url(limited_url)
    assert plain.xlen("orders") == 2
    with pytest.raises(redis.exceptions.NoPermissionError):
        plain.client_setname("anything")
    plain.close()


def test_acl_user_without_setname_reads_pages_and_api(settings, limited_url: str, viewer_client: Client) -> None:
    settings.BUS_REDIS_URLS = {CONN: limited_url}
    redis_client.reset()
    page = viewer_client.get(f"/c/{CONN}/streams/?live=1")
    assert page.status_code == 200
    assert "orders" in page.content.decode()
    assert "unreachable" not in page.content.decode()
    assert viewer_client.get(stream_url("orders")).status_code == 200
    listed = viewer_client.get(api(f"/c/{CONN}/streams/"))
    assert listed.status_code == 200, listed.content
    assert [s["key"] for s in listed.json()["streams"]] == ["orders"]
    info = viewer_client.get(stream_api("orders")).json()
    assert info["length"] == 2
    assert [g["name"] for g in info["groups"]] == ["workers"]


def test_acl_user_without_setname_feeds_the_live_tail(settings, limited_url: str) -> None:
    """The tail's asyncio connections (reader and control) connect too."""
    settings.BUS_REDIS_URLS = {CONN: limited_url}
    expected = redis.Redis.from_url(limited_url).xrevrange("orders", count=1)[0][0].decode()

    async def read() -> tuple[str, int | None]:
        reader = TailReader(CONN)
        try:
            newest = await reader.newest_id(b"orders")
            await reader.connect_reader(block_ms=10)
            return newest, reader.reader_id
        finally:
            await reader.aclose()

    newest, reader_id = asyncio.run(read())
    assert newest == expected
    assert reader_id is not None


@pytest.mark.parametrize(("query", "name"), [("", "busconsole"), ("?client_name=ops-console", "ops-console")])
def test_connections_are_still_named_where_redis_allows_it(settings, spare_redis: RedisServer,
                                                           viewer_client: Client, query: str, name: str) -> None:
    """On a server of the test's own, so that only the console's connections are listed."""
    settings.BUS_REDIS_URLS = {CONN: spare_redis.url(0) + query}
    watcher = redis.Redis.from_url(spare_redis.url(0))
    watcher.client_setname("watcher")
    watcher.xadd("s", {"a": "1"})
    assert viewer_client.get(stream_url("s")).status_code == 200
    assert {c["name"] for c in watcher.client_list()} == {"watcher", name}
    watcher.close()
