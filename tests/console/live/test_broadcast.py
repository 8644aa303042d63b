"""Channel-layer events and group names: operator actions and job progress reach open tails, a
broadcast never raises, and group names are valid and distinct for any key.

The expected frames are written out from the arguments the test broadcast; group names are checked
with Channels' own validator (``BaseChannelLayer.require_valid_group_name``), not with the code that
made them.
"""

from __future__ import annotations

import asyncio
from typing import Any

import pytest
import redis
from channels.layers import BaseChannelLayer

from streams_app.live import broadcast
from streams_app.live.groups import group_name, job_group, stream_group
from tests.console.live.helpers import frame, open_tail, run, until_live


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
