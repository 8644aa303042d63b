"""A crowd of websockets joining their groups at once: every ``group_add`` waits for a connection of the
layer's pool instead of failing, and a message sent to the group reaches every channel.

channels-redis's own pool fails a command outright once all its connections are busy ("Too many
connections"): at a thousand tail sockets opening together, past the pool's hundred connections the
sockets went without live revocation. Here the pool has 3 connections and 60 channels join at once;
the stock layer fails the same scenario every time, which the second test shows.
"""

from __future__ import annotations

import asyncio

import pytest
import redis
from channels_redis.core import RedisChannelLayer as StockLayer
from django.conf import settings

from streams_app.live.layer import RedisChannelLayer

CROWD = 60


def _config(prefix: str) -> dict:
    config = settings.CHANNEL_LAYERS["default"]["CONFIG"]
    (host,) = config["hosts"]
    return {**config, "hosts": [{**host, "max_connections": 3}], "prefix": prefix}


async def _crowd(layer) -> list[dict]:
    try:
        channels = [await layer.new_channel() for _ in range(CROWD)]
        await asyncio.gather(*(layer.group_add("crowd", channel) for channel in channels))
        await layer.group_send("crowd", {"type": "revoke", "n": 1})
        return list(await asyncio.wait_for(asyncio.gather(*(layer.receive(c) for c in channels)), 60))
    finally:
        await layer.flush()
        await layer.close_pools()


def test_a_crowd_joining_at_once_waits_for_the_pool_and_every_channel_gets_the_message() -> None:
    received = asyncio.run(_crowd(RedisChannelLayer(**_config("test-layer-crowd"))))
    assert received == [{"type": "revoke", "n": 1}] * CROWD


def test_the_stock_pool_fails_the_same_crowd() -> None:
    with pytest.raises(redis.ConnectionError, match="Too many connections"):
        asyncio.run(_crowd(StockLayer(**_config("test-layer-crowd-stock"))))
