"""Requeueing a whole DLQ up to an ID in batches (``requeue_range``): once, resumable, as the conventions say.

Every dead letter the test wrote is accounted for by counting the ``_requeued_from`` markers in the
target streams (a raw XRANGE), whatever crashed or raced; and the bulk path, which rewrites entries inside
Redis by a rule, is checked entry by entry against what ``conventions.requeue_plan`` says in Python.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter

import pytest
import redis

from streams_app.redis_ops import actions
from streams_app.redis_ops.conventions import requeue_plan
from streams_app.redis_ops.errors import InvalidArgument
from tests.console.helpers import CONN
from tests.console.redis_ops.helpers import EVENTBUS_FIELDS, OMNI_DATA, OMNI_KEY, raw_xrange, stream_fields


def test_bulk_and_single_requeues_racing_move_each_entry_once(r: redis.Redis) -> None:
    pipe = r.pipeline()
    for _ in range(600):
        pipe.xadd("orders:dlq", EVENTBUS_FIELDS)
    ids = [x.decode() for x in pipe.execute()]
    errors: list[BaseException] = []

    def bulk() -> None:
        try:
            after = None
            for _ in range(1000):
                batch = actions.requeue_range(CONN, b"orders:dlq", up_to=ids[-1], after=after, batch=50)
                after = batch.cursor
                if after is None:
                    return
        except BaseException as exc:  # noqa: BLE001 - reported by the main thread
            errors.append(exc)

    def singles() -> None:
        try:
            for start in range(len(ids) - 10, -1, -10):
                actions.requeue(CONN, b"orders:dlq", ids=ids[start : start + 10])
        except BaseException as exc:  # noqa: BLE001
            errors.append(exc)

    threads = [threading.Thread(target=bulk), threading.Thread(target=singles)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert errors == []
    origins = Counter(dict(fields)[b"_requeued_from"].decode() for fields in stream_fields(r, "orders"))
    assert sorted(origins) == sorted(ids) and set(origins.values()) == {1}
    assert r.xlen("orders:dlq") == 0


def test_requeue_range_never_touches_entries_newer_than_up_to(r: redis.Redis) -> None:
    pipe = r.pipeline()
    for _ in range(100):
        pipe.xadd("orders:dlq", EVENTBUS_FIELDS)
    ids = [x.decode() for x in pipe.execute()]
    up_to = ids[60]
    later = [
        r.xadd("orders:dlq", EVENTBUS_FIELDS).decode() for _ in range(5)
    ]  # arrived after the page loaded

    after, scanned, batches = None, 0, 0
    while True:
        batch = actions.requeue_range(CONN, b"orders:dlq", up_to=up_to, after=after, batch=7)
        scanned += batch.scanned
        batches += 1
        after = batch.cursor
        if after is None:
            break
        assert batches < 100

    assert scanned == 61
    origins = [dict(fields)[b"_requeued_from"].decode() for fields in stream_fields(r, "orders")]
    assert origins == ids[:61]
    assert [x.decode() for x, _ in r.xrange("orders:dlq")] == ids[61:] + later


def test_requeue_range_rerun_after_a_crash_requeues_nothing_twice(r: redis.Redis) -> None:
    pipe = r.pipeline()
    for i in range(1_000):
        pipe.xadd("orders:dlq", {**EVENTBUS_FIELDS, b"data": json.dumps({"n": i}).encode()})
    ids = [x.decode() for x in pipe.execute()]
    up_to = ids[-1]

    after = None
    for _ in range(3):  # the worker dies after three batches...
        after = actions.requeue_range(CONN, b"orders:dlq", up_to=up_to, after=after, batch=100).cursor
    # ...before it could save its cursor: the resumed job starts from scratch.
    after, rounds = None, 0
    while True:
        batch = actions.requeue_range(CONN, b"orders:dlq", up_to=up_to, after=after, batch=100)
        after, rounds = batch.cursor, rounds + 1
        if after is None:
            break
        assert rounds < 50

    entries = stream_fields(r, "orders")
    origins = Counter(dict(fields)[b"_requeued_from"].decode() for fields in entries)
    assert len(entries) == 1_000 and sorted(origins) == sorted(ids) and set(origins.values()) == {1}
    assert sorted(json.loads(dict(f)[b"data"])["n"] for f in entries) == list(range(1_000))
    assert r.xlen("orders:dlq") == 0


def _requeue_all(key: bytes, *, batch: int) -> tuple[dict[str, tuple[bytes, str]], set[str]]:
    """Run requeue_range to the end: ({dlq id: (stream, new id)}, failed dlq ids)."""
    moved: dict[str, tuple[bytes, str]] = {}
    failed: set[str] = set()
    after = None
    for _ in range(1000):
        step = actions.requeue_range(CONN, key, up_to="18446744073709551615-0", after=after, batch=batch)
        moved.update({x.dlq_id: (x.stream, x.new_id) for x in step.result.requeued})
        failed.update(f.dlq_id for f in step.result.failed)
        assert step.result.missing == ()
        after = step.cursor
        if after is None:
            return moved, failed
    raise AssertionError("requeue_range did not finish")


def _plans(r: redis.Redis, key: bytes) -> dict[str, tuple[bytes, list[tuple[bytes, bytes]]] | None]:
    """What conventions.requeue_plan says for every entry of the DLQ (None: it refuses the entry)."""
    plans: dict[str, tuple[bytes, list[tuple[bytes, bytes]]] | None] = {}
    for entry_id, flat in raw_xrange(r, key):
        try:
            plans[entry_id.decode()] = requeue_plan(
                key, entry_id.decode(), list(zip(flat[::2], flat[1::2], strict=True))
            )
        except InvalidArgument:
            plans[entry_id.decode()] = None
    return plans


@pytest.mark.parametrize(
    ("key", "patterns"),
    [
        (b"orders:dlq", ""),
        (b"jobs:email:dead", [{"name": "by-suffix", "match": "jobs:*:dead", "target": "strip_suffix::dead",
                               "error_field": "dlq_error", "retries_field": "_retries", "drop_fields": ["d"]}]),
        (b"parked", [{"name": "by-field", "match": "parked", "target": "field:dlq_original_stream",
                      "original_id_field": "type"}]),
    ],
)  # fmt: skip
def test_bulk_requeue_agrees_with_the_conventions_entry_by_entry(
    r: redis.Redis, settings, key, patterns
) -> None:
    """The bulk path rewrites entries inside Redis by a rule; it must do exactly what requeue_plan says."""
    settings.BUSCONSOLE_DLQ_PATTERNS = json.dumps(patterns) if patterns else ""
    rng = random.Random(7)
    names = [b"type", b"data", b"d", b"dlq_error", b"dlq_x", b"dlq", b"DLQ_x", b"_retries", b"_retriesX",
             b"_requeued_from", b"\xff\x00bin", b"dlq_original_stream"]  # fmt: skip
    streams = [b"orders", b"billing", b"", key, b"\xffbin", b"text"]
    r.set("text", "not a stream")
    pipe = r.pipeline()
    for _ in range(400):
        fields = [
            (rng.choice(names), rng.choice([b"", b"v", b"\x00\xff", b"x" * 300]))
            for _ in range(rng.randint(0, 6))
        ]
        if rng.random() < 0.8:
            fields.insert(rng.randint(0, len(fields)), (b"dlq_original_stream", rng.choice(streams)))
        if not fields:
            fields = [(b"only", b"1")]
        pipe.execute_command("XADD", key, "*", *[x for pair in fields for x in pair])
    pipe.execute()
    plans = _plans(r, key)
    refused_by_redis = {i for i, plan in plans.items() if plan and plan[0] == b"text"}

    moved, failed = _requeue_all(key, batch=37)

    assert failed == {i for i, plan in plans.items() if plan is None} | refused_by_redis
    assert set(moved) == set(plans) - failed
    for dlq_id, (stream, new_id) in moved.items():
        target, fields = plans[dlq_id]
        assert stream == target
        [[_, flat]] = raw_xrange(r, stream, new_id, new_id)
        assert list(zip(flat[::2], flat[1::2], strict=True)) == fields
    assert {i.decode() for i, _ in raw_xrange(r, key)} == failed
    assert len(moved) > 100


def test_bulk_requeue_of_omnidaemon_entries_plans_in_python(r: redis.Redis) -> None:
    good = [r.xadd(OMNI_KEY, {"data": OMNI_DATA}).decode() for _ in range(30)]
    broken = r.xadd(OMNI_KEY, {"data": b'{"topic": "file.uploaded", "error": "no message"}'}).decode()

    moved, failed = _requeue_all(OMNI_KEY, batch=8)

    assert set(moved) == set(good) and failed == {broken}
    assert {stream for stream, _ in moved.values()} == {b"omni-stream:file.uploaded"}
    payloads = {dict(f)[b"data"] for f in stream_fields(r, "omni-stream:file.uploaded")}
    assert payloads == {
        b'{"content": {"filename": "doc.pdf"}, "correlation_id": "req-123", "delivery_attempts": 4}'
    }
    assert [i.decode() for i, _ in raw_xrange(r, OMNI_KEY)] == [broken]
