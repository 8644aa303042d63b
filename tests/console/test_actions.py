"""The write side of the access layer (claim, ack, rewind, requeue, purge, replay) against a real Redis.

Expected values come from Redis itself (XPENDING, XINFO GROUPS, what XREADGROUP delivers, XRANGE of the
target stream) or from plain-Python computations over data the test wrote, never from the code under
test. Idle times are set with ``XCLAIM ... IDLE`` rather than waited for, so no assertion depends on
timing.
"""

from __future__ import annotations

import json
import random
import threading
from collections import Counter
from datetime import UTC, datetime

import pytest
import redis

from streams_app.redis_ops import actions, client
from streams_app.redis_ops.conventions import requeue_plan
from streams_app.redis_ops.errors import InvalidArgument, NotFound

CONN = "default"

EVENTBUS_FIELDS = {
    b"type": b"order.created",
    b"data": b'{"order_id": 7}',
    b"id": b"evt-1",
    b"ts": b"1699999999000",
    b"_retries": b"5",
    b"dlq_original_stream": b"orders",
    b"dlq_original_id": b"1699999999000-0",
    b"dlq_group": b"billing",
    b"dlq_error": b"ValueError: card declined",
    b"dlq_traceback": b"Traceback (most recent call last): ...",
    b"dlq_retries": b"5",
    b"dlq_failed_at": b"1700000000100",
}
OMNI_KEY = b"omni-dlq:group:file.uploaded:file-processor"
OMNI_DATA = (
    b'{"topic": "file.uploaded", "original_stream": "omni-stream:file.uploaded", '
    b'"original_id": "1678901234567-0", "failed_message": {"content": {"filename": "doc.pdf"}, '
    b'"correlation_id": "req-123", "delivery_attempts": 4}, "error": "Max retries (3) exceeded", '
    b'"retry_count": 3, "failed_at": 1678901300.123}'
)


@pytest.fixture(autouse=True)
def _fresh(settings):
    settings.BUSCONSOLE_DLQ_PATTERNS = ""
    client.reset()
    yield
    client.reset()


def _pending(r: redis.Redis, key: str, group: str, consumer: str | None = None) -> dict[str, tuple[str, int]]:
    """{id: (consumer, deliveries)} as XPENDING's extended form says."""
    rows = r.xpending_range(key, group, "-", "+", 10_000, consumername=consumer)
    return {row["message_id"].decode(): (row["consumer"].decode(), row["times_delivered"]) for row in rows}


def _deliver(r: redis.Redis, key: str, group: str, consumer: str, n: int = 10_000) -> list[str]:
    reply = r.xreadgroup(group, consumer, {key: ">"}, count=n)
    return [entry_id.decode() for entry_id, _ in reply[0][1]] if reply else []


def _make_idle(r: redis.Redis, key: str, group: str, consumer: str, ids: list[str], idle_ms: int) -> None:
    """Pretend ``ids`` were last delivered ``idle_ms`` ago (XCLAIM IDLE, JUSTID: deliveries unchanged)."""
    r.xclaim(key, group, consumer, 0, ids, idle=idle_ms, justid=True)


def _raw_xrange(r: redis.Redis, key: str | bytes, start: str = "-", end: str = "+") -> list:
    """XRANGE as Redis replies: [[id, [name, value, ...]], ...] (redis-py would make dicts)."""
    raw = redis.Redis(connection_pool=r.connection_pool)
    raw.set_response_callback("XRANGE", lambda response, **options: response)
    return raw.xrange(key, start, end)


def _fields(r: redis.Redis, key: str | bytes) -> list[list[tuple[bytes, bytes]]]:
    """Every entry's fields in order, as Redis holds them (raw, so order and duplicates survive)."""
    raw = _raw_xrange(r, key)
    return [list(zip(flat[::2], flat[1::2], strict=True)) for _, flat in raw]


def _group_row(r: redis.Redis, key: str, group: str) -> dict:
    return next(g for g in r.xinfo_groups(key) if g["name"] == group.encode())


# ---------------------------------------------------------------- claim


