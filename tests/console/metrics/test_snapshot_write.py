"""The rows a snapshot writes, checked against Redis read independently (redis-py's SCAN, XINFO and XLEN).

Covers what the set-based write decides in SQL: which mirror rows it updates (figures, un-deletion of a
stream or group that came back), which it creates, the ids the samples get, and ``added`` and the rate
counted against the previous tick, including a stream deleted and made again. Runs on SQLite and, with
``make test-postgres``, on PostgreSQL.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta

import redis
from django.db import connection
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from streams_app.metrics import snapshot_write, snapshots
from streams_app.metrics.models import (
    DlqSample,
    GroupMirror,
    GroupSample,
    SnapshotRun,
    StreamMirror,
    StreamSample,
)
from tests.console.helpers import CONN
from tests.console.metrics.helpers import T0, bus, group_row, mirror_row

LATER = T0 + timedelta(seconds=10)


def _id(value: bytes | None) -> str | None:
    return value.decode() if value is not None else None


def _redis_facts(r: redis.Redis) -> dict[bytes, tuple[dict, list[dict]]]:
    """Every stream of the server with its XINFO STREAM and XINFO GROUPS replies."""
    return {key: (r.xinfo_stream(key), r.xinfo_groups(key)) for key in r.scan_iter(_type="stream")}


def _assert_tick_matches(r: redis.Redis, at, *, added: dict[bytes, int | None], seconds: float | None) -> None:
    facts = _redis_facts(r)
    samples = {bytes(s.stream.key): s for s in StreamSample.objects.filter(at=at, resolution="raw").select_related("stream")}
    assert set(samples) == set(facts)
    group_samples = GroupSample.objects.filter(at=at, resolution="raw").select_related("group__stream")
    assert {(bytes(g.group.stream.key), bytes(g.group.name)) for g in group_samples} == {
        (key, g["name"]) for key, (_, groups) in facts.items() for g in groups
    }
    for key, (info, groups) in facts.items():
        row = mirror_row(key)
        assert row.deleted_at is None
        assert (row.length, row.entries_added, row.last_generated_id) == (
            info["length"], info["entries-added"], _id(info["last-generated-id"]))
        assert row.first_id == (_id(info["first-entry"][0]) if info["first-entry"] else None)
        assert row.last_id == (_id(info["last-entry"][0]) if info["last-entry"] else None)
        assert (row.groups_count, row.pending) == (len(groups), sum(g["pending"] for g in groups))
        sample = samples[key]
        assert (sample.length, sample.entries_added, sample.added) == (info["length"], info["entries-added"], added[key])
        expected_rate = added[key] / seconds if added[key] is not None and seconds else None
        assert sample.rate_per_s == expected_rate
        for g in groups:
            mirrored = group_row(key, g["name"])
            assert mirrored.deleted_at is None
            assert (mirrored.consumers, mirrored.pending, mirrored.last_delivered_id, mirrored.entries_read,
                    mirrored.lag) == (g["consumers"], g["pending"], _id(g["last-delivered-id"]), g["entries-read"],
                                      g["lag"])
            gs = GroupSample.objects.get(group=mirrored, at=at, resolution="raw")
            assert (gs.lag, gs.pending) == (g["lag"], g["pending"])
            assert (gs.oldest_pending_idle_ms is None) == (g["pending"] == 0)
    dlqs = {bytes(s.stream.key): s.depth for s in DlqSample.objects.filter(at=at).select_related("stream")}
    assert dlqs == {key: r.xlen(key) for key in facts if key.endswith(b":dlq")}


def test_the_written_rows_match_redis_tick_after_tick(r: redis.Redis, db) -> None:
    bus(r)
    first = _redis_facts(r)
    snapshots.snapshot_take(tick=T0)
    _assert_tick_matches(r, T0, added=dict.fromkeys(first), seconds=None)  # no previous tick: no rate

    for i in range(7):
        r.xadd("orders", {"type": "order.created", "n": str(100 + i)})
    r.xreadgroup("shipping", "worker-3", {"orders": ">"}, count=4)  # shipping now has pending entries
    r.xack("orders", "billing", r.xpending_range("orders", "billing", "-", "+", 1)[0]["message_id"])
    r.delete("orders:dlq")  # made again, shorter: its counter restarts, so all its entries are new
    r.xadd("orders:dlq", {"type": "order.created", "dlq_error": "boom"})
    r.xadd("payments", {"type": "payment.taken"})  # a new stream with a new group
    r.xgroup_create("payments", "ledger", id="0")
    r.xgroup_create(b"bin\xff\x00key", b"second", id="$")  # a new group of a known stream
    r.xadd("empty", {"x": "2"})
    before = {key: (info["entries-added"], info["length"]) for key, (info, _) in first.items()}
    snapshots.snapshot_take(tick=LATER)

    now = _redis_facts(r)
    expected: dict[bytes, int | None] = {}
    for key, (info, _) in now.items():
        if key not in before:
            expected[key] = None  # first sample of the stream
        elif info["entries-added"] >= before[key][0]:
            expected[key] = info["entries-added"] - before[key][0]
        else:
            expected[key] = info["entries-added"]
    assert expected[b"orders"] == 7 and expected[b"orders:dlq"] == 1 and expected[b"empty"] == 1  # plain arithmetic
    _assert_tick_matches(r, LATER, added=expected, seconds=10.0)
    assert StreamMirror.objects.filter(connection=CONN).count() == len(now)


def test_a_stream_and_a_group_that_came_back_are_undeleted_with_fresh_figures(r: redis.Redis, db) -> None:
    bus(r)
    snapshots.snapshot_take(tick=T0)
    gone = timezone.now()
    StreamMirror.objects.filter(pk=mirror_row("orders").pk).update(deleted_at=gone, length=0, pending=0)
    GroupMirror.objects.filter(pk=group_row("orders", "billing").pk).update(deleted_at=gone, pending=0)
    shipping = group_row("orders", "shipping")
    GroupMirror.objects.filter(pk=shipping.pk).update(deleted_at=gone)  # figures unchanged: still back
    ids = {key: mirror_row(key).pk for key in (b"orders", b"orders:dlq")}
    snapshots.snapshot_take(tick=LATER)
    assert {key: mirror_row(key).pk for key in ids} == ids  # the same rows, not new ones
    assert group_row("orders", "shipping").pk == shipping.pk
    info = r.xinfo_stream("orders")
    assert StreamSample.objects.get(stream_id=ids[b"orders"], at=LATER).added == 0
    _assert_tick_matches(r, LATER, added=dict.fromkeys(_redis_facts(r), 0), seconds=10.0)
    assert mirror_row("orders").length == info["length"]


def test_samples_left_of_a_tick_whose_run_was_forgotten_are_kept_and_the_rest_written(
    r: redis.Redis, db
) -> None:
    """A tick taken again after retention dropped its run but not all its samples: the fast plain insert
    meets existing rows, and the tick is still written in full, keeping the rows it found."""
    bus(r)
    snapshots.snapshot_take(tick=T0)
    snapshots.snapshot_take(tick=LATER)
    SnapshotRun.objects.filter(tick=LATER).delete()
    kept = StreamSample.objects.get(stream=mirror_row("orders"), at=LATER)
    StreamSample.objects.filter(pk=kept.pk).update(length=-1)  # a marker: a rewrite would put the length back
    StreamSample.objects.filter(stream=mirror_row("orders:dlq"), at=LATER).delete()
    GroupSample.objects.filter(group=group_row("orders", "billing"), at=LATER).delete()
    r.xadd("payments", {"type": "payment.taken"})  # and a stream the mirror has not seen yet
    r.xgroup_create("payments", "ledger", id="0")

    run = snapshots.snapshot_take(tick=LATER)

    facts = _redis_facts(r)
    assert (run.streams, run.groups) == (len(facts), sum(len(groups) for _, groups in facts.values()))
    assert StreamSample.objects.get(pk=kept.pk).length == -1
    samples = StreamSample.objects.filter(at=LATER, resolution="raw")
    assert sorted(bytes(s.stream.key) for s in samples.select_related("stream")) == sorted(facts)
    assert samples.get(stream=mirror_row("orders:dlq")).length == r.xlen("orders:dlq")
    assert (
        GroupSample.objects.get(group=group_row("orders", "billing"), at=LATER).pending
        == r.xpending("orders", "billing")["pending"]
    )
    assert GroupSample.objects.filter(at=LATER).count() == sum(len(groups) for _, groups in facts.values())
    assert samples.get(stream=mirror_row("payments")).added is None  # its first sample


def test_the_key_memo_is_bounded_and_forgets_when_the_conventions_change(
    r: redis.Redis, db, settings, monkeypatch
) -> None:
    """Stream rows are found by the SHA-256 of the key whatever the memo holds, a long key is not
    remembered, the memo starts over at its bound, and a key that a new convention makes a DLQ gets DLQ
    samples from the next tick."""
    monkeypatch.setattr(snapshot_write, "_KEY_MEMO", snapshot_write._KeyMemo())  # not what earlier tests left
    monkeypatch.setattr(snapshot_write, "KEY_MEMO_MAX", 3)
    bus(r)
    long_key = b"long:" + b"\xff" * (snapshot_write.KEY_MEMO_KEY_MAX + 1)
    r.xadd(long_key, {"x": "1"})
    r.xadd("jobs:email:dead", {"task": "send"})
    snapshots.snapshot_take(tick=T0)
    keys = set(r.scan_iter(_type="stream"))
    assert {bytes(m.key): m.key_hash for m in StreamMirror.objects.filter(connection=CONN)} == {
        key: hashlib.sha256(key).hexdigest() for key in keys
    }
    memo = snapshot_write._KEY_MEMO.facts
    assert 0 < len(memo) <= 3 and long_key not in memo
    assert all(memo[key] == (hashlib.sha256(key).hexdigest(), key.endswith(b":dlq")) for key in memo)
    assert not DlqSample.objects.filter(stream=mirror_row("jobs:email:dead")).exists()

    settings.BUSCONSOLE_DLQ_PATTERNS = json.dumps(
        [{"name": "jobs-dead", "match": "jobs:*:dead", "target": "strip_suffix::dead"}]
    )
    snapshots.snapshot_take(tick=LATER)
    assert DlqSample.objects.get(stream=mirror_row("jobs:email:dead"), at=LATER).depth == 1
    assert DlqSample.objects.get(stream=mirror_row("orders:dlq"), at=LATER).depth == r.xlen("orders:dlq")


def test_the_connection_settings_of_a_tick_are_put_back(r: redis.Redis, db) -> None:
    """SQLite's page caches and PostgreSQL's planner settings are the tick's only: as they were after it."""
    bus(r)
    if connection.vendor == "sqlite":
        queries = ["PRAGMA main.cache_size", "PRAGMA temp.cache_size"]
    else:
        queries = ["SHOW work_mem", "SHOW enable_nestloop"]

    def current() -> list:
        with connection.cursor() as cursor:
            out = []
            for query in queries:
                cursor.execute(query)
                out.append(cursor.fetchone()[0])
            return out

    before = current()
    snapshots.snapshot_take(tick=T0)
    assert current() == before


