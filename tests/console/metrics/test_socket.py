"""The live-refresh socket ``/ws/metrics/`` on a real ASGI server: it relays snapshot announcements from
the channel layer to a logged-in browser and refuses anonymous and cross-origin clients.

The frames are checked against the event the test sent into the group; the refusals against the close
code 4401 and the HTTP status 403.
"""

from __future__ import annotations

import asyncio
import json

import pytest
from channels.layers import get_channel_layer
from websockets.asyncio.client import ClientConnection, connect
from websockets.exceptions import ConnectionClosed, InvalidStatus

from streams_app.live.broadcast import SNAPSHOT_EVENT
from streams_app.live.groups import snapshot_group
from tests.conftest import session_cookie


async def _metrics_socket(server, cookies: dict[str, str] | None, *, origin: str | None = None) -> ClientConnection:
    headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())} if cookies else {}
    return await connect(f"ws://127.0.0.1:{server.port}/ws/metrics/", origin=origin or server.url,
                         additional_headers=headers, proxy=None)


def test_the_metrics_socket_relays_snapshot_announcements(asgi_server, viewer) -> None:
    cookies = session_cookie(viewer)

    async def scenario() -> tuple[list[dict], int, int]:
        ws = await _metrics_socket(asgi_server, cookies)
        frames = [json.loads(await ws.recv())]  # "live" once it has joined the group
        await get_channel_layer().group_send(snapshot_group(), {"type": SNAPSHOT_EVENT, "tick": "2026-03-05T12:00:00+00:00"})
        frames.append(json.loads(await ws.recv()))
        await ws.close()
        anonymous = await _metrics_socket(asgi_server, None)
        with pytest.raises(ConnectionClosed) as closed:
            await anonymous.recv()
        with pytest.raises(InvalidStatus) as refused:
            await _metrics_socket(asgi_server, cookies, origin="http://evil.example")
        return frames, closed.value.rcvd.code, refused.value.response.status_code

    frames, anonymous_code, cross_origin = asyncio.run(asyncio.wait_for(scenario(), 60))
    assert frames == [{"type": "status", "state": "live"}, {"type": "snapshot", "tick": "2026-03-05T12:00:00+00:00"}]
    assert (anonymous_code, cross_origin) == (4401, 403)
