"""The live tail over a real websocket: uvicorn serving busconsole's ASGI app, a real redis-server.

What is checked, and against what: entry IDs come from Redis's own XADD replies (never from the code
under test); connection counts from the server's CLIENT LIST; command counts from INFO commandstats.
Nothing is timed: loops are bounded by frame counts, and a generous ``asyncio.timeout`` only turns a
hang into a failure.
"""

from __future__ import annotations

import asyncio
import base64
import json
import os
import socket
import threading
from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any
from urllib.parse import quote, urlsplit

import pytest
import redis
from channels.layers import BaseChannelLayer
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from streams_app.live import broadcast
from streams_app.live.groups import group_name, job_group, stream_group
from streams_app.live.hub import running_hubs
from tests.conftest import session_cookie

HANG = 60  # seconds before a stuck scenario fails (a safety net, not an assertion on speed)
ENTRY_TYPES = ("entry", "entries")


# --------------------------------------------------------------------------------------- helpers


def tail_url(server, key: bytes, *, conn: str = "default", after: str | None = None) -> str:
    url = f"ws://127.0.0.1:{server.port}/ws/c/{conn}/streams/{quote(key, safe='')}/tail/"
    return url + (f"?after={after}" if after is not None else "")


def cookie_header(cookies: dict[str, str]) -> str:
    return "; ".join(f"{k}={v}" for k, v in cookies.items())


@asynccontextmanager
async def open_tail(server, cookies: dict[str, str] | None, key: bytes, *, after: str | None = None,
                    origin: str | None = None, conn: str = "default") -> AsyncIterator[ClientConnection]:
    headers = {"Cookie": cookie_header(cookies)} if cookies else {}
    async with connect(
        tail_url(server, key, conn=conn, after=after), origin=origin or server.url, additional_headers=headers,
        proxy=None, max_size=None, compression=None,
    ) as ws:
        yield ws


async def frame(ws: ClientConnection) -> dict[str, Any]:
    return json.loads(await ws.recv())


async def until_live(ws: ClientConnection) -> list[dict[str, Any]]:
    """Frames up to and including the ``live`` status (replayed entries, skipped notes...)."""
    seen = []
    for _ in range(100_000):
        f = await frame(ws)
        seen.append(f)
        if f["type"] == "status" and f["state"] == "live":
            return seen
    raise AssertionError("no live status")


def entries_of(frames: list[dict[str, Any]]) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for f in frames:
        if f["type"] == "entry":
            out.append(f)
        elif f["type"] == "entries":
            out.extend(f["entries"])
    return out


async def entries_until(ws: ClientConnection, last_id: str, *, frames: list | None = None) -> list[dict[str, Any]]:
    """Entries received until the one with ``last_id`` (IDs from XADD, so the stop is independent)."""
    got: list[dict[str, Any]] = []
    for _ in range(100_000):
        f = await frame(ws)
        if frames is not None:
            frames.append(f)
        got.extend(entries_of([f]))
        if got and got[-1]["id"] == last_id:
            return got
    raise AssertionError("the last entry never came")


def xadd_many(r: redis.Redis, key: bytes, n: int, *, start: int = 0, size: int = 0) -> list[str]:
    pipe = r.pipeline(transaction=False)
    for i in range(start, start + n):
        pipe.xadd(key, {"n": str(i), "data": json.dumps({"i": i, "pad": "x" * size})})
    return [entry_id.decode() for entry_id in pipe.execute()]


def hub_stats() -> dict[str, Any]:
    """Stats of the live server's hub, read on its own event loop (it runs in another thread)."""
    out: dict[str, Any] = {}
    for loop, hub in running_hubs():
        if loop.is_running():

            async def snapshot(h=hub) -> dict[str, Any]:
                return h.stats()

            out.update(asyncio.run_coroutine_threadsafe(snapshot(), loop).result(10))
    return out


