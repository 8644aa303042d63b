"""OmniDaemon's ``RedisStreamEventBus``: dead letters its own reclaim loop wrote, listed and parsed
by the console, requeued through the API (inline and by the bulk job), then consumed by OmniDaemon.

OmniDaemon runs in the interop venv (``clients/omnidaemon_side.py``). Expected values come from Redis
(XINFO, XPENDING, XRANGE through redis-py), from the JSON documents OmniDaemon wrote to its DLQ, and
from the messages the test published; the agent's second run checks that what it consumed is exactly
the failed messages.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import redis
from django.test import Client

from tests.console.helpers import seg, stream_url
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


def test_omnidaemon_dead_letters_requeued_and_consumed_again(run_library: Callable, r: redis.Redis,
                                                             viewer_client: Client, operator_client: Client,
                                                             tmp_path) -> None:
    """OmniDaemon's ``RedisStreamEventBus``: an agent whose callback fails has its messages reclaimed,
    retried and dead-lettered to ``omni-dlq:{group}`` by OmniDaemon itself. The console lists and parses
    that DLQ and requeues its entries (one by ID inline, the rest with the bulk job) to
    ``original_stream`` with ``data`` = the failed message's JSON; OmniDaemon's agent then consumes the
    requeued messages like any other."""
    from streams_app.jobs import runner as jobs

    topic, agent = "file.uploaded", "file-processor"
    stream, group = f"omni-stream:{topic}", f"group:{topic}:{agent}"
    dlq = f"omni-dlq:{group}"
    failing = {f"task-{n}": {"filename": f"café {XSS} {n}.pdf", "fail": True} for n in (2, 3, 4)}
    # Importing omnidaemon creates its JSON store directory in the working directory unless told
    # otherwise (python-decouple reads the environment at import time).
    env = {"JSON_STORAGE_DIR": str(tmp_path / "omnidaemon")}

    run_library("omnidaemon_side.py", "fail_then_dead_letter", env=env, error=f"cannot parse {XSS}", dead=3,
                messages=[["task-1", {"filename": "ok.pdf"}], *failing.items()])

    # Streams list: OmniDaemon's stream, its metrics stream and its DLQ, only the DLQ flagged.
    assert set(console_streams(viewer_client)) == redis_streams(r) == {stream, dlq, "omni-metrics"}
    assert_console_matches_redis(viewer_client, r, stream)
    assert_console_matches_redis(viewer_client, r, "omni-metrics")
    assert_console_matches_redis(viewer_client, r, dlq, is_dlq=True)

    original_ids = {json.loads(f[b"data"])["task_id"]: i.decode() for i, f in r.xrange(stream)}
    dead = {i.decode(): json.loads(f[b"data"]) for i, f in r.xrange(dlq)}
    by_task = {doc["failed_message"]["task_id"]: dlq_id for dlq_id, doc in dead.items()}
    assert set(by_task) == set(failing)
    for task_id, dlq_id in by_task.items():
        assert dead[dlq_id]["original_id"] == original_ids[task_id]
        assert dead[dlq_id]["failed_message"]["content"] == failing[task_id]

    [listed] = get_json(viewer_client, "/api/v1/c/default/dlq/")["dlqs"]
    assert {name: listed[name] for name in ("key", "convention", "depth", "source_streams")} == {
        "key": dlq, "convention": "omnidaemon", "depth": 3, "source_streams": [stream],
    }
    parsed = get_json(viewer_client, f"/api/v1/c/default/dlq/{seg(dlq)}/")["entries"]
    assert [p["id"] for p in parsed] == [i.decode() for i, _ in r.xrevrange(dlq)]  # newest first
    for entry in parsed:
        doc = dead[entry["id"]]
        assert {name: entry[name] for name in ("convention", "original_stream", "original_id", "group",
                                                "error", "retries", "failed_at_ms")} == {
            "convention": "omnidaemon",
            "original_stream": stream,
            "original_id": doc["original_id"],
            "group": group,
            "error": doc["error"],
            "retries": doc["retry_count"],
            "failed_at_ms": round(doc["failed_at"] * 1000),
        }
        assert entry["payload"] == [{"name": "data", "format": "json", "value": doc["failed_message"],
                                     "truncated": False}]

    # The stream entries decode to OmniDaemon's JSON envelope; pages show them escaped.
    entries = entries_asc(viewer_client, stream)
    assert [decoded_field(e, "data")["value"] for e in entries] == [json.loads(f[b"data"]) for _, f in r.xrange(stream)]
    assert_escaped(get_html(viewer_client, stream_url(stream)), f"café {XSS} 2.pdf")
    assert agent in get_html(viewer_client, stream_url(stream, f"groups/{seg(group)}/"))
    dlq_page = get_html(viewer_client, f"/c/default/dlq/{seg(dlq)}/")
    for content in failing.values():
        assert_escaped(dlq_page, content["filename"])

    # Requeue one by ID: a viewer may not; an operator moves it back to original_stream, once.
    path = f"/api/v1/c/default/dlq/{seg(dlq)}/requeue"
    first = by_task["task-2"]
    refused = viewer_client.post(path, data=json.dumps({"ids": [first]}), content_type="application/json")
    assert refused.status_code == 403 and r.xlen(dlq) == 3
    response = operator_client.post(path, data=json.dumps({"ids": [first]}), content_type="application/json")
    assert response.status_code == 200, response.content
    body = response.json()
    [requeued] = body["requeued"]
    assert (requeued["dlq_id"], requeued["stream"], body["missing"]) == (first, stream, [])
    again = operator_client.post(path, data=json.dumps({"ids": [first]}), content_type="application/json")
    assert again.json()["missing"] == [first] and r.xlen(dlq) == 2

    # The rest with the bulk job ("all up to the newest on screen"), run as the Celery worker would.
    newest = r.xrevrange(dlq, count=1)[0][0].decode()
    response = operator_client.post(path, data=json.dumps({"all": True, "up_to": newest}),
                                    content_type="application/json")
    assert response.status_code == 202, response.content
    jobs.job_run(response.json()["job"])
    assert get_json(viewer_client, f"/api/v1/jobs/{response.json()['job']}")["state"] == "done"
    assert r.xlen(dlq) == 0

    requeued_entries = [(i.decode(), f) for i, f in r.xrange(stream)][len(original_ids):]
    assert sorted(f[b"_requeued_from"].decode() for _, f in requeued_entries) == sorted(dead)
    for _, fields in requeued_entries:
        assert set(fields) == {b"data", b"_requeued_from"}
        assert json.loads(fields[b"data"]) == dead[fields[b"_requeued_from"].decode()]["failed_message"]
    assert_console_matches_redis(viewer_client, r, stream)

    # OmniDaemon's agent (now fixed) consumes the requeued messages from where its group left off.
    consumed = run_library("omnidaemon_side.py", "consume_requeued", env=env, count=3,
                           last_id=requeued_entries[-1][0])["consumed"]
    assert sorted(p["task_id"] for p in consumed) == sorted(failing)
    for payload in consumed:
        assert payload["content"] == failing[payload["task_id"]]
        failed_message = dead[by_task[payload["task_id"]]]["failed_message"]
        assert {k: v for k, v in payload.items() if k != "processing_consumer"} == failed_message
    assert_console_matches_redis(viewer_client, r, stream)
    assert_console_matches_redis(viewer_client, r, dlq, is_dlq=True)
