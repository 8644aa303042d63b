"""A live tail delivers every new entry of its stream, in order, over a real websocket.

Uvicorn serves busconsole's ASGI app against a real redis-server. Expected entry IDs are Redis's own
XADD replies, and fields are what the test wrote (never values computed by the code under test); a key
of any bytes is tailed as exactly that key, checked with XLEN of its lookalikes.
"""

from __future__ import annotations

import json
from typing import Any

import redis

from tests.console.live.helpers import entries_until, open_tail, run, until_live, xadd_many


def test_a_tail_receives_every_entry_in_order(asgi_server, cookies, r: redis.Redis) -> None:
    key = b"orders:created"
    xadd_many(r, key, 5)  # history: not sent without ``after``

    async def scenario() -> list[dict[str, Any]]:
        async with open_tail(asgi_server, cookies, key) as ws:
            await until_live(ws)
            ids = xadd_many(r, key, 300, start=5)
            ids.append(r.xadd(key, {"type": "evil", "data": "<img src=x onerror=alert(1)>"}).decode())
            got = await entries_until(ws, ids[-1])
            return ids, got

    ids, got = run(scenario())
    assert [e["id"] for e in got] == ids
    assert got[0]["fields"] == {"n": "5", "data": '{"i":5,"pad":""}'}
    assert got[0]["decoded"][1] == {"name": "data", "format": "json", "value": {"i": 5, "pad": ""},
                                    "size": len(json.dumps({"i": 5, "pad": ""})),
                                    "truncated": False}
    assert got[-1]["fields"]["data"] == "<img src=x onerror=alert(1)>"  # data, as sent; the page uses textContent


def test_any_bytes_key_travels_as_one_percent_encoded_segment(asgi_server, cookies, r: redis.Redis) -> None:
    key = b"odd/key%2F with \xff\x00 bytes:tail/"

    async def scenario() -> tuple[str, list[dict[str, Any]]]:
        async with open_tail(asgi_server, cookies, key) as ws:
            await until_live(ws)
            entry_id = r.xadd(key, {"k": "v"}).decode()
            return entry_id, await entries_until(ws, entry_id)

    entry_id, got = run(scenario())
    assert [e["id"] for e in got] == [entry_id]
    assert r.xlen(b"odd/key") == 0 and r.xlen(b"odd") == 0  # no lookalike key was tailed