def tail_connections(r: redis.Redis, *, ignore: set[int] = frozenset()) -> list[dict[str, Any]]:
    return [c for c in r.client_list() if c["name"].startswith("busconsole-tail") and int(c["id"]) not in ignore]


async def reader_settled(r: redis.Redis, ignore: set[int]) -> list[dict[str, Any]]:
    """The tail connections once the reader is blocked in XREAD (it starts in the background)."""
    for _ in range(500):  # bounded polling; nothing here asserts on time
        conns = tail_connections(r, ignore=ignore)
        if any(c["name"] == "busconsole-tail-reader" and c["cmd"] == "xread" for c in conns):
            return conns
        await asyncio.sleep(0.02)
    raise AssertionError("the reader never blocked in XREAD")


def run(coro) -> Any:
    return asyncio.run(asyncio.wait_for(coro, HANG))


@pytest.fixture
def cookies(viewer) -> dict[str, str]:
    return session_cookie(viewer)


# ------------------------------------------------------------------------------------ delivery


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


# ------------------------------------------------------------------------------ shared reader


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


# ------------------------------------------------------------------------------- backpressure


class SlowClient:
    """A websocket client on a raw socket with a tiny receive buffer that reads nothing until told."""

    def __init__(self, server, cookies: dict[str, str], key: bytes) -> None:
        self.sock = socket.socket()
        self.sock.setsockopt(socket.SOL_SOCKET, socket.SO_RCVBUF, 4096)
        self.sock.connect(("127.0.0.1", server.port))
        path = urlsplit(tail_url(server, key)).path
        nonce = base64.b64encode(os.urandom(16)).decode()
        request = (
            f"GET {path} HTTP/1.1\r\nHost: 127.0.0.1:{server.port}\r\nUpgrade: websocket\r\nConnection: Upgrade\r\n"
            f"Sec-WebSocket-Key: {nonce}\r\nSec-WebSocket-Version: 13\r\nOrigin: {server.url}\r\n"
            f"Cookie: {cookie_header(cookies)}\r\n\r\n"
        )
        self.sock.sendall(request.encode())
        self.buffer = b""
        while b"\r\n\r\n" not in self.buffer:
            self.buffer += self.sock.recv(4096)
        head, self.buffer = self.buffer.split(b"\r\n\r\n", 1)
        assert head.startswith(b"HTTP/1.1 101"), head

    def _read(self, n: int) -> bytes:
        while len(self.buffer) < n:
            chunk = self.sock.recv(65536)
            if not chunk:
                raise ConnectionError("closed")
            self.buffer += chunk
        data, self.buffer = self.buffer[:n], self.buffer[n:]
        return data

    def frame(self) -> dict[str, Any] | None:
        """The next text frame as JSON (control frames are skipped: returns None)."""
        b0, b1 = self._read(2)
        length = b1 & 0x7F
        if length == 126:
            length = int.from_bytes(self._read(2), "big")
        elif length == 127:
            length = int.from_bytes(self._read(8), "big")
        payload = self._read(length)
        return json.loads(payload) if b0 & 0x0F == 0x1 else None

    def close(self) -> None:
        self.sock.close()


