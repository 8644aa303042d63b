"""Clients that keep up share one encoded frame per batch; the others still get every entry, in order.

Real uvicorn (``--ws websockets``, as ``make run`` serves) and redis-server. Raw-socket clients see the
frames exactly as they travel; expected IDs come from XADD's replies, expected values from the test's
own payloads, and the masked form from the rule's documented output. The hub's stats are read only for
what a client cannot tell (that frames were written directly).
"""

from __future__ import annotations

import contextlib
import json
import socket
import subprocess
import sys
from typing import Any

import redis
from websockets.asyncio.client import connect

from streams_app.live.broadcast import stream_changed
from streams_app.masking.models import MaskRule
from tests.console.celery_procs import celery_env
from tests.console.live.helpers import (
    RawClient,
    cookie_header,
    entries_until,
    hub_stats,
    run,
    tail_url,
    until_live,
    xadd_many,
)
from tests.polling import wait_for
from tests.servers import REPO, free_port


def read_until(client: RawClient, last_id: str) -> list[bytes]:
    """The text frames a raw client receives up to the one holding ``last_id``, as bytes."""
    out: list[bytes] = []
    for _ in range(100_000):
        opcode, payload = client.raw_frame()
        if opcode != 0x1:
            continue
        out.append(payload)
        if last_id in entry_ids([payload]):
            return out
    raise AssertionError("the last entry never came")


def entry_ids(frames: list[bytes]) -> list[str]:
    out: list[str] = []
    for payload in frames:
        message = json.loads(payload)
        if message["type"] == "entry":
            out.append(message["id"])
        elif message["type"] == "entries":
            out += [e["id"] for e in message["entries"]]
    return out


def live(client: RawClient) -> dict[str, Any]:
    f = client.frame()
    assert f is not None and f["type"] == "status" and f["state"] == "live", f
    return f


def test_clients_that_keep_up_get_byte_identical_masked_frames(asgi_server, cookies, r: redis.Redis) -> None:
    MaskRule.objects.create(stream_glob="shared*", field_path="data.email", action="mask")
    key = b"shared"
    clients = [RawClient(asgi_server, cookies, key) for _ in range(8)]
    try:
        for client in clients:
            live(client)
        ids: list[str] = []
        for i in range(40):  # one XADD at a time: many small batches, each shared by all eight
            ids.append(
                r.xadd(key, {"n": str(i), "data": json.dumps({"email": f"user{i}@example.com"})}).decode()
            )
        received = [read_until(client, ids[-1]) for client in clients]
        stats = hub_stats()["default"]
    finally:
        for client in clients:
            client.close()
    assert entry_ids(received[0]) == ids
    for other in received[1:]:
        assert other == received[0]  # the same bytes, frame for frame
    text = b"".join(received[0]).decode()
    assert "@example.com" not in text  # masked once, for everyone
    first = json.loads(received[0][0])
    entry = first if first["type"] == "entry" else first["entries"][0]
    assert json.loads(entry["fields"]["data"]) == {"email": "••••"} and entry["fields"]["n"] == "0"
    assert stats["direct_frames"] >= len(received[0]) * len(clients)


def test_a_deflate_client_gets_the_same_entries_through_the_asgi_path(
    asgi_server, cookies, r: redis.Redis
) -> None:
    """permessage-deflate compresses per client: that client cannot share bytes, but gets every entry."""
    key = b"deflated"

    async def scenario() -> tuple[list[str], list[str], list[str]]:
        plain = RawClient(asgi_server, cookies, key)
        try:
            async with connect(
                tail_url(asgi_server, key),
                origin=asgi_server.url,
                compression="deflate",
                additional_headers={"Cookie": cookie_header(cookies)},
                proxy=None,
            ) as ws:
                await until_live(ws)
                live(plain)
                ids = xadd_many(r, key, 30)
                got = [e["id"] for e in await entries_until(ws, ids[-1])]
                assert ws.protocol.extensions  # deflate was negotiated
                return ids, got, entry_ids(read_until(plain, ids[-1]))
        finally:
            plain.close()

    ids, deflated, plain = run(scenario())
    assert deflated == ids and plain == ids


