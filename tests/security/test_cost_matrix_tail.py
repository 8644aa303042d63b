"""The cost matrix, the live tail's row: hostile filters never hold the web process.

Each hostile expression of the matrix (nested comprehensions, huge literals, regex bombs, deep
nesting) is sent as a tail filter (``?filter=`` on the websocket) over a stream whose entries make it
as dear as they can. Each is either refused with a ``filter_error`` status frame that says why, or
runs; either way the socket stays open and takes a filter it can run, and ``/healthz`` answers
throughout (polled on its own connection for the whole scenario). The ones the issue names as
refusals (the 60-item fourfold ``exists``, 1,990 ``!``, 990 dotted levels) must be refused.

And the loop is shared, not held: a filter that is dear but allowed, replayed over 1,000 entries, is
evaluated in slices, so ``/healthz`` is answered, and the hub's own stats read on its loop, while the
replay is still being evaluated (the count of evaluations then is below the total). That is an
ordering, not a timing: nothing here asserts a duration (docs/performance.md#ratios-to-a-floor: speed is kept in ``bench/``);
the latencies seen are printed.

Real uvicorn and redis-server; expected entries are the IDs XADD returned.
"""

from __future__ import annotations

import asyncio
import json
import time
from typing import Any

import httpx
import pytest
import redis

from tests.conftest import session_cookie
from tests.console.live.helpers import (
    entries_of,
    filtered_through,
    frame,
    hub_stats,
    open_tail,
    run,
    until_live,
)

KEY = b"cost:tail"
L60 = "[" + ",".join(str(i) for i in range(60)) + "]"
L100 = "[" + ",".join(str(i) for i in range(100)) + "]"
L200 = "[" + ",".join(str(i) for i in range(200)) + "]"

REPLAYED = 300
REFUSED = "refused"
EITHER = "refused or bounded"

HOSTILE = [
    ("nested comprehensions over literals", f"{L60}.exists(v0,{L60}.exists(v1,{L60}.exists(v2,{L60}.exists(v3,false))))",
     REFUSED),
    ("nested comprehensions over the data", "data.items.exists(a, data.items.exists(b, data.items.exists(c, a == b)))",
     EITHER),
    ("huge literals, multiplied", f"{L200}.exists(a, {L200}.exists(b, a == b + data.n))", EITHER),
    ("huge string literal", 'data.s == "' + "x" * 1900 + '"', EITHER),
    ("string concatenation", " + ".join(["data.s"] * 40) + ' == "x"', EITHER),
    ("regex bomb", 'data.s.matches("(a+)+$")', EITHER),
    ("regex bomb, alternation", 'data.s.matches("((a|aa)+)+b$")', EITHER),
    ("regex too big", 'data.s.matches("a{1000}{1000}")', EITHER),
    ("deep nesting, negations", "!" * 1990 + "true", REFUSED),
    ("deep nesting, dotted levels", "a" + ".b" * 990 + " == 1", REFUSED),
    ("deep nesting, brackets", "(" * 900 + "true" + ")" * 900, EITHER),
]


def entry(i: int) -> dict[str, str]:
    """Dear for every row: long lists for comprehensions, a string that backtracking regexes choke on."""
    return {"type": "t", "data": json.dumps({"n": i, "s": "a" * 40 + "!", "items": list(range(60))})}


class Healthz:
    """``/healthz`` polled on its own connection while a scenario runs: every answer and its latency."""

    def __init__(self, server) -> None:
        self.server = server
        self.answers: list[tuple[int, float]] = []
        self.task: asyncio.Task[None] | None = None

    async def _poll(self) -> None:
        async with httpx.AsyncClient(base_url=self.server.url) as http:
            while True:
                began = time.perf_counter()
                reply = await http.get("/healthz")
                self.answers.append((reply.status_code, time.perf_counter() - began))
                await asyncio.sleep(0.05)

    def __enter__(self) -> Healthz:
        self.task = asyncio.get_running_loop().create_task(self._poll())
        return self

    def __exit__(self, *exc: object) -> None:
        assert self.task is not None
        self.task.cancel()


