"""What the access-layer tests share: sample dead letters as their producers write them, the bus's metric
entries, and small reads of a real Redis that give the expected values independently of ``redis_ops``.

The reads go through redis-py straight to the server (XPENDING, XINFO GROUPS, XREADGROUP, a raw XRANGE),
never through the code under test.
"""

from __future__ import annotations

import redis

# An eventbus dead letter, field by field in the order ``eventbus.dlq`` writes them.
EVENTBUS_ENTRY: list[tuple[bytes, bytes]] = [
    (b"type", b"order.created"),
    (b"data", b'{"order_id": 7}'),
    (b"id", b"evt-1"),
    (b"ts", b"1699999999000"),
    (b"_retries", b"5"),
    (b"dlq_original_stream", b"orders"),
    (b"dlq_original_id", b"1699999999000-0"),
    (b"dlq_group", b"billing"),
    (b"dlq_error", b"ValueError: card declined \xe2\x9c\x97"),
    (b"dlq_traceback", b'Traceback (most recent call last):\n  File "app.py"'),
    (b"dlq_retries", b"5"),
    (b"dlq_failed_at", b"1700000000100"),
]
# The same dead letter as a mapping, the way the tests XADD it with redis-py.
EVENTBUS_FIELDS: dict[bytes, bytes] = dict(EVENTBUS_ENTRY)

# An OmniDaemon dead letter: one ``data`` field holding a JSON document.
OMNI_KEY = b"omni-dlq:group:file.uploaded:file-processor"
OMNI_DATA = (
    b'{"topic": "file.uploaded", "original_stream": "omni-stream:file.uploaded", '
    b'"original_id": "1678901234567-0", "failed_message": {"content": {"filename": "doc.pdf"}, '
    b'"correlation_id": "req-123", "delivery_attempts": 4}, "error": "Max retries (3) exceeded", '
    b'"retry_count": 3, "failed_at": 1678901300.123}'
)

METRICS = "eventbus:metrics"


def metric_entry(
    event: str, *, stream: str = "orders", group: str = "billing", type_: str = "order.created",
    count: int = 1, duration_ms: float = 0.0, max_ms: float | None = None, **extra: str,
) -> dict[str, str]:
    """A metric entry exactly as ``eventbus.metrics.MetricsBuffer._fields`` writes one."""
    fields = {
        "event": event, "stream": stream, "group": group, "type": type_, "count": str(count),
        "duration_ms": f"{duration_ms:.3f}", "max_ms": f"{(duration_ms if max_ms is None else max_ms):.3f}",
        "consumer": "worker-1", "ts": "0",
    }
    return {**fields, **extra}


def pel(r: redis.Redis, key: str, group: str, consumer: str | None = None) -> dict[str, tuple[str, int]]:
    """{id: (consumer, deliveries)} as XPENDING's extended form says."""
    rows = r.xpending_range(key, group, "-", "+", 10_000, consumername=consumer)
    return {row["message_id"].decode(): (row["consumer"].decode(), row["times_delivered"]) for row in rows}


def deliver(r: redis.Redis, key: str, group: str, consumer: str, n: int = 10_000) -> list[str]:
    """The IDs XREADGROUP ``>`` hands ``consumer``, oldest first."""
    reply = r.xreadgroup(group, consumer, {key: ">"}, count=n)
    return [entry_id.decode() for entry_id, _ in reply[0][1]] if reply else []


def make_idle(r: redis.Redis, key: str, group: str, consumer: str, ids: list[str], idle_ms: int) -> None:
    """Pretend ``ids`` were last delivered ``idle_ms`` ago (XCLAIM IDLE, JUSTID: deliveries unchanged)."""
    r.xclaim(key, group, consumer, 0, ids, idle=idle_ms, justid=True)


def raw_xrange(r: redis.Redis, key: str | bytes, start: str = "-", end: str = "+") -> list:
    """XRANGE as Redis replies: [[id, [name, value, ...]], ...] (redis-py would make dicts)."""
    raw = redis.Redis(connection_pool=r.connection_pool)
    raw.set_response_callback("XRANGE", lambda response, **options: response)
    return raw.xrange(key, start, end)


def stream_fields(r: redis.Redis, key: str | bytes) -> list[list[tuple[bytes, bytes]]]:
    """Every entry's fields in order, as Redis holds them (raw, so order and duplicates survive)."""
    raw = raw_xrange(r, key)
    return [list(zip(flat[::2], flat[1::2], strict=True)) for _, flat in raw]


def group_row(r: redis.Redis, key: str, group: str) -> dict:
    """The group's row of XINFO GROUPS."""
    return next(g for g in r.xinfo_groups(key) if g["name"] == group.encode())
