"""Restricted commands, as managed services restrict them: the console keeps working, with a note where a
figure is unavailable.

Two monitored servers of the test's own:

- ``renamed``: ``CONFIG``, ``DEBUG``, ``CLIENT`` and ``INFO`` renamed away (``rename-command X ""``, as a
  managed service's redis.conf does): none of them exists, so no connection can be named, the live tail's
  reader has no ``CLIENT ID`` to be interrupted by, and no INFO figure can be read;
- ``denied``: an ACL user without ``CONFIG``, ``DEBUG``, ``CLIENT LIST``, ``CLIENT SETNAME``, ``CLIENT KILL``
  and with ``INFO server`` and ``INFO keyspace`` only.

On each: the pages and the API read, the overview shows what it can and says which figures are missing and
why, the live tail delivers (a stream joining an XREAD already blocked included), an action runs, and
``python -m eventbus list`` lists. Expected values come from Redis itself (read on the test's own admin
connection) and from ``redis-server --version``.
"""

from __future__ import annotations

import asyncio
import json
import re
import subprocess
from collections.abc import Iterator

import pytest
import redis
from django.test import Client

from streams_app.redis_ops import client as redis_client
from tests.conftest import session_cookie
from tests.console.helpers import CONN, api, group_url, stream_api, stream_url
from tests.console.live.helpers import entries_until, open_tail, run, until_live
from tests.eventbus.test_cli_urls import cli
from tests.servers import RedisServer

RENAMED = ("CONFIG", "DEBUG", "CLIENT", "INFO")
DENIED_USER = "console"
DENIED_PASSWORD = "restricted-pw-5"
DENIED_RULES = ("on", f">{DENIED_PASSWORD}", "~*", "&*", "+@all", "-config", "-debug", "-client|list",
                "-client|setname", "-client|kill", "-info", "+info|server", "+info|keyspace")


def server_version() -> str:
    """The version of the redis-server binary the suite runs, as it says itself."""
    out = subprocess.run(["redis-server", "--version"], capture_output=True, text=True, check=True).stdout
    return re.search(r"v=(\S+)", out)[1]


@pytest.fixture(scope="module")
def renamed_server() -> Iterator[RedisServer]:
    extra: tuple[str, ...] = ()
    for command in RENAMED:
        extra += ("--rename-command", command, "")
    server = RedisServer(extra=extra).start()
    yield server
    server.cleanup()


@pytest.fixture(scope="module")
def denied_server() -> Iterator[RedisServer]:
    server = RedisServer().start()
    admin = redis.Redis.from_url(server.url(0))
    admin.execute_command("ACL", "SETUSER", DENIED_USER, *DENIED_RULES)
    admin.close()
    yield server
    server.cleanup()


@pytest.fixture(params=["renamed", "denied"])
def restricted(request, settings) -> Iterator[tuple[str, redis.Redis]]:
    """(the kind, an admin client of the server with three orders, a group and one pending entry);
    the console's ``default`` connection points at the server (as the restricted user, when denied)."""
    if request.param == "renamed":
        server = request.getfixturevalue("renamed_server")
        url = server.url(0)
    else:
        server = request.getfixturevalue("denied_server")
        url = f"redis://{DENIED_USER}:{DENIED_PASSWORD}@127.0.0.1:{server.port}/0"
    admin = redis.Redis.from_url(server.url(0))
    admin.flushall()
    for n in range(3):
        admin.xadd("orders", {"n": str(n)})
    admin.xgroup_create("orders", "workers", id="0")
    admin.xreadgroup("workers", "c1", {"orders": ">"}, count=1)
    settings.BUS_REDIS_URLS = {CONN: url}
    redis_client.reset()
    yield request.param, admin
    admin.close()


