"""What the metrics tests share: a small bus in Redis, the mirror rows of its streams and groups, a check
of a mirrored stream against Redis's own XINFO, and the segments of an SVG chart path.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime

import redis

from streams_app.metrics.models import GroupMirror, StreamMirror, name_hash
from tests.console.helpers import CONN

T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


def bus(r: redis.Redis) -> None:
    """Two streams with groups, consumers and pending entries, a DLQ and an empty stream."""
    for i in range(12):
        r.xadd("orders", {"type": "order.created", "n": str(i)})
    r.xgroup_create("orders", "billing", id="0")
    r.xgroup_create("orders", "shipping", id="$")
    r.xreadgroup("billing", "worker-1", {"orders": ">"}, count=5)
    r.xreadgroup("billing", "worker-2", {"orders": ">"}, count=2)
    r.xack("orders", "billing", r.xpending_range("orders", "billing", "-", "+", 1)[0]["message_id"])
    for i in range(3):
        r.xadd("orders:dlq", {"type": "order.created", "n": str(i), "dlq_error": "boom"})
    r.xadd(b"bin\xff\x00key", {b"\xfe": b"\x00"})
    r.xgroup_create(b"bin\xff\x00key", b"g\xff", id="0")
    r.xadd("empty", {"x": "1"})
    r.xtrim("empty", maxlen=0, approximate=False)


def mirror_row(key: bytes | str) -> StreamMirror:
    key = key.encode() if isinstance(key, str) else key
    return StreamMirror.objects.get(connection=CONN, key_hash=name_hash(key))


def group_row(key: str | bytes, group: str | bytes) -> GroupMirror:
    group = group.encode() if isinstance(group, str) else group
    return GroupMirror.objects.get(stream=mirror_row(key), name_hash=name_hash(group))


def _id(value: bytes | None) -> str | None:
    return value.decode() if value is not None else None


def assert_stream_matches_redis(r: redis.Redis, key: str | bytes) -> None:
    info = r.xinfo_stream(key)
    row = mirror_row(key)
    assert row.deleted_at is None
    assert row.length == info["length"]
    assert row.first_id == (_id(info["first-entry"][0]) if info["first-entry"] else None)
    assert row.last_id == (_id(info["last-entry"][0]) if info["last-entry"] else None)
    assert row.last_generated_id == _id(info["last-generated-id"])
    assert row.entries_added == info["entries-added"]
    groups = r.xinfo_groups(key)
    assert row.groups_count == len(groups)
    assert row.pending == sum(g["pending"] for g in groups)
    for g in groups:
        mirrored = group_row(key, g["name"])
        assert mirrored.deleted_at is None
        assert (mirrored.consumers, mirrored.pending, mirrored.last_delivered_id, mirrored.entries_read,
                mirrored.lag) == (g["consumers"], g["pending"], _id(g["last-delivered-id"]), g["entries-read"], g["lag"])
        consumers = r.xinfo_consumers(key, g["name"])
        live = {c["name"]: c for c in consumers}
        rows = {bytes(c.name): c for c in mirrored.consumer_rows.filter(deleted_at__isnull=True)}
        assert set(rows) == set(live)
        for name, c in live.items():
            assert rows[name].pending == c["pending"]


def path_points(d: str) -> list[list[tuple[float, float]]]:
    """The segments of an SVG path made of M/L commands (and the lone-point ``h0``)."""
    segments: list[list[tuple[float, float]]] = []
    for command, x, y in re.findall(r"([ML])(-?[\d.]+),(-?[\d.]+)", d):
        if command == "M":
            segments.append([])
        segments[-1].append((float(x), float(y)))
    return segments
