"""Tail frames written straight to a client's socket: one websocket frame per batch, shared by every client.

Why. A tail's cost is per client and per frame, not per entry read: at 100 clients x 200 entries/s the
ASGI path (``send_json``/``send`` -> Channels' session wrapper -> uvicorn's ``asgi_send`` -> the
websockets protocol, which frames and UTF-8-encodes the text again for every client, then ``drain``)
cost tens of microseconds of Python per client and frame (docs/performance.md#figures-behind-the-design), plus a task wake-up per
client, and kept a core busy. A
server-to-client websocket frame without extensions is never masked, so the bytes
on the wire are the same for every client of a stream: :func:`text_frame` builds them once per batch
and :class:`DirectSocket` hands that one ``bytes`` object to each client's transport. What is left per
client is a reference and a ``transport.write``.

When. Only while nothing can reorder or overflow: the socket is open, the client negotiated no
extension (permessage-deflate compresses per client, with per-client state: those clients keep the ASGI
path), and the transport's write buffer is below :data:`BUFFER_MAX` (a client that does not read falls
back to the hub's bounded queue, and so to ``skipped`` frames: memory stays bounded). The hub decides
the rest (:class:`streams_app.live.hub.Subscription`).

How it finds the socket. ASGI offers no "write these bytes" extension, so :class:`ServerSendMiddleware`
(the outermost websocket middleware in ``busconsole/asgi.py``) keeps the server's own ``send`` in the
scope, and :func:`direct_socket` recognises uvicorn's websockets implementation (the ``--ws websockets``
that ``make run`` and the Dockerfile use) by its class and takes the protocol's transport. Any other
server (daphne, hypercorn) gets ``None`` and the ASGI path: slower, same frames.

What is private. None of this is uvicorn's public API: the class
``uvicorn.protocols.websockets.websockets_impl.WebSocketProtocol``, that the ``send`` it gives the app is
its coroutine method ``asgi_send`` (so ``send.__self__`` is the protocol), and the protocol's attributes
``transport`` (``write``, ``is_closing``, ``get_write_buffer_size``), ``extensions`` (a list) and
``state`` (a ``websockets.protocol.State``), which come from websockets' legacy protocol it extends.
:func:`internals_problem` checks each by name and shape: the class's part at start-up (the app's
``ready``: uvicorn loads its websocket implementation before the app), the connection's part on the first
connection of each protocol class, remembered for the process. When one is missing or changed (uvicorn
has announced that ``--ws websockets`` will move to another implementation; ``--ws wsproto`` is another
one already), one WARNING names it with uvicorn's version, and every tail of the process gets its frames
through the consumer's own ``send``: every entry still arrives, in order, at the cost measured above.
``tests/console/live/test_wire_internals.py`` fails by name when the pinned uvicorn changes them.
"""

from __future__ import annotations

import inspect
import logging
import sys
from collections.abc import Mapping
from typing import Any

from websockets.protocol import State

log = logging.getLogger(__name__)

#: Above this many bytes waiting in a client's socket buffer, its frames go through the hub's queue.
BUFFER_MAX = 256 * 1024
#: The scope key under which :class:`ServerSendMiddleware` keeps the server's ``send``.
SCOPE_KEY = "busconsole.server_send"
#: uvicorn's websockets implementation, whose protocol's transport the shared frames are written to.
IMPL = "uvicorn.protocols.websockets.websockets_impl"
#: What the shared frames call on a protocol's transport.
_TRANSPORT_CALLS = ("write", "is_closing", "get_write_buffer_size")


def text_frame(text: str) -> bytes:
    """A final, unmasked websocket text frame carrying ``text`` (opcode 0x1; a 7-bit, 16-bit or 64-bit
    length after it)."""
    payload = text.encode("utf-8")
    n = len(payload)
    if n < 126:
        head = bytes((0x81, n))
    elif n < 1 << 16:
        head = bytes((0x81, 126)) + n.to_bytes(2, "big")
    else:
        head = bytes((0x81, 127)) + n.to_bytes(8, "big")
    return head + payload


class ServerSendMiddleware:
    """Keep the ASGI server's ``send`` in the scope, for :func:`direct_socket` (Channels wraps ``send``)."""

    def __init__(self, inner: Any) -> None:
        self.inner = inner

    async def __call__(self, scope: dict[str, Any], receive: Any, send: Any) -> Any:
        return await self.inner({**scope, SCOPE_KEY: send}, receive, send)


