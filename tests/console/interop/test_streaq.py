"""streaQ 5.1 with a real worker, read back through the console's JSON API and pages.

Finished tasks are acked and deleted from the stream; a held one is pending on the worker's consumer
in group ``workers``. Expected values come from Redis (XINFO, XPENDING, XRANGE through redis-py) and
from the task IDs streaQ returned when they were enqueued.
"""

from __future__ import annotations

import threading
from typing import Any

import redis
from django.test import Client

from tests.console.helpers import stream_api, stream_url
from tests.console.interop.helpers import (
    WAIT,
    XSS,
    LoopThread,
    assert_console_matches_redis,
    console_streams,
    decoded_field,
    entries_asc,
    get_html,
    get_json,
    redis_streams,
)
from tests.polling import wait_for


def test_streaq_worker_streams(aio: LoopThread, url: str, r: redis.Redis, viewer_client: Client) -> None:
    """streaQ 5.1: tasks enqueued, a real worker runs; finished tasks are acked and deleted from the
    stream, a held one is pending on the worker's consumer in group ``workers``."""
    import anyio
    from streaq import Worker

    class ThreadWorker(Worker):
        """streaQ's worker minus its SIGINT/SIGTERM handler: signals only reach the main thread and
        this worker runs on the test's loop thread. It is stopped the way streaQ's ``burst`` does."""

        async def signal_handler(self, scope: Any) -> None:
            await anyio.sleep_forever()

    release = threading.Event()
    worker = ThreadWorker(redis_url=url, queue_name="shop", concurrency=2)

    @worker.task()
    async def add(a: int, b: int) -> int:
        return a + b

    @worker.task()
    async def hold(note: str) -> str:
        with anyio.fail_after(WAIT):
            while not release.is_set():
                await anyio.sleep(0.02)
        return note

    async def enqueue() -> list[str]:
        tasks = [await add.enqueue(1, 2), await add.enqueue(3, 4), await hold.enqueue(XSS)]
        return [t.id for t in tasks]

    task_ids = aio.run(enqueue())
    [stream] = redis_streams(r, "streaq:*")
    assert r.xlen(stream) == 3
    queued = entries_asc(viewer_client, stream)
    assert [decoded_field(e, "task_id")["value"] for e in queued] == task_ids
    assert {decoded_field(e, "task_id")["format"] for e in queued} == {"text"}

    running = aio.start(worker.run_async())
    try:
        wait_for(lambda: r.xlen(stream) == 1 and r.xpending(stream, "workers")["pending"] == 1,
                 what="the streaQ worker to finish two tasks and hold the third", timeout=WAIT)
        assert set(console_streams(viewer_client)) == redis_streams(r)  # sorted sets and strings left out
        info = assert_console_matches_redis(viewer_client, r, stream)
        assert [(g["name"], g["pending"]) for g in info["groups"]] == [("workers", 1)]
        [entry] = entries_asc(viewer_client, stream)
        assert entry["fields"] == {"task_id": task_ids[2]}
        [held] = get_json(viewer_client, stream_api(stream, "groups/workers/pending/"))["entries"]
        assert (held["id"], held["consumer"], held["exists"]) == (entry["id"], worker.id, True)
        assert worker.id in get_html(viewer_client, stream_url(stream, "groups/workers/"))
        assert task_ids[2] in get_html(viewer_client, stream_url(stream))
    finally:
        release.set()
        wait_for(lambda: r.xlen(stream) == 0, what="the worker to finish the held task", timeout=WAIT)
        worker.burst = True
        running.result(WAIT)
    info = assert_console_matches_redis(viewer_client, r, stream)
    assert info["length"] == 0 and info["entries_added"] == 3 and info["groups"][0]["pending"] == 0
