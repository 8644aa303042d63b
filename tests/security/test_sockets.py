"""Open websockets end with the session and role they were opened with.

A tail or page socket must close (4401) when its session logs out or its user is deactivated or deleted,
and close (4403, the page reconnects under the new role) when the user's role changes: group membership
or the superuser flag. Logging out one session leaves the user's other sessions' sockets open.

Real uvicorn, real channel layer, real session store; the logout is a POST to ``/logout/`` through the
server, the other changes are what the Django admin does (``save()``, ``groups.remove()``). ``HANG`` only
turns a hang into a failure; it sits below the sockets' periodic re-check (60 s), so these tests see the
prompt path, not the backstop.
"""

from __future__ import annotations

import asyncio
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import redis
from django.conf import settings
from django.contrib.auth.models import Group, User
from django.utils.module_loading import import_string
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed

from streams_app.live import broadcast
from tests.conftest import session_cookie
from tests.console.conftest import make_user
from tests.console.live.helpers import cookie_header, open_tail, until_live
from tests.polling import until
from tests.servers import RedisServer

HANG = 20
ROUNDS = 60  # two sweeps over the points at which a read is cancelled


def run(coro) -> Any:
    return asyncio.run(asyncio.wait_for(coro, HANG))


@pytest.fixture
def stream(r: redis.Redis) -> bytes:
    r.xadd(b"orders", {"n": "1"})
    return b"orders"


async def close_code(ws: ClientConnection) -> int | None:
    """Read (and drop) frames until the server closes the socket; its close code."""
    for _ in range(10_000):
        try:
            await ws.recv()
        except ConnectionClosed as closed:
            return closed.rcvd.code if closed.rcvd else None
    raise AssertionError("the socket kept sending and never closed")


async def logout(server, cookies: dict[str, str]) -> None:
    """POST /logout/ with this session, as the browser's logout button does (CSRF token included)."""
    async with httpx.AsyncClient(base_url=server.url, cookies=cookies) as http:
        await http.get("/tokens/")  # sets the CSRF cookie
        done = await http.post("/logout/", data={"csrfmiddlewaretoken": http.cookies["csrftoken"]})
        assert done.status_code == 302, done.text


async def tail_closes_after(server, cookies: dict[str, str], key: bytes, change: Callable[[], Any]) -> int | None:
    async with open_tail(server, cookies, key) as ws:
        await until_live(ws)
        await asyncio.to_thread(change)
        return await close_code(ws)


def test_a_tail_closes_when_its_session_logs_out(asgi_server, viewer: User, stream: bytes) -> None:
    cookies = session_cookie(viewer)

    async def scenario() -> int | None:
        async with open_tail(asgi_server, cookies, stream) as ws:
            await until_live(ws)
            await logout(asgi_server, cookies)
            return await close_code(ws)

    assert run(scenario()) == 4401


def test_logging_out_one_session_leaves_the_others_open(asgi_server, viewer: User, stream: bytes) -> None:
    leaving, staying = session_cookie(viewer), session_cookie(viewer)

    async def scenario() -> tuple[int | None, dict[str, Any]]:
        async with open_tail(asgi_server, leaving, stream) as gone, open_tail(asgi_server, staying, stream) as kept:
            await until_live(gone)
            await until_live(kept)
            await logout(asgi_server, leaving)
            code = await close_code(gone)
            # Events reach one socket in the order they were sent: a frame sent after the logout's
            # revocation arriving proves the other session's socket survived it.
            await asyncio.to_thread(broadcast.stream_changed, "default", stream, action="probe")
            for _ in range(100):
                frame = json.loads(await kept.recv())
                if frame["type"] == "changed":
                    return code, frame
            raise AssertionError("no changed frame")

    code, frame = run(scenario())
    assert code == 4401
    assert frame["action"] == "probe"


def blocked_reads(client: redis.Redis) -> int:
    """Clients the server holds in a blocking read (the layer's BZPOPMIN), from CLIENT LIST."""
    return sum(1 for c in client.client_list() if c.get("cmd") == "bzpopmin")


