"""Resuming a tail with ``after``: the missed entries once each, in order, then live without a gap.

Real uvicorn and redis-server. The expected IDs are XADD's replies, and under load the whole stream as
XRANGE returns it: each client must receive exactly the entries after its ``after``. A bounded replay
reports what it left out, checked against the IDs the test wrote.
"""

from __future__ import annotations

import asyncio
import threading
from typing import Any

import redis

from tests.console.live.helpers import entries_of, entries_until, frame, open_tail, run, until_live, xadd_many


def test_reconnect_with_after_receives_exactly_the_missed_entries(asgi_server, cookies, r: redis.Redis) -> None:
    key = b"payments"

    async def scenario() -> tuple[list[str], list[str], list[str], list[str]]:
        async with open_tail(asgi_server, cookies, key) as ws:
            await until_live(ws)
            first = xadd_many(r, key, 20)
            seen = [e["id"] for e in await entries_until(ws, first[-1])]
        missed = xadd_many(r, key, 37, start=20)  # nobody is tailing now
        async with open_tail(asgi_server, cookies, key, after=seen[-1]) as ws:
            replayed = entries_of(await until_live(ws))
            live = xadd_many(r, key, 11, start=57)
            later = await entries_until(ws, live[-1])
        return first, seen, missed + live, [e["id"] for e in replayed + later]

    first, seen, expected, received = run(scenario())
    assert seen == first
    assert received == expected  # every missed entry once, in order, then live without a gap


def test_replay_then_live_hand_over_has_no_gap_and_no_duplicate_under_load(
    asgi_server, cookies, r: redis.Redis, redis_server, settings
) -> None:
    """Clients join with ``after`` while a producer writes: each gets exactly the entries after it."""
    settings.BUSCONSOLE_TAIL_REPLAY_MAX = 100_000
    key = b"busy"
    produced: list[str] = []
    pause = threading.Event()  # never set: its wait() spreads the writes over the joins

    def produce() -> None:
        client = redis.Redis.from_url(redis_server.url(0))
        for batch in range(150):
            pipe = client.pipeline(transaction=False)
            for i in range(10):
                pipe.xadd(key, {"n": str(batch * 10 + i)})
            produced.extend(x.decode() for x in pipe.execute())
            pause.wait(0.004)
        produced.append(client.xadd(key, {"n": "end"}).decode())
        client.close()

    async def one_client(after: str) -> list[str]:
        async with open_tail(asgi_server, cookies, key, after=after) as ws:
            got: list[dict[str, Any]] = []
            while not (got and got[-1]["fields"]["n"] == "end"):
                got.extend(entries_of([await frame(ws)]))
            return [e["id"] for e in got]

    async def scenario() -> list[tuple[str, list[str]]]:
        first = r.xadd(key, {"n": "start"}).decode()
        producer = threading.Thread(target=produce)
        producer.start()
        tasks = []
        for _ in range(12):
            after = produced[len(produced) // 2] if produced else first
            tasks.append((after, asyncio.ensure_future(one_client(after))))
            await asyncio.sleep(0.05)
        await asyncio.to_thread(producer.join)
        return [(after, await task) for after, task in tasks]

    results = run(scenario())
    everything = [x.decode() for x, _ in r.xrange(key)]
    assert len(everything) == 1502
    for after, got in results:
        assert got == everything[everything.index(after) + 1 :], after


def test_replay_is_bounded_and_reports_what_it_left_out(asgi_server, cookies, r: redis.Redis, settings) -> None:
    settings.BUSCONSOLE_TAIL_REPLAY_MAX = 10
    key = b"replay-limit"
    ids = xadd_many(r, key, 26)

    async def scenario() -> list[dict[str, Any]]:
        async with open_tail(asgi_server, cookies, key, after=ids[0]) as ws:
            return await until_live(ws)

    frames = run(scenario())
    skipped = [f for f in frames if f["type"] == "skipped"]
    assert skipped == [{"type": "skipped", "count": None, "resume_after": ids[0], "last_skipped": ids[15],
                        "reason": "replay_limit"}]
    assert [e["id"] for e in entries_of(frames)] == ids[16:]  # the newest 10, oldest first