def test_claim_moves_ownership_and_counts_a_delivery(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"n": str(i)}).decode() for i in range(3)]
    r.xgroup_create("s", "g", id="0")
    assert _deliver(r, "s", "g", "c1") == ids

    result = actions.claim(CONN, b"s", b"g", ids=[ids[0], ids[1]], consumer=b"c2", min_idle_ms=0)

    assert result == actions.ClaimResult(claimed=(ids[0], ids[1]), skipped=(), deleted=())
    assert _pending(r, "s", "g", "c2") == {ids[0]: ("c2", 2), ids[1]: ("c2", 2)}
    assert _pending(r, "s", "g", "c1") == {ids[2]: ("c1", 1)}


def test_claim_skips_entries_that_became_active_or_are_not_pending(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"n": str(i)}).decode() for i in range(3)]
    r.xgroup_create("s", "g", id="0")
    _deliver(r, "s", "g", "c1")
    _make_idle(r, "s", "g", "c1", ids, 60_000)
    # ids[1]'s consumer touches it again (as a heartbeat would) after the operator's page loaded;
    # ids[2] was acked meanwhile.
    r.xclaim("s", "g", "c1", 0, [ids[1]], justid=True)
    r.xack("s", "g", ids[2])

    result = actions.claim(CONN, b"s", b"g", ids=ids, consumer=b"c2", min_idle_ms=30_000)

    assert result == actions.ClaimResult(claimed=(ids[0],), skipped=(ids[1], ids[2]), deleted=())
    assert _pending(r, "s", "g") == {ids[0]: ("c2", 2), ids[1]: ("c1", 1)}


def test_of_two_racing_claims_one_wins(r: redis.Redis) -> None:
    entry_id = r.xadd("s", {"n": "1"}).decode()
    r.xgroup_create("s", "g", id="0")
    _deliver(r, "s", "g", "c1")
    _make_idle(r, "s", "g", "c1", [entry_id], 60_000)

    first = actions.claim(CONN, b"s", b"g", ids=[entry_id], consumer=b"a", min_idle_ms=30_000)
    second = actions.claim(CONN, b"s", b"g", ids=[entry_id], consumer=b"b", min_idle_ms=30_000)

    assert (first.claimed, second.skipped) == ((entry_id,), (entry_id,))
    assert _pending(r, "s", "g") == {entry_id: ("a", 2)}


def test_claim_reports_pending_entries_whose_message_was_deleted(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"n": str(i)}).decode() for i in range(4)]
    r.xgroup_create("s", "g", id="0")
    _deliver(r, "s", "g", "c1")
    r.xdel("s", ids[1], ids[2])

    result = actions.claim(CONN, b"s", b"g", ids=[ids[0], ids[1]], consumer=b"c2", min_idle_ms=0)
    assert result == actions.ClaimResult(claimed=(ids[0],), skipped=(), deleted=(ids[1],))
    # Redis 7 drops a deleted entry from the PEL when a claim reaches it, even a guarded one...
    guarded = actions.claim(CONN, b"s", b"g", ids=[ids[2], ids[3]], consumer=b"c2", min_idle_ms=10**9)
    assert guarded == actions.ClaimResult(claimed=(), skipped=(ids[3],), deleted=(ids[2],))
    assert _pending(r, "s", "g") == {ids[0]: ("c2", 2), ids[3]: ("c1", 1)}
    # ...and what is not claimed can be acked away.
    r.xdel("s", ids[3])
    assert actions.ack(CONN, b"s", b"g", ids=[ids[3]]) == 1
    assert _pending(r, "s", "g") == {ids[0]: ("c2", 2)}


# ---------------------------------------------------------------- autoclaim


def test_autoclaim_sweeps_over_a_thousand_entries_in_batches(r: redis.Redis) -> None:
    pipe = r.pipeline()
    for i in range(2500):
        pipe.xadd("s", {"n": str(i)})
    ids = [x.decode() for x in pipe.execute()]
    r.xgroup_create("s", "g", id="0")
    _deliver(r, "s", "g", "c1")
    deleted = ids[100:2500:250]
    r.xdel("s", *deleted)

    partial = actions.autoclaim(CONN, b"s", b"g", consumer=b"c2", min_idle_ms=0, max_batches=1)
    assert partial.next is not None
    assert 0 < len(partial.claimed) <= 1000
    rest = actions.autoclaim(CONN, b"s", b"g", consumer=b"c2", min_idle_ms=0, start=partial.next)
    assert rest.next is None

    claimed = partial.claimed + rest.claimed
    expected = [i for i in ids if i not in deleted]
    assert sorted(claimed) == sorted(expected) and len(set(claimed)) == len(expected)
    assert sorted(partial.deleted + rest.deleted) == sorted(deleted)
    pending = _pending(r, "s", "g")
    assert pending == dict.fromkeys(expected, ("c2", 2))