def test_a_slow_client_is_skipped_ahead_and_queues_stay_bounded(
    asgi_server, cookies, r: redis.Redis, settings
) -> None:
    settings.BUSCONSOLE_TAIL_QUEUE = capacity = 200
    key = b"firehose"
    slow = SlowClient(asgi_server, cookies, key)
    try:
        assert slow.frame() == {"type": "status", "state": "live", "last_id": "0-0"}

        async def fast_reader() -> tuple[list[str], list[str], dict[str, Any]]:
            async with open_tail(asgi_server, cookies, key) as ws:
                await until_live(ws)
                ids: list[str] = []
                got: list[str] = []
                # ~12 MB of frames for a client that reads nothing; this one reads each chunk of 100
                # before the next is written, so it is never more than 100 entries behind.
                for start in range(0, 3000, 100):
                    chunk = xadd_many(r, key, 100, start=start, size=4000)
                    ids += chunk
                    got += [e["id"] for e in await entries_until(ws, chunk[-1])]
                return ids, got, hub_stats()["default"]

        ids, fast_got, stats = run(fast_reader())
        assert fast_got == ids  # the slow client held nobody back
        assert stats["subscribers"] == 2
        assert stats["max_queued"] <= capacity and stats["queued"] <= capacity * 2  # never more than the bound
        assert stats["skipped"] > 0

        # Now read the slow client's socket: entries and skip notes account for every entry exactly.
        def pos(entry_id: str) -> int:
            return ids.index(entry_id) if entry_id in ids else -1

        received: list[str] = []
        skipped = 0
        expected_next = 0  # index in ids of the entry that must come next (after an entry or a gap)
        for _ in range(100_000):
            f = slow.frame()
            if f is None:
                continue
            if f["type"] == "skipped":
                assert f["resume_after"] == (received[-1] if received else "0-0")
                assert pos(f["last_skipped"]) == pos(f["resume_after"]) + f["count"]  # one contiguous gap
                skipped += f["count"]
                expected_next = pos(f["last_skipped"]) + 1
            else:
                for entry_id in (e["id"] for e in entries_of([f])):
                    assert pos(entry_id) == expected_next
                    received.append(entry_id)
                    expected_next += 1
            if received and received[-1] == ids[-1]:
                break
        assert skipped > 0
        assert len(received) + skipped == len(ids)
        assert received == sorted(set(received), key=ids.index)  # in order, no duplicate
    finally:
        slow.close()


def test_a_reader_that_stays_behind_jumps_to_the_newest_entry_and_says_so(
    asgi_server, cookies, r: redis.Redis, settings
) -> None:
    """An overloaded process (here: XREADs of 5 entries, no lag allowed) skips ahead instead of lagging."""
    settings.BUSCONSOLE_TAIL_QUEUE = 5
    settings.BUSCONSOLE_TAIL_MAX_LAG_MS = 0
    key = b"overload"

    async def scenario() -> tuple[list[str], list[dict[str, Any]]]:
        async with open_tail(asgi_server, cookies, key) as ws:
            await until_live(ws)
            ids = xadd_many(r, key, 200)
            frames: list[dict[str, Any]] = []
            for _ in range(10_000):
                f = await frame(ws)
                frames.append(f)
                if (f["type"] == "skipped" and f["last_skipped"] == ids[-1]) or ids[-1] in {
                    e["id"] for e in entries_of([f])
                }:
                    break  # everything written so far was received or announced as skipped
            ids.append(r.xadd(key, {"n": "after the jump"}).decode())
            await entries_until(ws, ids[-1], frames=frames)
            return ids, frames

    ids, frames = run(scenario())
    received: list[str] = []
    expected_next = 0
    for f in frames:
        if f["type"] == "skipped":
            assert f["resume_after"] == (received[-1] if received else "0-0")
            gap_end = ids.index(f["last_skipped"])
            if f["count"] is not None:
                assert gap_end == (ids.index(received[-1]) if received else -1) + f["count"]
            expected_next = gap_end + 1
        for entry_id in (e["id"] for e in entries_of([f])):
            assert ids.index(entry_id) == expected_next  # in order, and only gaps that were announced
            received.append(entry_id)
            expected_next += 1
    assert any(f["type"] == "skipped" and f.get("reason") == "lagging" for f in frames)
    assert received[-1] == ids[-1] and len(received) < len(ids)
    assert hub_stats()["default"]["jumps"] >= 1


# ---------------------------------------------------------------------------- refusals, errors


def test_anonymous_connections_are_closed_with_4401(asgi_server, r: redis.Redis) -> None:
    async def scenario() -> int | None:
        async with open_tail(asgi_server, None, b"orders") as ws:
            with pytest.raises(ConnectionClosed) as closed:
                await ws.recv()
            return closed.value.rcvd.code

    assert run(scenario()) == 4401