def test_the_streams_of_a_tick_are_looked_up_in_the_mirror_once(r: redis.Redis, db) -> None:
    """The mirror rows of a tick's streams are found by their key's hash once: on PostgreSQL one statement
    refreshes the stream rows, writes their samples and returns their ids; on SQLite one statement puts
    the ids in the staged rows, and the refresh, the samples and the ids go by id. A changed stream's row
    and the rate come out as Redis says either way."""
    bus(r)
    snapshots.snapshot_take(tick=T0)
    before = r.xinfo_stream("orders")["entries-added"]
    for i in range(3):
        r.xadd("orders", {"type": "order.created", "n": str(i)})
    with CaptureQueriesContext(connection) as captured:
        snapshots.snapshot_take(tick=LATER)
    staged = snapshot_write.STAGED_STREAMS
    by_hash = connection.ops.quote_name("key_hash") + " = s.key_hash"
    joined = [q["sql"] for q in captured.captured_queries if staged in q["sql"] and by_hash in q["sql"]]
    # the statements finding the staged streams' mirror rows by hash: the one above, then the DLQ samples'
    assert len(joined) == 2, joined
    info = r.xinfo_stream("orders")
    assert mirror_row("orders").length == info["length"]
    sample = StreamSample.objects.get(stream=mirror_row("orders"), at=LATER)
    assert (sample.added, sample.rate_per_s) == (info["entries-added"] - before, (info["entries-added"] - before) / 10.0)