def test_the_server_really_refuses_them(restricted: tuple[str, redis.Redis], settings) -> None:
    """The premise, from Redis itself."""
    kind, _ = restricted
    console = redis.Redis.from_url(settings.BUS_REDIS_URLS[CONN])
    calls = [("CONFIG", "GET", "databases"), ("DEBUG", "SLEEP", "0"), ("CLIENT", "LIST"),
             ("CLIENT", "SETNAME", "x"), ("INFO",), ("INFO", "memory")]
    for args in calls:
        with pytest.raises(redis.ResponseError) as refused:
            console.execute_command(*args)
        if kind == "renamed":
            assert "unknown command" in str(refused.value), (args, str(refused.value))
        elif args[0] != "DEBUG":  # Redis 7 refuses DEBUG to every user unless enable-debug-command says so
            assert isinstance(refused.value, redis.exceptions.NoPermissionError), (args, str(refused.value))
    console.close()


def test_pages_and_api_read_with_a_note_where_a_figure_is_unavailable(
    restricted: tuple[str, redis.Redis], viewer_client: Client
) -> None:
    kind, admin = restricted
    overview = viewer_client.get("/")
    assert overview.status_code == 200
    text = overview.content.decode()
    assert "unreachable" not in text, text
    assert "reachable" in text
    assert re.search(r"unavailable[^<]*INFO", text), "no note says which figures are missing and why"
    listed = viewer_client.get(api("/connections/")).json()["connections"]
    assert [(c["name"], c["ok"]) for c in listed] == [(CONN, True)]
    assert listed[0]["redis_version"] == server_version()  # from HELLO when INFO is renamed away
    for path in (f"/c/{CONN}/streams/", stream_url("orders"), group_url("orders", "workers")):
        page = viewer_client.get(path)
        assert page.status_code == 200, (path, page.content[:300])
    entries = viewer_client.get(stream_api("orders", "entries/"), {"order": "asc"}).json()["entries"]
    assert [e["id"] for e in entries] == [i.decode() for i, _ in admin.xrange("orders")]


def test_an_action_runs(restricted: tuple[str, redis.Redis], operator_client: Client) -> None:
    _, admin = restricted
    [(pending_id, _)] = admin.xrange("orders", count=1)
    acked = operator_client.post(stream_api("orders", "groups/workers/ack"), {"ids": [pending_id.decode()]},
                                 content_type="application/json")
    assert acked.status_code == 200 and acked.json()["acked"] == 1, acked.content
    assert admin.xpending("orders", "workers")["pending"] == 0


def test_the_live_tail_delivers_and_takes_a_second_stream(restricted: tuple[str, redis.Redis], asgi_server,
                                                          viewer, settings) -> None:
    """The second stream joins a reader already blocked on the first: with no CLIENT UNBLOCK (renamed) the
    XREAD is not interrupted, and the second stream's entries still come, after the bounded BLOCK."""
    _, admin = restricted
    cookies = session_cookie(viewer)

    async def scenario() -> tuple[list[str], list[str], list[str], list[str]]:
        async with open_tail(asgi_server, cookies, b"orders") as first:
            await until_live(first)
            one = [admin.xadd("orders", {"n": str(n)}).decode() for n in (10, 11)]
            got_one = [e["id"] for e in await entries_until(first, one[-1])]
            await asyncio.sleep(0.2)  # the reader is now blocked on orders alone
            async with open_tail(asgi_server, cookies, b"payments") as second:
                await until_live(second)
                two = [admin.xadd("payments", {"n": str(n)}).decode() for n in (20, 21)]
                got_two = [e["id"] for e in await entries_until(second, two[-1])]
        return one, got_one, two, got_two

    one, got_one, two, got_two = run(scenario())
    assert got_one == one and got_two == two


def test_the_command_line_lists(restricted: tuple[str, redis.Redis], settings) -> None:
    done = cli("list", "--json", "--url", settings.BUS_REDIS_URLS[CONN])
    assert done.returncode == 0, done.stderr
    assert [row["key"] for row in json.loads(done.stdout)["streams"]] == ["orders"]