class DirectSocket:
    """Write pre-built frames to one open websocket; :meth:`ready` says whether it may be written now."""

    __slots__ = ("_protocol", "_transport")

    def __init__(self, protocol: Any) -> None:
        self._protocol = protocol
        self._transport = protocol.transport

    def ready(self) -> bool:
        """Open, and not holding more than :data:`BUFFER_MAX` bytes the client has yet to read."""
        transport = self._transport
        return (
            self._protocol.state is State.OPEN
            and not transport.is_closing()
            and transport.get_write_buffer_size() <= BUFFER_MAX
        )

    def write(self, frame: bytes) -> None:
        self._transport.write(frame)


def internals_problem(impl: Any, protocol: Any = None, send: Any = None) -> str | None:
    """What of uvicorn's websockets implementation ``impl`` (the module) the shared frames rely on is
    missing or changed, or None when all is there; given a connection's ``protocol`` and the ``send``
    uvicorn gave the app, those are checked too. Pure: a test can hand in objects that lack something."""
    if impl is None:
        return f"{IMPL} is not loaded"
    cls = getattr(impl, "WebSocketProtocol", None)
    if not isinstance(cls, type):
        return f"{IMPL}.WebSocketProtocol is gone"
    asgi_send = inspect.getattr_static(cls, "asgi_send", None)
    if not inspect.iscoroutinefunction(asgi_send):
        return "WebSocketProtocol.asgi_send is not a coroutine function"
    if list(inspect.signature(asgi_send).parameters) != ["self", "message"]:
        return f"WebSocketProtocol.asgi_send takes {inspect.signature(asgi_send)}, not (self, message)"
    if protocol is None:
        return None
    if not isinstance(protocol, cls):
        kind = type(protocol)
        return f"this websocket is served by {kind.__module__}.{kind.__qualname__}, not {IMPL}.WebSocketProtocol"
    if getattr(send, "__func__", None) is not asgi_send or getattr(send, "__self__", None) is not protocol:
        return "the server's send is not WebSocketProtocol.asgi_send of the connection's protocol"
    transport = getattr(protocol, "transport", None)
    for call in _TRANSPORT_CALLS:
        if not callable(getattr(transport, call, None)):
            return f"WebSocketProtocol.transport.{call} is gone"
    if not isinstance(getattr(protocol, "extensions", None), list):
        return "WebSocketProtocol.extensions is not a list"
    if not isinstance(getattr(protocol, "state", None), State):
        return "WebSocketProtocol.state is not a websockets.protocol.State"
    return None


#: The verdict of :func:`internals_problem` per protocol class, from its first connection.
_verdicts: dict[type, str | None] = {}
#: The problems already logged (one line each per process).
_warned: set[str] = set()


def _warn(problem: str) -> None:
    if problem not in _warned:
        _warned.add(problem)
        uvicorn = sys.modules.get("uvicorn")
        log.warning(
            "tail shared frames off (uvicorn %s): %s; tails send through the websocket consumer",
            getattr(uvicorn, "__version__", "not loaded"),
            problem,
        )


def internals_check() -> str | None:
    """At start-up: the class's part of :func:`internals_problem` when uvicorn's websockets implementation
    is loaded (None, with nothing to say, under any other server), with its WARNING."""
    impl = sys.modules.get(IMPL)
    problem = internals_problem(impl) if impl is not None else None
    if problem is not None:
        _warn(problem)
    return problem


def verdicts() -> dict[type, str | None]:
    """The protocol classes seen so far and what :func:`internals_problem` found on each (None: all there)."""
    return dict(_verdicts)


def verdicts_forget() -> None:
    """Check again on the next connection, and log again (for tests that change an internal)."""
    _verdicts.clear()
    _warned.clear()


def direct_socket(scope: Mapping[str, Any]) -> DirectSocket | None:
    """The client's socket for shared frames, or None (another server, a changed uvicorn, or an extension
    was negotiated).

    Call it once the handshake is over (after the first frame was sent): extensions are known then.
    """
    send = scope.get(SCOPE_KEY)
    protocol = getattr(send, "__self__", None)
    if protocol is None or not type(protocol).__module__.startswith("uvicorn."):
        return None  # another server: nothing of uvicorn's to check
    if hasattr(protocol, "transport") and protocol.transport is None:
        return None  # not connected (yet, or any more): nothing to check it by
    kind = type(protocol)
    if kind not in _verdicts:
        # Looked up, not imported: a uvicorn serving websockets otherwise has not loaded it (and
        # importing it would load websockets' deprecated legacy package for nothing).
        _verdicts[kind] = internals_problem(sys.modules.get(IMPL), protocol, send)
    problem = _verdicts[kind]
    if problem is not None:
        _warn(problem)
        return None
    if protocol.extensions:
        return None
    return DirectSocket(protocol)