def test_autoclaim_takes_only_entries_idle_long_enough(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"n": str(i)}).decode() for i in range(10)]
    r.xgroup_create("s", "g", id="0")
    _deliver(r, "s", "g", "c1")
    _make_idle(r, "s", "g", "c1", ids[::2], 60_000)

    result = actions.autoclaim(CONN, b"s", b"g", consumer=b"c2", min_idle_ms=30_000, count=3)

    assert result == actions.ClaimResult(claimed=tuple(ids[::2]), skipped=(), deleted=(), next=None)
    assert _pending(r, "s", "g", "c1") == dict.fromkeys(ids[1::2], ("c1", 1))


# ---------------------------------------------------------------- ack


def test_ack_returns_what_redis_counted(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"n": str(i)}).decode() for i in range(4)]
    r.xgroup_create("s", "g", id="0")
    _deliver(r, "s", "g", "c1", n=3)  # ids[3] never delivered
    r.xack("s", "g", ids[0])

    assert actions.ack(CONN, b"s", b"g", ids=ids) == 2  # ids[1], ids[2]
    assert _pending(r, "s", "g") == {}
    assert actions.ack(CONN, b"s", b"g", ids=ids) == 0


# ---------------------------------------------------------------- rewind


def _stream_of(r: redis.Redis, n: int, *, first_ms: int = 1_000) -> list[str]:
    """n entries with IDs ``<first_ms + i>-0`` and ``<first_ms + i>-1`` for even i (two per ms)."""
    pipe = r.pipeline()
    ids = []
    for i in range(n):
        ms = first_ms + i
        for seq in (0, 1) if i % 2 == 0 else (0,):
            ids.append(f"{ms}-{seq}")
            pipe.xadd("s", {"n": str(i)}, id=f"{ms}-{seq}")
    pipe.execute()
    return ids


def _check_rewind(r: redis.Redis, plan: actions.RewindPlan, expected_redelivered: list[str]) -> None:
    """Redis's lag and what XREADGROUP then delivers both equal the preview's figure."""
    assert plan.will_redeliver == len(expected_redelivered)
    row = _group_row(r, "s", "g")
    assert row["last-delivered-id"].decode() == plan.last_delivered_id
    assert row["lag"] == plan.will_redeliver
    assert _deliver(r, "s", "g", "reader") == expected_redelivered


def test_rewind_to_an_id_preview_equals_lag_and_redelivery(r: redis.Redis) -> None:
    ids = _stream_of(r, 100)
    r.xgroup_create("s", "g", id="$")
    target = ids[40]

    preview = actions.rewind_preview(CONN, b"s", b"g", to=target)
    assert _group_row(r, "s", "g")["last-delivered-id"].decode() == ids[-1]  # nothing changed

    plan = actions.rewind(CONN, b"s", b"g", to=target)
    assert plan == preview
    assert plan.current_last_delivered_id == ids[-1]
    assert plan.entries_read == 41 and plan.lag_known
    _check_rewind(r, plan, ids[41:])
    assert _group_row(r, "s", "g")["lag"] == 0


def test_rewind_to_a_time_redelivers_from_that_millisecond(r: redis.Redis) -> None:
    ids = _stream_of(r, 100)
    r.xgroup_create("s", "g", id="$")
    when = datetime.fromtimestamp(1.050, tz=UTC).isoformat()  # the ms 1050, which holds 1050-0 and 1050-1

    plan = actions.rewind(CONN, b"s", b"g", to=when)

    expected = [i for i in ids if int(i.split("-")[0]) >= 1050]
    assert plan.last_delivered_id == "1049-0"
    _check_rewind(r, plan, expected)
    # A bare millisecond means the same.
    assert actions.rewind_preview(CONN, b"s", b"g", to="1050").will_redeliver == len(expected)


def test_rewind_to_start_of_a_trimmed_stream_and_to_the_end(r: redis.Redis) -> None:
    ids = _stream_of(r, 100)
    r.xtrim("s", maxlen=80, approximate=False)
    r.xgroup_create("s", "g", id="$")

    plan = actions.rewind(CONN, b"s", b"g", to="0")
    assert plan.last_delivered_id == "0-0"
    _check_rewind(r, plan, ids[-80:])

    end = actions.rewind(CONN, b"s", b"g", to="$")
    assert (end.last_delivered_id, end.will_redeliver) == (ids[-1], 0)
    assert _group_row(r, "s", "g")["lag"] == 0


