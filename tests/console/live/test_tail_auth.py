"""Who may open a tail: anonymous sockets are closed with 4401, other origins refused with 403,
and the tail page needs a login and points at the websocket.

Real uvicorn and redis-server. Close codes and HTTP statuses are the ones the websocket client and
Django's test client report; the page's replay start is checked against the IDs XADD returned.
"""

from __future__ import annotations

import pytest
import redis
from websockets.exceptions import ConnectionClosed, InvalidStatus

from tests.console.live.helpers import open_tail, run, xadd_many


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