def test_a_closing_socket_loses_no_event_meant_for_another(spare_redis: RedisServer) -> None:
    """The process's one read of the channel layer, cancelled with the socket running it, keeps what it popped.

    All consumers of a process share one channel in Redis; the one whose receive runs the read hands each
    message to the consumer it names. Here that receive is cancelled (its socket closed) at each point
    while a message for another consumer is on its way; a second message follows on the same channel,
    and messages reach a channel in the order they were sent, so receiving the second first means the
    first was lost. The configured backend runs on a Redis of the test's own.
    """
    layer = import_string(settings.CHANNEL_LAYERS["default"]["BACKEND"])(hosts=[spare_redis.url(0)])
    client = redis.Redis.from_url(spare_redis.url(0))

    async def one_round(n: int, steps: int) -> list[int]:
        held, other = await layer.new_channel(), await layer.new_channel()
        holder = asyncio.ensure_future(layer.receive(held))
        await until(lambda: blocked_reads(client), what="the holder's read blocked at the server")
        waiter = asyncio.ensure_future(layer.receive(other))
        await asyncio.sleep(0)  # the waiter queues behind the holder's read
        sent = asyncio.ensure_future(layer.send(other, {"type": "probe", "n": n}))
        for _ in range(steps):  # cancel at a different point of the message's way each round
            await asyncio.sleep(0)
        holder.cancel()
        await sent
        await layer.send(other, {"type": "probe", "n": n + 1})
        first = (await asyncio.wait_for(waiter, HANG))["n"]
        if first != n:  # the probe was lost: the follower is all there is
            return [first]
        return [first, (await asyncio.wait_for(layer.receive(other), HANG))["n"]]

    async def scenario() -> list[list[int]]:
        rounds: list[list[int]] = []
        try:
            for i in range(ROUNDS):
                rounds.append(await one_round(2 * i, i % 30))
                if len(rounds[-1]) < 2:
                    break
        finally:
            await layer.close_pools()
        return rounds

    try:
        received = asyncio.run(scenario())
    finally:
        client.close()
    assert received == [[2 * i, 2 * i + 1] for i in range(ROUNDS)]


def test_a_tail_closes_when_its_user_is_deactivated(asgi_server, viewer: User, stream: bytes) -> None:
    def deactivate() -> None:
        viewer.is_active = False
        viewer.save()

    assert run(tail_closes_after(asgi_server, session_cookie(viewer), stream, deactivate)) == 4401


def test_a_tail_closes_when_its_user_is_deleted(asgi_server, viewer: User, stream: bytes) -> None:
    assert run(tail_closes_after(asgi_server, session_cookie(viewer), stream, viewer.delete)) == 4401


def test_a_tail_closes_when_its_user_loses_a_role_group(asgi_server, operator: User, stream: bytes) -> None:
    def demote() -> None:
        operator.groups.remove(Group.objects.get(name="operator"))

    assert run(tail_closes_after(asgi_server, session_cookie(operator), stream, demote)) == 4403


def test_a_tail_closes_when_a_group_loses_its_user(asgi_server, operator: User, stream: bytes) -> None:
    """The same change made from the group's side of the relation."""

    def demote() -> None:
        Group.objects.get(name="operator").user_set.clear()

    assert run(tail_closes_after(asgi_server, session_cookie(operator), stream, demote)) == 4403


def test_a_tail_closes_when_its_users_role_group_is_deleted(asgi_server, operator: User, stream: bytes) -> None:
    def drop() -> None:
        Group.objects.get(name="operator").delete()

    assert run(tail_closes_after(asgi_server, session_cookie(operator), stream, drop)) == 4403


def test_a_tail_closes_when_the_superuser_flag_goes(asgi_server, transactional_db, stream: bytes) -> None:
    root = make_user("root-sockets", is_superuser=True)

    def demote() -> None:
        root.is_superuser = False
        root.save()

    assert run(tail_closes_after(asgi_server, session_cookie(root), stream, demote)) == 4403


def test_a_page_socket_closes_on_logout(asgi_server, viewer: User) -> None:
    cookies = session_cookie(viewer)

    async def scenario() -> int | None:
        url = f"ws://127.0.0.1:{asgi_server.port}/ws/metrics/"
        headers = {"Cookie": cookie_header(cookies)}
        async with connect(url, origin=asgi_server.url, additional_headers=headers, proxy=None) as ws:
            assert json.loads(await ws.recv()) == {"type": "status", "state": "live"}
            await logout(asgi_server, cookies)
            return await close_code(ws)

    assert run(scenario()) == 4401


def test_an_unrelated_save_leaves_sockets_open(asgi_server, viewer: User, operator: User, stream: bytes) -> None:
    """Another user's change, or a login (which saves ``last_login``), does not close this user's socket."""
    cookies = session_cookie(viewer)

    async def scenario() -> dict[str, Any]:
        async with open_tail(asgi_server, cookies, stream) as ws:
            await until_live(ws)

            def others() -> None:
                operator.is_active = False
                operator.save()
                viewer.first_name = "Vera"
                viewer.save()

            await asyncio.to_thread(others)
            await asyncio.to_thread(broadcast.stream_changed, "default", stream, action="probe")
            for _ in range(100):
                frame = json.loads(await ws.recv())
                if frame["type"] == "changed":
                    return frame
            raise AssertionError("no changed frame")

    assert run(scenario())["action"] == "probe"