def test_rewind_past_deleted_entries_still_counts_exactly(r: redis.Redis) -> None:
    ids = _stream_of(r, 60)
    r.xgroup_create("s", "g", id="$")
    r.xdel("s", ids[50], ids[55])

    plan = actions.rewind(CONN, b"s", b"g", to=ids[20])

    expected = [i for i in ids[21:] if i not in (ids[50], ids[55])]
    assert plan.will_redeliver == len(expected) and not plan.lag_known
    assert _group_row(r, "s", "g")["lag"] is None  # Redis cannot tell with tombstones ahead
    assert _deliver(r, "s", "g", "reader") == expected
    assert _group_row(r, "s", "g")["lag"] == 0  # and recovers once past them


def test_rewind_on_a_big_stream_counts_in_batches(r: redis.Redis) -> None:
    pipe = r.pipeline()
    for i in range(25_000):
        pipe.xadd("s", {"n": str(i)}, id=f"{10_000 + i}-0")
    pipe.execute()
    r.xgroup_create("s", "g", id="$")

    plan = actions.rewind(CONN, b"s", b"g", to="12345-0")

    assert plan.will_redeliver == 25_000 - 2_346
    assert _group_row(r, "s", "g")["lag"] == plan.will_redeliver
    delivered = 0
    for _ in range(100):
        batch = _deliver(r, "s", "g", "reader", n=5_000)
        if not batch:
            break
        delivered += len(batch)
    assert delivered == plan.will_redeliver


# ---------------------------------------------------------------- requeue


