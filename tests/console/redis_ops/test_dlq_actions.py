"""Requeueing chosen dead letters, listing a DLQ newest first, deleting and purging its entries.

Each convention's dead letter is written as its producer writes it; the expected requeued entry is spelled
out literally and compared with what a raw XRANGE of the target stream holds (field order included), and
DLQ listings are compared with the IDs XADD returned. Concurrent presses are real threads racing on one
entry, checked by counting the ``_requeued_from`` markers Redis holds afterwards.
"""

from __future__ import annotations

import json
import threading

import redis

from streams_app.redis_ops import actions
from streams_app.redis_ops.reads import dlq as dlq_reads
from tests.console.helpers import CONN
from tests.console.redis_ops.helpers import EVENTBUS_FIELDS, OMNI_DATA, OMNI_KEY, stream_fields

# ---------------------------------------------------------------- requeue


def test_requeue_eventbus_entry(r: redis.Redis) -> None:
    dlq_id = r.xadd("orders:dlq", EVENTBUS_FIELDS).decode()

    result = actions.requeue(CONN, b"orders:dlq", ids=[dlq_id])

    [new_id] = [x.decode() for x, _ in r.xrange("orders")]
    assert result == actions.RequeueResult(
        requeued=(actions.Requeued(dlq_id=dlq_id, stream=b"orders", new_id=new_id),), missing=()
    )
    assert stream_fields(r, "orders") == [
        [
            (b"type", b"order.created"),
            (b"data", b'{"order_id": 7}'),
            (b"id", b"evt-1"),
            (b"ts", b"1699999999000"),
            (b"_requeued_from", dlq_id.encode()),
        ]
    ]
    assert r.xlen("orders:dlq") == 0


def test_requeue_seed_streams_entry(r: redis.Redis) -> None:
    dlq_id = r.xadd(
        "actors:dlq", {"event_type": "actor.updated", "data": b'json:{"a": "\xc3\xa9"}', "_retries": "5"}
    ).decode()

    result = actions.requeue(CONN, b"actors:dlq", ids=[dlq_id])

    assert [(x.dlq_id, x.stream) for x in result.requeued] == [(dlq_id, b"actors")]
    assert stream_fields(r, "actors") == [
        [
            (b"event_type", b"actor.updated"),
            (b"data", b'json:{"a": "\xc3\xa9"}'),
            (b"_requeued_from", dlq_id.encode()),
        ]
    ]
    assert r.xlen("actors:dlq") == 0


def test_requeue_omnidaemon_entry(r: redis.Redis) -> None:
    dlq_id = r.xadd(OMNI_KEY, {"data": OMNI_DATA}).decode()

    result = actions.requeue(CONN, OMNI_KEY, ids=[dlq_id])

    assert [(x.dlq_id, x.stream) for x in result.requeued] == [(dlq_id, b"omni-stream:file.uploaded")]
    assert stream_fields(r, "omni-stream:file.uploaded") == [
        [
            (
                b"data",
                b'{"content": {"filename": "doc.pdf"}, "correlation_id": "req-123", "delivery_attempts": 4}',
            ),
            (b"_requeued_from", dlq_id.encode()),
        ]
    ]
    assert r.xlen(OMNI_KEY) == 0


def test_requeue_configured_pattern_entry(r: redis.Redis, settings) -> None:
    settings.BUSCONSOLE_DLQ_PATTERNS = json.dumps(
        [
            {
                "name": "jobs-dead",
                "match": "jobs:*:dead",
                "target": "strip_suffix::dead",
                "error_field": "reason",
                "retries_field": "attempts",
                "drop_fields": ["worker"],
            }
        ]
    )
    dlq_id = r.xadd(
        "jobs:email:dead",
        {"task": "send", "to": "a@example.com", "reason": "SMTP 451", "attempts": "3", "worker": "w1"},
    ).decode()

    result = actions.requeue(CONN, b"jobs:email:dead", ids=[dlq_id])

    assert [(x.dlq_id, x.stream) for x in result.requeued] == [(dlq_id, b"jobs:email")]
    assert stream_fields(r, "jobs:email") == [
        [(b"task", b"send"), (b"to", b"a@example.com"), (b"_requeued_from", dlq_id.encode())]
    ]
    assert r.xlen("jobs:email:dead") == 0