def test_cross_origin_upgrades_are_rejected(asgi_server, cookies, r: redis.Redis) -> None:
    async def scenario(origin: str) -> int:
        with pytest.raises(InvalidStatus) as refused:
            async with open_tail(asgi_server, cookies, b"orders", origin=origin):
                pass
        return refused.value.response.status_code

    assert run(scenario("http://evil.example")) == 403
    assert run(scenario(f"http://127.0.0.1.evil.example:{asgi_server.port}")) == 403


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


# ------------------------------------------------------------------------ channel-layer events


def test_operator_actions_and_job_progress_reach_open_tails(asgi_server, cookies, r: redis.Redis) -> None:
    key = b"orders:dlq"

    async def scenario() -> list[dict[str, Any]]:
        async with open_tail(asgi_server, cookies, key) as ws:
            await until_live(ws)
            await asyncio.to_thread(broadcast.stream_changed, "default", key, action="requeue", count=3, who=b"otto")
            await asyncio.to_thread(broadcast.job_progress, 42, state="running", done=10, total=30,
                                    kind="requeue_all", conn="default", key=key)
            return [await frame(ws), await frame(ws)]

    changed, job = run(scenario())
    assert changed == {"type": "changed", "action": "requeue", "count": 3, "who": "otto", "conn": "default",
                       "key": "orders:dlq"}
    assert job == {"type": "job", "id": 42, "kind": "requeue_all", "state": "running", "done": 10, "total": 30,
                   "error": None, "conn": "default", "key": "orders:dlq"}


def test_broadcast_never_raises(settings) -> None:
    settings.CHANNEL_LAYERS = {"default": {"BACKEND": "channels_redis.core.RedisChannelLayer",
                                           "CONFIG": {"hosts": ["redis://127.0.0.1:1/0"]}}}
    from channels.layers import channel_layers

    channel_layers.backends.clear()
    try:
        broadcast.stream_changed("default", b"x", action="ack")
        broadcast.job_progress(1, state="done")
    finally:
        channel_layers.backends.clear()


@pytest.mark.parametrize(
    "key",
    [b"orders:created", b"", b"a" * 500, b"\xff\x00/%.. spaces and \xe2\x82\xac", "é".encode() * 200],
)
def test_group_names_are_valid_for_any_key(key: bytes) -> None:
    name = stream_group("default", key)
    assert BaseChannelLayer().require_valid_group_name(name)
    assert len(name) < 100


def test_group_names_do_not_collide() -> None:
    names = {
        stream_group("default", b"a:b"), stream_group("default", b"a;b"), stream_group("default", b"a_b"),
        stream_group("defaul", b"ta:b"), stream_group("default", b"x" * 300), stream_group("default", b"x" * 301),
        group_name("stream", "default.a", "b"), group_name("stream", "default", "a.b"), job_group(1), job_group("1 "),
    }
    assert len(names) == 10
    assert stream_group("default", b"orders:created").startswith("stream.default.orders_created.")


# ------------------------------------------------------------------------------------- the page


def test_the_tail_page_needs_a_login_and_points_at_the_websocket(client, viewer_client, r: redis.Redis) -> None:
    ids = xadd_many(r, b"orders:eu", 60)
    url = "/c/default/streams/orders%3Aeu/tail/"
    assert client.get(url).status_code == 302
    page = viewer_client.get(url)
    assert page.status_code == 200
    html = page.content.decode()
    assert 'data-ws-path="/ws/c/default/streams/orders%3Aeu/tail/"' in html
    assert f'data-after="{ids[9]}"' in html  # the newest 50 are replayed when the page opens
    assert "js/tail.js" in html
    missing = viewer_client.get("/c/default/streams/nothing-yet/tail/")
    assert missing.status_code == 200 and 'data-after="0-0"' in missing.content.decode()
    assert 'href="tail/"' in viewer_client.get("/c/default/streams/orders%3Aeu/").content.decode()
