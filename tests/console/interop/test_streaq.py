"""streaQ with a real worker, read back through the console's JSON API and pages.

streaQ runs in the interop venv (``clients/streaq_side.py``), told by the test when to start its worker,
release the task it holds, and stop. Finished tasks are acked and deleted from the stream; a held one
is pending on the worker's consumer in group ``workers``. Expected values come from Redis (XINFO,
XPENDING, XRANGE through redis-py) and from the task IDs streaQ returned when they were enqueued.
"""

from __future__ import annotations

from collections.abc import Callable

import redis
from django.test import Client

from tests.console.helpers import stream_api, stream_url
from tests.console.interop.helpers import (
    WAIT,
    XSS,
    assert_console_matches_redis,
    console_streams,
    decoded_field,
    entries_asc,
    get_html,
    get_json,
    redis_streams,
)
from tests.polling import wait_for


def test_streaq_worker_streams(library: Callable, r: redis.Redis, viewer_client: Client) -> None:
    """streaQ: tasks enqueued, a real worker runs; finished tasks are acked and deleted from the
    stream, a held one is pending on the worker's consumer in group ``workers``."""
    streaq = library("streaq_side.py", "worker_streams", note=XSS)
    task_ids = streaq.read()["task_ids"]
    [stream] = redis_streams(r, "streaq:*")
    assert r.xlen(stream) == 3
    queued = entries_asc(viewer_client, stream)
    assert [decoded_field(e, "task_id")["value"] for e in queued] == task_ids
    assert {decoded_field(e, "task_id")["format"] for e in queued} == {"text"}

    streaq.say("run")
    worker_id = streaq.read()["worker_id"]
    try:
        wait_for(lambda: r.xlen(stream) == 1 and r.xpending(stream, "workers")["pending"] == 1,
                 what="the streaQ worker to finish two tasks and hold the third", timeout=WAIT)
        assert set(console_streams(viewer_client)) == redis_streams(r)  # sorted sets and strings left out
        info = assert_console_matches_redis(viewer_client, r, stream)
        assert [(g["name"], g["pending"]) for g in info["groups"]] == [("workers", 1)]
        [entry] = entries_asc(viewer_client, stream)
        assert entry["fields"] == {"task_id": task_ids[2]}
        [held] = get_json(viewer_client, stream_api(stream, "groups/workers/pending/"))["entries"]
        assert (held["id"], held["consumer"], held["exists"]) == (entry["id"], worker_id, True)
        assert worker_id in get_html(viewer_client, stream_url(stream, "groups/workers/"))
        assert task_ids[2] in get_html(viewer_client, stream_url(stream))
    finally:
        streaq.say("release")
        wait_for(lambda: r.xlen(stream) == 0, what="the worker to finish the held task", timeout=WAIT)
        streaq.say("stop")
        assert streaq.read() == {"stopped": True}
        streaq.finish(WAIT)
    info = assert_console_matches_redis(viewer_client, r, stream)
    assert info["length"] == 0 and info["entries_added"] == 3 and info["groups"][0]["pending"] == 0