@pytest.mark.parametrize(("name", "text", "expected"), HOSTILE, ids=[row[0] for row in HOSTILE])
def test_a_hostile_filter_is_refused_or_bounded_and_the_socket_and_healthz_go_on(
    asgi_server, viewer, r: redis.Redis, name: str, text: str, expected: str
) -> None:
    cookies = session_cookie(viewer)
    for i in range(200):
        r.xadd(KEY, entry(i))

    async def scenario() -> tuple[dict[str, Any], list[str], str, list[tuple[int, float]]]:
        with Healthz(asgi_server) as healthz:
            async with open_tail(asgi_server, cookies, KEY, after="0-0", filter=text) as ws:
                first = await frame(ws)
                if first["state"] == "filter":
                    await until_live(ws)  # the 200 entries replayed through it
                    await ws.send(json.dumps({"type": "filter", "filter": "data.n >= 0"}))
                    while (await frame(ws)).get("state") != "filter":
                        pass
                else:  # refused: the same socket takes a filter it can run
                    await ws.send(json.dumps({"type": "filter", "filter": "data.n >= 0"}))
                    assert (await frame(ws))["state"] == "filter"
                await until_live(ws)
                fresh = r.xadd(KEY, entry(1000)).decode()
                got = [e["id"] for e in await filtered_through(ws, fresh)]
            await asyncio.sleep(0.1)  # one more /healthz after the socket closed
            return first, got, fresh, list(healthz.answers)

    first, got, fresh, answers = run(scenario())
    print(f"{name}: {first['state']} {first.get('message', '')[:120]!r}; /healthz answered {len(answers)} times, "
          f"slowest {max(t for _, t in answers) * 1000:.1f} ms")
    assert first["type"] == "status" and first["state"] in ("filter", "filter_error"), first
    if expected == REFUSED or first["state"] == "filter_error":
        assert first["state"] == "filter_error", f"{name} was not refused"
        assert first["filter"] == text and len(first["message"]) > 20  # says why, in words
    assert got == [fresh]  # the socket is alive and tails with the filter it was given next
    assert answers and all(status == 200 for status, _ in answers)


@pytest.mark.slow
def test_a_dear_filter_is_evaluated_in_slices_so_the_loop_answers_meanwhile(
    asgi_server, viewer, r: redis.Redis, settings
) -> None:
    """Allowed but dear (10,000 iterations an entry, a few ms of CEL), replayed over 300 entries: while
    that runs, ``/healthz`` is answered and the hub's stats are read on the loop, mid-evaluation."""
    settings.BUSCONSOLE_TAIL_REPLAY_MAX = REPLAYED
    dear = f"{L100}.exists(a, {L100}.exists(b, a * b == data.n + 1000000))"  # never true: all evaluated
    cookies = session_cookie(viewer)
    pipe = r.pipeline(transaction=False)
    for i in range(REPLAYED):
        pipe.xadd(KEY, entry(i))
    pipe.execute()

    async def scenario() -> tuple[int, list[dict[str, Any]], float]:
        async with open_tail(asgi_server, cookies, KEY, after="0-0", filter=dear) as ws:
            assert (await frame(ws))["state"] == "filter"
            assert (await frame(ws))["state"] == "replaying"  # the replay's evaluation starts now
            async with httpx.AsyncClient(base_url=asgi_server.url) as http:
                began = time.perf_counter()
                assert (await http.get("/healthz")).status_code == 200
                latency = time.perf_counter() - began
            during = (await asyncio.to_thread(hub_stats))["default"]["filter_evaluations"]
            rest = await until_live(ws)
            return during, rest, latency

    during, rest, latency = run(scenario())
    print(f"/healthz answered in {latency * 1000:.1f} ms with {during} of {REPLAYED} entries evaluated")
    assert during < REPLAYED  # answered, and the stats read, while the replay was still being evaluated
    assert entries_of(rest) == []
    assert hub_stats()["default"]["filter_evaluations"] == REPLAYED
