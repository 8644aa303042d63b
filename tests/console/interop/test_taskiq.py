"""taskiq's ``RedisStreamBroker``, read back through the console's JSON API and pages.

taskiq runs in the interop venv (``clients/taskiq_side.py``). Tasks are kicked with the JSON serializer
(the default) and with ``MSGPackSerializer``; the broker's own ``listen()`` reads two tasks for its group
and acks one. Expected values come from Redis (XINFO, XPENDING, XRANGE through redis-py), msgpack's own
unpacking, and the task IDs and arguments kicked.
"""

from __future__ import annotations

from collections.abc import Callable

import msgpack
import redis
from django.test import Client

from tests.console.helpers import stream_api, stream_url
from tests.console.interop.helpers import (
    XSS,
    assert_console_matches_redis,
    assert_escaped,
    console_streams,
    decoded_field,
    entries_asc,
    get_html,
    get_json,
    redis_streams,
)


def test_taskiq_stream_broker_json_and_msgpack(run_library: Callable, r: redis.Redis,
                                               viewer_client: Client) -> None:
    """taskiq's ``RedisStreamBroker``: tasks kicked with the JSON serializer (the default) and with
    ``MSGPackSerializer``; the broker's own ``listen()`` reads two tasks for its group and acks one."""
    kicked = run_library("taskiq_side.py", "stream_broker", origin=XSS)["kicked"]

    assert redis_streams(r) == {"taskiq:jobs", "taskiq:packed"}
    assert {key: row["is_dlq"] for key, row in console_streams(viewer_client).items()} == {
        "taskiq:jobs": False, "taskiq:packed": False,
    }
    info = assert_console_matches_redis(viewer_client, r, "taskiq:jobs")
    [group] = info["groups"]
    assert (group["name"], group["consumers"], group["pending"], group["entries_read"], group["lag"]) == (
        "taskiq-workers", 1, 1, 2, 3,
    )
    ids = [entry_id.decode() for entry_id, _ in r.xrange("taskiq:jobs")]
    pending = get_json(viewer_client, stream_api("taskiq:jobs", "groups/taskiq-workers/pending/"))
    assert [(e["id"], e["consumer"]) for e in pending["entries"]] == [(ids[1], "worker-a")]
    assert_console_matches_redis(viewer_client, r, "taskiq:packed")

    # JSON tasks: field "data", decoded to taskiq's message with the arguments that were kicked.
    entries = entries_asc(viewer_client, "taskiq:jobs")
    values = [decoded_field(e, "data") for e in entries]
    assert {v["format"] for v in values} == {"json"}
    assert [v["value"]["task_id"] for v in values] == kicked["taskiq:jobs"]
    assert {v["value"]["task_name"] for v in values} == {"billing.charge"}
    assert [v["value"]["args"] for v in values[:4]] == [[i, 9.5 + i] for i in range(4)]
    assert values[4]["value"]["kwargs"] == {"order_id": 99, "amount": 1.0, "note": "naïve"}
    assert values[4]["value"]["labels"] == {"origin": XSS}

    # msgpack tasks: decoded as msgpack, equal to what msgpack itself unpacks from Redis.
    [(packed_id, packed_fields)] = r.xrange("taskiq:packed")
    [entry] = entries_asc(viewer_client, "taskiq:packed")
    field = decoded_field(entry, "data")
    assert field["format"] == "msgpack"
    assert field["value"] == msgpack.unpackb(packed_fields[b"data"])
    assert field["value"]["task_id"] == kicked["taskiq:packed"][0]
    assert (field["value"]["task_name"], field["value"]["args"], field["value"]["kwargs"]) == (
        "reports.build", ["2026-01-31"], {"full": True},
    )

    assert_escaped(get_html(viewer_client, stream_url("taskiq:jobs")), XSS)
    assert "reports.build" in get_html(viewer_client, stream_url("taskiq:packed"))
    group_page = get_html(viewer_client, stream_url("taskiq:jobs", "groups/taskiq-workers/"))
    assert "worker-a" in group_page and ids[1] in group_page
