"""The uvicorn internals the tail's shared frames are written through are checked, and without them the
tail still delivers every entry, through the websocket consumer's own ``send``.

The pinned uvicorn must pass the check, on a real connection of the real server (an upgrade that changes
one fails here, naming it). A changed internal is simulated on the real module (``WebSocketProtocol`` no
longer where the check looks: the running server keeps the class it loaded) or by checking a protocol that
lacks one attribute. Expected IDs come from XADD's replies, values from the test's own payloads.
"""

from __future__ import annotations

import json
import logging
import os
import subprocess
import sys
from collections.abc import Iterator
from typing import Any

import pytest
import redis
import uvicorn
import uvicorn.protocols.websockets.websockets_impl as impl
from websockets.protocol import State

from streams_app.live import wire
from tests.console.live.helpers import RawClient, hub_stats, xadd_many
from tests.console.live.test_tail_shared_frames import entry_ids, live, read_until
from tests.servers import REPO


@pytest.fixture
def fresh() -> Iterator[None]:
    wire.verdicts_forget()
    yield
    wire.verdicts_forget()


def _tail(asgi_server, cookies: dict[str, str], r: redis.Redis, key: bytes, clients: int) -> tuple[list[str], list[list[bytes]], dict[str, Any]]:
    """XADD 30 entries to ``key`` while ``clients`` raw clients tail it: the IDs, each client's text frames
    up to the last one, and the hub's stats read before the clients leave."""
    tails = [RawClient(asgi_server, cookies, key) for _ in range(clients)]
    try:
        for tail in tails:
            live(tail)
        ids = xadd_many(r, key, 30)
        received = [read_until(tail, ids[-1]) for tail in tails]
        stats = hub_stats()["default"]
    finally:
        for tail in tails:
            tail.close()
    return ids, received, stats


def test_the_internals_written_to_are_there_on_the_pinned_uvicorn(asgi_server, cookies, r: redis.Redis, fresh) -> None:
    problem = wire.internals_problem(impl)
    assert problem is None, f"uvicorn {uvicorn.__version__} changed what live/wire.py writes through: {problem}"
    ids, received, stats = _tail(asgi_server, cookies, r, b"pinned", 2)
    verdicts = wire.verdicts()
    assert verdicts == {impl.WebSocketProtocol: None}, (
        f"uvicorn {uvicorn.__version__} changed what live/wire.py writes through: {verdicts}"
    )
    assert all(entry_ids(frames) == ids for frames in received)
    assert stats["direct_frames"] > 0  # the shared frames did go straight to the sockets


class _Transport:
    """The three calls the shared frames make on a transport."""

    def write(self, data: bytes) -> None: ...
    def is_closing(self) -> bool: return False
    def get_write_buffer_size(self) -> int: return 0


def _protocol(**leave_out: bool) -> Any:
    """A WebSocketProtocol as the check sees it on an open connection, without the attributes named."""
    protocol = impl.WebSocketProtocol.__new__(impl.WebSocketProtocol)  # its __init__ wants a server
    attrs = {"transport": _Transport(), "extensions": [], "state": State.OPEN}
    for name, value in attrs.items():
        if not leave_out.get(name):
            setattr(protocol, name, value)
    return protocol


class _NoGetWriteBufferSize:
    def write(self, data: bytes) -> None: ...
    def is_closing(self) -> bool: return False


def test_a_changed_internal_is_named() -> None:
    protocol = _protocol()
    assert wire.internals_problem(impl, protocol, protocol.asgi_send) is None  # the stand-in is complete
    cases = [
        (wire.internals_problem(type("impl", (), {})), "websockets_impl.WebSocketProtocol is gone"),
        (wire.internals_problem(None), "websockets_impl is not loaded"),
        (wire.internals_problem(type("impl", (), {"WebSocketProtocol": type("WebSocketProtocol", (), {
            "asgi_send": lambda self, message: None})})), "WebSocketProtocol.asgi_send is not a coroutine function"),
        (wire.internals_problem(impl, protocol, lambda message: None), "send is not WebSocketProtocol.asgi_send"),
        (wire.internals_problem(impl, object(), None), "served by builtins.object"),
        (wire.internals_problem(impl, p := _protocol(transport=True), p.asgi_send), "WebSocketProtocol.transport.write"),
        (wire.internals_problem(impl, p := _protocol(extensions=True), p.asgi_send), "WebSocketProtocol.extensions"),
        (wire.internals_problem(impl, p := _protocol(state=True), p.asgi_send), "WebSocketProtocol.state"),
    ]
    old = _protocol()
    old.transport = _NoGetWriteBufferSize()
    cases.append((wire.internals_problem(impl, old, old.asgi_send), "transport.get_write_buffer_size"))
    for problem, named in cases:
        assert problem is not None and named in problem, (problem, named)


def test_with_an_internal_gone_the_tail_delivers_through_the_consumers_send(
    asgi_server, cookies, r: redis.Redis, fresh, monkeypatch: pytest.MonkeyPatch, caplog: pytest.LogCaptureFixture
) -> None:
    monkeypatch.delattr(impl, "WebSocketProtocol")  # as if uvicorn had renamed or moved it
    with caplog.at_level(logging.WARNING, logger="streams_app.live.wire"):
        ids, received, stats = _tail(asgi_server, cookies, r, b"fenced", 3)
    warnings = [rec.getMessage() for rec in caplog.records if rec.name == "streams_app.live.wire"]
    assert len(warnings) == 1, warnings  # once per process, not per client
    assert "WebSocketProtocol is gone" in warnings[0] and f"uvicorn {uvicorn.__version__}" in warnings[0]
    assert stats["direct_frames"] == 0  # nothing written past the consumer's send
    for frames in received:
        assert entry_ids(frames) == ids
        values = [
            json.loads(e["fields"]["data"])["i"]
            for f in map(json.loads, frames) if f["type"] in ("entry", "entries")
            for e in ([f] if f["type"] == "entry" else f["entries"])
        ]
        assert values == list(range(30))


_STARTUP = """
import django
import uvicorn.protocols.websockets.websockets_impl as impl  # as `uvicorn --ws websockets` loads it first
del impl.WebSocketProtocol
django.setup()
"""


def test_a_changed_internal_is_logged_at_start_up() -> None:
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "busconsole.settings"}
    done = subprocess.run([sys.executable, "-c", _STARTUP], cwd=REPO, env=env, capture_output=True, text=True,
                          timeout=120, check=False)
    assert done.returncode == 0, done.stderr[-3000:]
    lines = [line for line in done.stderr.splitlines() if "streams_app.live.wire" in line]
    assert len(lines) == 1 and "WARNING" in lines[0] and "WebSocketProtocol is gone" in lines[0], done.stderr[-3000:]
    assert f"uvicorn {uvicorn.__version__}" in lines[0]
