"""Tails that cannot go on: bad requests get an error status and a close code, a key replaced by
another type ends only its own tails, and tails survive a Redis restart.

Real uvicorn and redis-servers (a spare one is stopped and started). Close codes are what the
websocket client reports; entry IDs are XADD's replies.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from websockets.exceptions import ConnectionClosed

from tests.console.live.helpers import entries_until, frame, open_tail, run, until_live, xadd_many


@pytest.mark.parametrize(
    ("conn", "key", "after", "code"),
    [
        ("default", b"orders", "not-an-id", 4400),
        ("nowhere", b"orders", None, 4404),
        ("default", b"a-string", None, 4404),
    ],
)
def test_bad_requests_get_a_status_and_a_close_code(asgi_server, cookies, r, conn, key, after, code) -> None:
    r.set(b"a-string", b"not a stream")

    async def scenario() -> tuple[dict[str, Any], int]:
        async with open_tail(asgi_server, cookies, key, after=after, conn=conn) as ws:
            status = await frame(ws)
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            return status, closed.value.rcvd.code

    status, closed_with = run(scenario())
    assert status["type"] == "status" and status["state"] == "error"
    assert closed_with == code


def test_a_key_replaced_by_another_type_ends_only_its_own_tails(asgi_server, cookies, r: redis.Redis) -> None:
    async def scenario() -> tuple[dict[str, Any], int, list[str], list[str]]:
        async with open_tail(asgi_server, cookies, b"doomed") as doomed, open_tail(asgi_server, cookies, b"fine") as fine:
            await until_live(doomed)
            await until_live(fine)
            r.delete(b"doomed")
            r.set(b"doomed", b"now a string")
            r.xadd(b"fine", {"wake": "the reader"})  # the next XREAD hits the wrong type
            status = await frame(doomed)
            with pytest.raises(ConnectionClosed) as closed:
                await doomed.recv()
            ids = xadd_many(r, b"fine", 5)
            got = [e["id"] for e in await entries_until(fine, ids[-1])]
            return status, closed.value.rcvd.code, ids, got

    status, code, ids, got = run(scenario())
    assert status["state"] == "error" and code == 4404
    assert got[-5:] == ids


@pytest.mark.slow
def test_tails_survive_a_redis_restart(asgi_server, cookies, spare_redis, settings) -> None:
    settings.BUS_REDIS_URLS = {**settings.BUS_REDIS_URLS, "spare": spare_redis.url(0)}
    spare = redis.Redis.from_url(spare_redis.url(0))

    async def scenario() -> tuple[list[dict[str, Any]], list[str], list[str]]:
        async with open_tail(asgi_server, cookies, b"jobs", conn="spare") as ws:
            await until_live(ws)
            before = [spare.xadd(b"jobs", {"n": "1"}).decode()]
            got = [e["id"] for e in await entries_until(ws, before[-1])]
            spare_redis.stop()
            statuses = [await frame(ws)]
            spare_redis.start()  # same port, empty: the stream is gone, new IDs are later ones
            statuses.append(await frame(ws))
            after = [spare.xadd(b"jobs", {"n": str(i)}).decode() for i in range(3)]
            got += [e["id"] for e in await entries_until(ws, after[-1])]
            return statuses, before + after, got

    try:
        statuses, sent, got = run(scenario())
    finally:
        spare.close()
    assert [(f["type"], f["state"]) for f in statuses] == [("status", "reconnecting"), ("status", "live")]
    assert got == sent