class UvicornProcess:
    """``uvicorn busconsole.asgi:application`` as ``make run`` serves it, in a process of its own, on the
    test's database and Redis (so on the same channel layer as the in-process server)."""

    def __init__(self) -> None:
        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        self.process = subprocess.Popen(
            [
                sys.executable,
                "-m",
                "uvicorn",
                "busconsole.asgi:application",
                "--host",
                "127.0.0.1",
                "--port",
                str(self.port),
                "--ws",
                "websockets",
                "--ws-per-message-deflate",
                "false",
                "--lifespan",
                "off",
                "--log-level",
                "warning",
            ],
            cwd=REPO,
            env=celery_env(),
        )

        def listening() -> bool:
            assert self.process.poll() is None, "uvicorn exited"
            with (
                contextlib.suppress(OSError),
                socket.create_connection(("127.0.0.1", self.port), timeout=0.2),
            ):
                return True
            return False

        wait_for(listening, what="uvicorn to listen", timeout=30)

    def stop(self) -> None:
        self.process.terminate()
        try:
            self.process.wait(10)
        except subprocess.TimeoutExpired:
            self.process.kill()


def test_two_processes_behind_one_channel_layer_each_deliver(asgi_server, cookies, r: redis.Redis) -> None:
    """Each process has its own hub and reader; an operator event reaches the clients of both."""
    second = UvicornProcess()
    key = b"two-servers"
    try:
        clients = [RawClient(server, cookies, key) for server in (asgi_server, second) for _ in range(3)]
        try:
            for client in clients:
                live(client)

            def blocked_readers() -> list[dict] | None:
                found = [
                    c for c in r.client_list() if c["name"] == "busconsole-tail-reader" and c["cmd"] == "xread"
                ]
                return found if len(found) >= 2 else None

            # one blocked reader per process, whatever the clients; a process starts its reader with its
            # first subscriber, so the second may not have sent its first XREAD yet when all are live
            wait_for(blocked_readers, what="a tail reader blocked in each process", timeout=10)
            ids = xadd_many(r, key, 25)
            received = [entry_ids(read_until(client, ids[-1])) for client in clients]
            stream_changed("default", key, action="test", count=1)  # through the channel layer, to both
            changed = []
            for client in clients:
                for _ in range(100):
                    f = client.frame()
                    if f is not None and f["type"] == "changed":
                        changed.append(f)
                        break
        finally:
            for client in clients:
                client.close()
    finally:
        second.stop()
    assert all(got == ids for got in received)
    assert [(f["action"], f["count"]) for f in changed] == [("test", 1)] * len(clients)


def test_a_client_that_falls_behind_gets_skipped_while_the_others_share_frames(
    asgi_server, cookies, r: redis.Redis, settings
) -> None:
    settings.BUSCONSOLE_TAIL_QUEUE = 200  # the fast client is never more than one chunk (50) behind
    key = b"one-slow"
    slow = RawClient(asgi_server, cookies, key)
    try:
        live(slow)

        async def fast() -> tuple[list[str], list[str]]:
            async with connect(
                tail_url(asgi_server, key),
                origin=asgi_server.url,
                compression=None,
                additional_headers={"Cookie": cookie_header(cookies)},
                proxy=None,
                max_size=None,
            ) as ws:
                await until_live(ws)
                ids: list[str] = []
                got: list[str] = []
                for start in range(0, 1500, 50):  # ~6 MB for a client reading nothing
                    chunk = xadd_many(r, key, 50, start=start, size=4000)
                    ids += chunk
                    got += [e["id"] for e in await entries_until(ws, chunk[-1])]
                return ids, got

        ids, got = run(fast())
        frames: list[dict[str, Any]] = []
        for _ in range(100_000):
            f = slow.frame()
            if f is None:
                continue
            frames.append(f)
            seen = [f["last_skipped"]] if f["type"] == "skipped" else entry_ids([json.dumps(f).encode()])
            if ids[-1] in seen:
                break
    finally:
        slow.close()
    assert got == ids
    skips = [f for f in frames if f["type"] == "skipped"]
    assert skips and all(f["count"] > 0 for f in skips)
    slow_ids = entry_ids([json.dumps(f).encode() for f in frames if f["type"] != "skipped"])
    assert len(slow_ids) + sum(f["count"] for f in skips) == len(ids)
    assert slow_ids == [i for i in ids if i in set(slow_ids)]  # in order, no duplicate
