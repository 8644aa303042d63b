"""Many tails share one Redis reader per connection, which is released when the last client leaves.

Real uvicorn and redis-server. Connection counts and identities come from the server's CLIENT LIST,
XREAD counts from INFO commandstats, entry IDs from XADD; the hub's own stats are read only for what
Redis cannot tell (subscribers, interrupts). Polling is bounded and asserts nothing on time.
"""

from __future__ import annotations

import asyncio
from typing import Any

import redis

from tests.console.live.helpers import (
    entries_until,
    hub_stats,
    open_tail,
    reader_settled,
    run,
    tail_connections,
    until_live,
    xadd_many,
)


def test_a_hundred_clients_share_one_redis_reader(asgi_server, cookies, r: redis.Redis) -> None:
    key = b"fanout"
    before = {int(c["id"]) for c in tail_connections(r)}  # left over by earlier servers in this process

    async def scenario() -> dict[str, Any]:
        async with open_tail(asgi_server, cookies, key) as first:
            await until_live(first)
            with_one = await reader_settled(r, before)
            others = [open_tail(asgi_server, cookies, key) for _ in range(99)]
            clients = [await c.__aenter__() for c in others]
            try:
                for ws in clients:
                    await until_live(ws)
                with_hundred = await reader_settled(r, before)
                stats = hub_stats()["default"]
                xread_before = r.info("commandstats")["cmdstat_xread"]["calls"]
                ids = xadd_many(r, key, 50)
                received = [await entries_until(ws, ids[-1]) for ws in [first, *clients]]
                xread_after = r.info("commandstats")["cmdstat_xread"]["calls"]
            finally:
                for c in others:
                    await c.__aexit__(None, None, None)
            return {"one": with_one, "hundred": with_hundred, "stats": stats, "ids": ids,
                    "received": received, "xreads": xread_after - xread_before}

    out = run(scenario())
    assert sorted(c["name"] for c in out["one"]) == ["busconsole-tail-control", "busconsole-tail-reader"]
    assert sorted(c["name"] for c in out["hundred"]) == sorted(c["name"] for c in out["one"])
    assert {int(c["id"]) for c in out["hundred"]} == {int(c["id"]) for c in out["one"]}  # the very same
    assert out["stats"]["subscribers"] == 100 and out["stats"]["keys"] == 1
    for got in out["received"]:
        assert [e["id"] for e in got] == out["ids"]
    # One XREAD per batch of new entries for the whole process, not one per client: at most one per
    # XADD (each may wake the reader) plus a few BLOCK timeouts, against >= 100 x 50 per-client reads.
    assert out["xreads"] <= len(out["ids"]) + 10


def test_the_reader_is_released_when_the_last_client_leaves(asgi_server, cookies, r: redis.Redis) -> None:
    before = {int(c["id"]) for c in tail_connections(r)}

    async def scenario() -> tuple[int, dict[str, Any]]:
        async with open_tail(asgi_server, cookies, b"a") as ws:
            await until_live(ws)
            during = len(await reader_settled(r, before))
        for _ in range(500):  # the hub lets go in the background; bounded polling, no timing assertion
            stats = hub_stats().get("default", {})
            if not stats.get("reading") and not tail_connections(r, ignore=before):
                break
            await asyncio.sleep(0.02)
        return during, stats

    during, stats = run(scenario())
    assert during == 2
    assert stats["subscribers"] == 0 and not stats["reading"]
    assert tail_connections(r, ignore=before) == []


def test_tails_of_several_streams_and_late_joiners_go_live_through_one_reader(
    asgi_server, cookies, r: redis.Redis
) -> None:
    """A key added while the reader is blocked interrupts it (CLIENT UNBLOCK): no entry of it is lost."""

    async def scenario() -> dict[bytes, tuple[list[str], list[str]]]:
        out = {}
        async with open_tail(asgi_server, cookies, b"s0") as ws0:
            await until_live(ws0)
            for n in range(1, 6):
                key = f"s{n}".encode()
                async with open_tail(asgi_server, cookies, key) as ws:
                    await until_live(ws)
                    ids = xadd_many(r, key, 3)
                    out[key] = ids, [e["id"] for e in await entries_until(ws, ids[-1])]
            ids = xadd_many(r, b"s0", 3)
            out[b"s0"] = ids, [e["id"] for e in await entries_until(ws0, ids[-1])]
        return out

    for key, (sent, got) in run(scenario()).items():
        assert got == sent, key
    assert hub_stats()["default"]["interrupts"] >= 1