def test_requeue_eventbus_entry(r: redis.Redis) -> None:
    dlq_id = r.xadd("orders:dlq", EVENTBUS_FIELDS).decode()

    result = actions.requeue(CONN, b"orders:dlq", ids=[dlq_id])

    [new_id] = [x.decode() for x, _ in r.xrange("orders")]
    assert result == actions.RequeueResult(
        requeued=(actions.Requeued(dlq_id=dlq_id, stream=b"orders", new_id=new_id),), missing=()
    )
    assert _fields(r, "orders") == [
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
    assert _fields(r, "actors") == [
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
    assert _fields(r, "omni-stream:file.uploaded") == [
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
    assert _fields(r, "jobs:email") == [
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

    origins = [dict(fields)[b"_requeued_from"] for fields in _fields(r, "orders")]
    assert len(origins) == rounds and len(set(origins)) == rounds
    assert r.xlen("orders:dlq") == 0


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
    origins = Counter(dict(fields)[b"_requeued_from"].decode() for fields in _fields(r, "orders"))
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
    origins = [dict(fields)[b"_requeued_from"].decode() for fields in _fields(r, "orders")]
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

    entries = _fields(r, "orders")
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
    for entry_id, flat in _raw_xrange(r, key):
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
        [[_, flat]] = _raw_xrange(r, stream, new_id, new_id)
        assert list(zip(flat[::2], flat[1::2], strict=True)) == fields
    assert {i.decode() for i, _ in _raw_xrange(r, key)} == failed
    assert len(moved) > 100


def test_bulk_requeue_of_omnidaemon_entries_plans_in_python(r: redis.Redis) -> None:
    good = [r.xadd(OMNI_KEY, {"data": OMNI_DATA}).decode() for _ in range(30)]
    broken = r.xadd(OMNI_KEY, {"data": b'{"topic": "file.uploaded", "error": "no message"}'}).decode()

    moved, failed = _requeue_all(OMNI_KEY, batch=8)

    assert set(moved) == set(good) and failed == {broken}
    assert {stream for stream, _ in moved.values()} == {b"omni-stream:file.uploaded"}
    payloads = {dict(f)[b"data"] for f in _fields(r, "omni-stream:file.uploaded")}
    assert payloads == {
        b'{"content": {"filename": "doc.pdf"}, "correlation_id": "req-123", "delivery_attempts": 4}'
    }
    assert [i.decode() for i, _ in _raw_xrange(r, OMNI_KEY)] == [broken]


# ---------------------------------------------------------------- DLQ listing, delete, purge


def test_dlq_entries_newest_first_with_paging_and_error_filter(r: redis.Redis) -> None:
    pipe = r.pipeline()
    for i in range(300):
        error = f"TimeoutError: attempt {i}" if i % 10 == 3 else f"ValueError: bad {i}"
        pipe.xadd("orders:dlq", {**EVENTBUS_FIELDS, b"dlq_error": error.encode()})
    ids = [x.decode() for x in pipe.execute()]

    page, cursor = actions.dlq_entries(CONN, b"orders:dlq", count=20)
    assert [e.id for e in page] == ids[::-1][:20] and cursor == ids[-20]
    assert page[0].convention == "eventbus" and page[0].original_stream == b"orders"
    page2, _ = actions.dlq_entries(CONN, b"orders:dlq", before=cursor, after=ids[270], count=50)
    assert [e.id for e in page2] == ids[271:280][::-1]

    expected = [i for n, i in enumerate(ids) if n % 10 == 3][::-1]
    found: list[str] = []
    before = None
    for _ in range(100):
        page, before = actions.dlq_entries(
            CONN, b"orders:dlq", before=before, count=7, error_contains="timeout", scan_limit=45
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


# ---------------------------------------------------------------- replay


def _replay_stream(r: redis.Redis, n: int = 500) -> list[str]:
    pipe = r.pipeline()
    ids = []
    for i in range(n):
        ids.append(f"{5_000 + i}-0")
        fields = {"kind": "a" if i % 3 == 0 else "b", "n": str(i)}
        if i % 7 == 0:
            fields["_replayed_from"] = "1-1"  # a copy of a copy gets one fresh marker
        pipe.xadd("src", fields, id=ids[-1])
    pipe.execute()
    return ids


def _python_matches(r: redis.Redis, first: str, last: str, match: dict[bytes, bytes]) -> list[str]:
    raw = _raw_xrange(r, "src", first, last)
    return [
        entry_id.decode()
        for entry_id, flat in raw
        if all((k, v) in zip(flat[::2], flat[1::2], strict=True) for k, v in match.items())
    ]


def test_replay_count_equals_a_plain_python_filter(r: redis.Redis) -> None:
    ids = _replay_stream(r)
    assert actions.replay_count(CONN, b"src", start=ids[100], end=ids[399], match={b"kind": b"a"}) == len(
        _python_matches(r, ids[100], ids[399], {b"kind": b"a"})
    )
    assert actions.replay_count(CONN, b"src", start="-", end="+") == 500
    by_time = actions.replay_count(
        CONN, b"src", start="1970-01-01T00:00:05.010Z", end="5020", match={b"kind": b"b", b"n": b"11"}
    )
    assert by_time == 1
    detail = actions.replay_count_detail(CONN, b"src", start="-", end="+", limit=50)
    assert detail == actions.ReplayCount(matched=50, scanned=50, complete=False)


def test_replay_copies_with_marker_and_resumes_from_the_redis_side_cursor(r: redis.Redis) -> None:
    ids = _replay_stream(r)
    first, last = actions.resolve_range(CONN, b"src", ids[10], "+")
    assert (first, last) == (ids[10], ids[-1])
    match = {b"kind": b"a"}
    job_key = b"busconsole:job:7:cursor"

    saved = None
    for _ in range(2):  # two batches; the caller saves its progress after the first only
        batch = actions.replay_range(
            CONN,
            b"src",
            start=first,
            end=last,
            target=b"dst",
            match=match,
            after=saved,
            batch=40,
            job_key=job_key,
        )
        if saved is None:
            saved = batch.cursor
    assert actions.replay_cursor(CONN, job_key) == ids[10 + 80 - 1]

    stale, rounds = saved, 0
    while True:
        batch = actions.replay_range(
            CONN,
            b"src",
            start=first,
            end=last,
            target=b"dst",
            match=match,
            after=stale,
            batch=40,
            job_key=job_key,
        )
        stale, rounds = batch.cursor, rounds + 1
        if stale is None:
            break
        assert rounds < 50

    expected = _python_matches(r, first, last, match)
    copies = _fields(r, "dst")
    assert [dict(c)[b"_replayed_from"].decode() for c in copies] == expected
    originals = {
        entry_id.decode(): list(zip(flat[::2], flat[1::2], strict=True))
        for entry_id, flat in _raw_xrange(r, "src")
    }
    for copy, origin in zip(copies, expected, strict=True):
        assert copy == [f for f in originals[origin] if f[0] != b"_replayed_from"] + [
            (b"_replayed_from", origin.encode())
        ]
    # The job is done: running it again copies nothing.
    again = actions.replay_range(
        CONN, b"src", start=first, end=last, target=b"dst", match=match, job_key=job_key
    )
    assert (again.copied, again.cursor) == (0, None)


def test_replay_into_the_same_stream_stops_at_the_resolved_end(r: redis.Redis) -> None:
    ids = _replay_stream(r, 100)
    first, last = actions.resolve_range(CONN, b"src", "-", "2100-01-01T00:00:00Z")
    assert last == ids[-1]

    after, copied = None, 0
    for _ in range(100):
        batch = actions.replay_range(CONN, b"src", start=first, end=last, target=b"src", after=after, batch=7)
        copied += batch.copied
        after = batch.cursor
        if after is None:
            break
    assert copied == 100 and r.xlen("src") == 200
    copies = _fields(r, "src")[100:]
    assert [dict(c)[b"_replayed_from"].decode() for c in copies] == ids


# ---------------------------------------------------------------- bad input


def test_bad_inputs_are_refused(r: redis.Redis) -> None:
    entry_id = r.xadd("s", {"n": "1"}).decode()
    r.xgroup_create("s", "g", id="0")
    r.set("text", "x")
    claim = actions.claim
    with pytest.raises(InvalidArgument):
        claim(CONN, b"s", b"g", ids=["not-an-id"], consumer=b"c", min_idle_ms=0)
    with pytest.raises(InvalidArgument):
        claim(CONN, b"s", b"g", ids=[entry_id], consumer=b"c", min_idle_ms=-1)
    with pytest.raises(InvalidArgument):
        claim(CONN, b"s", b"g", ids=[], consumer=b"c", min_idle_ms=0)
    with pytest.raises(InvalidArgument):
        claim(CONN, b"s", b"g", ids=[f"{i}-0" for i in range(1, 1002)], consumer=b"c", min_idle_ms=0)
    with pytest.raises(InvalidArgument):
        claim(CONN, b"s", b"g", ids=[entry_id], consumer=b"", min_idle_ms=0)
    with pytest.raises(NotFound):
        claim(CONN, b"nope", b"g", ids=[entry_id], consumer=b"c", min_idle_ms=0)
    with pytest.raises(NotFound):
        claim(CONN, b"s", b"nope", ids=[entry_id], consumer=b"c", min_idle_ms=0)
    with pytest.raises(NotFound):
        actions.autoclaim(CONN, b"s", b"nope", consumer=b"c", min_idle_ms=0)
    with pytest.raises(InvalidArgument):
        actions.autoclaim(CONN, b"s", b"g", consumer=b"c", min_idle_ms=-5)
    with pytest.raises(NotFound):
        actions.ack(CONN, b"s", b"nope", ids=[entry_id])
    with pytest.raises(NotFound):
        actions.ack(CONN, b"nope", b"g", ids=[entry_id])
    with pytest.raises(NotFound):
        actions.rewind(CONN, b"s", b"nope", to="0")
    with pytest.raises(NotFound):
        actions.rewind_preview(CONN, b"text", b"g", to="0")
    for bad in ("", "yesterday", "1-2-3"):
        with pytest.raises(InvalidArgument):
            actions.rewind_preview(CONN, b"s", b"g", to=bad)
    with pytest.raises(InvalidArgument):
        actions.rewind(CONN, b"s", b"g", to="99999999999999-0")  # after the last ID: use $
    with pytest.raises(NotFound):
        actions.requeue(CONN, b"nope:dlq", ids=["1-1"])
    with pytest.raises(InvalidArgument):
        actions.requeue_range(CONN, b"orders:dlq", up_to="+")
    with pytest.raises(NotFound):
        actions.resolve_range(CONN, b"nope", "-", "+")
    with pytest.raises(InvalidArgument):
        actions.resolve_range(CONN, b"s", "2000", "1000")
    with pytest.raises(InvalidArgument):
        actions.replay_range(CONN, b"s", start="0-0", end="+", target=b"t")
    with pytest.raises(InvalidArgument):
        actions.replay_range(CONN, b"s", start="0-0", end=entry_id, target=b"text")
    with pytest.raises(InvalidArgument):
        actions.replay_count(CONN, b"s", start="-", end="+", match={"kind": "a"})  # type: ignore[dict-item]
    assert _pending(r, "s", "g") == {}  # nothing above changed anything
