"""Open pages of a stream hear about operator actions and job progress over the channel layer.

A stream, group or DLQ page opens ``/ws/metrics/?conn=...&key=...``; an action taken elsewhere (another
operator, the API) must reach it as a small ``changed`` frame, and a background job's progress as
``job`` frames, so the page refreshes without a reload. Real uvicorn, real Redis; the frames are
checked against the action the test took (its user, key and count) and the page's next view against
XLEN read from Redis after it.
"""

from __future__ import annotations

import asyncio
import json
from typing import Any

import httpx
import pytest
import redis
from websockets.asyncio.client import connect
from websockets.exceptions import ConnectionClosed

from streams_app import services
from streams_app.jobs import runner as jobs
from tests.conftest import session_cookie
from tests.console.helpers import seg

HANG = 30  # seconds before a scenario counts as hung: a bound, not an assertion


def page_socket_url(server, key: bytes) -> str:
    return f"ws://127.0.0.1:{server.port}/ws/metrics/?conn=default&key={seg(key)}"


def page_socket(server, key: bytes, cookies: dict[str, str] | None = None):
    headers = {"Cookie": "; ".join(f"{k}={v}" for k, v in cookies.items())} if cookies else {}
    return connect(page_socket_url(server, key), origin=server.url, additional_headers=headers, proxy=None)


async def frames_until(ws, predicate, limit: int = 200) -> list[dict[str, Any]]:
    seen = []
    for _ in range(limit):
        seen.append(json.loads(await ws.recv()))
        if predicate(seen[-1]):
            return seen
    raise AssertionError(f"no matching frame among {seen}")


def dead_letters(r: redis.Redis, n: int) -> list[str]:
    return [
        r.xadd("orders:dlq", {"type": "order.created", "data": json.dumps({"i": i}), "dlq_original_stream": "orders",
                              "dlq_original_id": f"1-{i}", "dlq_error": "ValueError: x", "dlq_retries": "5"}).decode()
        for i in range(n)
    ]


def test_an_api_requeue_reaches_the_open_dlq_page(asgi_server, viewer, operator, api_token, r: redis.Redis) -> None:
    ids = dead_letters(r, 2)
    token = api_token(operator)
    cookies = session_cookie(viewer)

    async def scenario() -> list[dict[str, Any]]:
        async with page_socket(asgi_server, b"orders:dlq", cookies) as ws:
            await frames_until(ws, lambda f: f.get("state") == "live")
            async with httpx.AsyncClient(base_url=asgi_server.url) as http:
                response = await http.post("/api/v1/c/default/dlq/orders%3Adlq/requeue", json={"ids": [ids[0]]},
                                           headers={"Authorization": f"Bearer {token}"})
                assert response.status_code == 200, response.text
            return await frames_until(ws, lambda f: f["type"] == "changed")

    frames = asyncio.run(asyncio.wait_for(scenario(), HANG))
    changed = frames[-1]
    assert changed["action"] == "dlq.requeue" and changed["affected"] == 1
    assert changed["key"] == "orders:dlq" and changed["conn"] == "default"
    assert changed["user"] == operator.username
    assert r.xlen("orders:dlq") == 1  # what the page will show after its refresh


def test_job_progress_reaches_the_open_page_of_its_stream(asgi_server, viewer, operator, r: redis.Redis) -> None:
    ids = dead_letters(r, 30)
    cookies = session_cookie(viewer)

    async def scenario() -> list[dict[str, Any]]:
        async with page_socket(asgi_server, b"orders:dlq", cookies) as ws:
            await frames_until(ws, lambda f: f.get("state") == "live")
            job = await asyncio.to_thread(
                services.dlq_requeue_all, user=operator, conn="default", key=b"orders:dlq", up_to=ids[-1])
            await asyncio.to_thread(jobs.job_run, job.pk)  # in this process; the Celery path has its own tests
            return await frames_until(ws, lambda f: f["type"] == "job" and f["state"] == "done")

    frames = asyncio.run(asyncio.wait_for(scenario(), HANG))
    done = frames[-1]
    assert done["done"] == 30 and done["kind"] == "dlq.requeue_all"
    assert r.xlen("orders:dlq") == 0 and r.xlen("orders") == 30


def test_previews_are_not_announced_and_other_streams_are_not_heard(asgi_server, viewer, operator,
                                                                   r: redis.Redis) -> None:
    for i in range(3):
        r.xadd("a", {"i": str(i)})
        r.xadd("b", {"i": str(i)})
    r.xgroup_create("a", "g", id="0")
    r.xgroup_create("b", "g", id="0")
    cookies = session_cookie(viewer)

    async def scenario() -> list[dict[str, Any]]:
        async with page_socket(asgi_server, b"a", cookies) as ws:
            await frames_until(ws, lambda f: f.get("state") == "live")
            await asyncio.to_thread(services.group_rewind_preview, user=operator, conn="default", key=b"a",
                                    group=b"g", to="0")
            await asyncio.to_thread(services.group_rewind, user=operator, conn="default", key=b"b", group=b"g",
                                    to="0")
            await asyncio.to_thread(services.group_rewind, user=operator, conn="default", key=b"a", group=b"g",
                                    to="0")
            return await frames_until(ws, lambda f: f["type"] == "changed")

    frames = asyncio.run(asyncio.wait_for(scenario(), HANG))
    changed = [f for f in frames if f["type"] == "changed"]
    assert [(f["key"], f["action"]) for f in changed] == [("a", "rewind")]


def test_anonymous_page_socket_is_refused(asgi_server) -> None:
    async def scenario() -> int | None:
        async with page_socket(asgi_server, b"a") as ws:
            try:
                await ws.recv()
            except ConnectionClosed as closed:
                return closed.rcvd.code if closed.rcvd else None
        return None

    assert asyncio.run(asyncio.wait_for(scenario(), HANG)) == 4401


@pytest.fixture(autouse=True)
def _db(transactional_db) -> None:
    """The ASGI server runs in another thread: the test's rows must be committed."""
