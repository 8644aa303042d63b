"""The console's channel layer outlives an idle BZPOPMIN: a consumer that receives nothing for a
while still gets the next message, and the read never dies of the socket's own read timeout.

channels-redis blocks in ``BZPOPMIN`` for ``brpop_timeout`` (5 s) per round. redis-py 8 gives every
connection a 5 s read timeout unless told otherwise (redis-py 5: none), so an idle round could end in
``redis.TimeoutError`` and crash the websocket consumer that was waiting. Here the round is made
longer than redis-py's default read timeout (6 s), so the old configuration fails every time.
"""

from __future__ import annotations

import asyncio

import pytest
from django.conf import settings

from streams_app.live.layer import RedisChannelLayer


@pytest.mark.slow
def test_a_receive_outlives_an_idle_round_and_gets_the_next_message() -> None:
    async def scenario() -> tuple[bool, dict]:
        layer = RedisChannelLayer(**{**settings.CHANNEL_LAYERS["default"]["CONFIG"], "prefix": "test-layer-idle"})
        layer.brpop_timeout = 6  # one idle round, past redis-py 8's default 5 s read timeout
        try:
            channel = await layer.new_channel()
            receiving = asyncio.ensure_future(layer.receive(channel))
            # A whole idle round passes: the receive must still be waiting, not failed.
            await asyncio.wait({receiving}, timeout=layer.brpop_timeout + 1)
            idle_ok = not receiving.done()
            if receiving.done():
                receiving.result()  # raises what killed it
            await layer.send(channel, {"type": "hello", "n": 1})
            return idle_ok, await asyncio.wait_for(receiving, 30)
        finally:
            await layer.flush()
            await layer.close_pools()

    idle_ok, message = asyncio.run(scenario())
    assert idle_ok
    assert message == {"type": "hello", "n": 1}