def test_requeue_reports_missing_and_failed_and_keeps_failed_entries(r: redis.Redis) -> None:
    ok = r.xadd("orders:dlq", EVENTBUS_FIELDS).decode()
    refused = r.xadd("orders:dlq", {**EVENTBUS_FIELDS, b"dlq_original_stream": b"not-a-stream"}).decode()
    r.set("not-a-stream", "a string")
    looping = r.xadd("orders:dlq", {**EVENTBUS_FIELDS, b"dlq_original_stream": b"orders:dlq"}).decode()

    result = actions.requeue(CONN, b"orders:dlq", ids=["1-1", ok, refused, looping])

    assert [x.dlq_id for x in result.requeued] == [ok]
    assert result.missing == ("1-1",)
    assert sorted(f.dlq_id for f in result.failed) == sorted([refused, looping])
    assert any("WRONGTYPE" in f.reason for f in result.failed)
    assert [x.decode() for x, _ in r.xrange("orders:dlq")] == [refused, looping]
    assert r.xlen("orders") == 1


def test_concurrent_requeue_of_one_entry_makes_exactly_one_new_entry(r: redis.Redis) -> None:
    def press(dlq_id: str, barrier: threading.Barrier, results: list[actions.RequeueResult]) -> None:
        barrier.wait(5)
        results.append(actions.requeue(CONN, b"orders:dlq", ids=[dlq_id]))

    rounds = 40
    for _ in range(rounds):
        dlq_id = r.xadd("orders:dlq", EVENTBUS_FIELDS).decode()
        barrier = threading.Barrier(2)
        results: list[actions.RequeueResult] = []
        threads = [threading.Thread(target=press, args=(dlq_id, barrier, results)) for _ in range(2)]
        for t in threads:
            t.start()
        for t in threads:
            t.join(10)
        assert len(results) == 2
        assert sorted((len(x.requeued), len(x.missing)) for x in results) == [(0, 1), (1, 0)]

    origins = [dict(fields)[b"_requeued_from"] for fields in stream_fields(r, "orders")]
    assert len(origins) == rounds and len(set(origins)) == rounds
    assert r.xlen("orders:dlq") == 0


# ---------------------------------------------------------------- DLQ listing, delete, purge


def test_dlq_entries_newest_first_with_paging_and_error_filter(r: redis.Redis) -> None:
    pipe = r.pipeline()
    for i in range(300):
        error = f"TimeoutError: attempt {i}" if i % 10 == 3 else f"ValueError: bad {i}"
        pipe.xadd("orders:dlq", {**EVENTBUS_FIELDS, b"dlq_error": error.encode()})
    ids = [x.decode() for x in pipe.execute()]

    page, cursor = dlq_reads.dlq_entries(CONN, b"orders:dlq", count=20, mask=None)
    assert [e.id for e in page] == ids[::-1][:20] and cursor == ids[-20]
    assert page[0].convention == "eventbus" and page[0].original_stream == b"orders"
    page2, _ = dlq_reads.dlq_entries(CONN, b"orders:dlq", before=cursor, after=ids[270], count=50, mask=None)
    assert [e.id for e in page2] == ids[271:280][::-1]

    expected = [i for n, i in enumerate(ids) if n % 10 == 3][::-1]
    found: list[str] = []
    before = None
    for _ in range(100):
        page, before = dlq_reads.dlq_entries(
            CONN, b"orders:dlq", before=before, count=7, error_contains="timeout", scan_limit=45, mask=None
        )
        assert len(page) <= 7
        found += [e.id for e in page]
        if before is None:
            break
    assert found == expected


def test_dlq_delete_and_purge_up_to(r: redis.Redis) -> None:
    pipe = r.pipeline()
    for _ in range(250):
        pipe.xadd("orders:dlq", EVENTBUS_FIELDS)
    ids = [x.decode() for x in pipe.execute()]

    assert actions.dlq_delete(CONN, b"orders:dlq", ids=[ids[0], ids[1], "1-1"]) == 2
    assert actions.dlq_purge(CONN, b"orders:dlq", up_to=ids[199], batch=30) == 198
    assert [x.decode() for x, _ in r.xrange("orders:dlq")] == ids[200:]
