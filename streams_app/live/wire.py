"""Tail frames written straight to a client's socket: one websocket frame per batch, shared by every client.

Why. A tail's cost is per client and per frame, not per entry read: at 100 clients x 200 entries/s the
ASGI path (``send_json``/``send`` -> Channels' session wrapper -> uvicorn's ``asgi_send`` -> the
websockets protocol, which frames and UTF-8-encodes the text again for every client, then ``drain``)
cost ~40 us of Python per client and frame, plus a task wake-up per client, and kept a core busy. A
server-to-client websocket frame without extensions is unmasked (RFC 6455, section 5.1), so the bytes
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
server (daphne, ``--ws wsproto``) gets ``None`` and the ASGI path: slower, same frames.
"""

from __future__ import annotations

import sys
from typing import Any

from websockets.protocol import State

#: Above this many bytes waiting in a client's socket buffer, its frames go through the hub's queue.
BUFFER_MAX = 256 * 1024
#: The scope key under which :class:`ServerSendMiddleware` keeps the server's ``send``.
SCOPE_KEY = "busconsole.server_send"


def text_frame(text: str) -> bytes:
    """A final, unmasked websocket text frame carrying ``text`` (RFC 6455, section 5.2)."""
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


def direct_socket(scope: dict[str, Any]) -> DirectSocket | None:
    """The client's socket for shared frames, or None (another server, or an extension was negotiated).

    Call it once the handshake is over (after the first frame was sent): extensions are known then.
    """
    # Looked up, not imported: a server that is not uvicorn's websockets implementation has not loaded
    # it (and importing it would load websockets' deprecated legacy package for nothing).
    impl = sys.modules.get("uvicorn.protocols.websockets.websockets_impl")
    protocol = getattr(scope.get(SCOPE_KEY), "__self__", None)
    if impl is None or not isinstance(protocol, impl.WebSocketProtocol):
        return None
    if protocol.extensions or protocol.transport is None:
        return None
    return DirectSocket(protocol)
