"""The incremental mirror sync: only the streams whose facts changed are read again with their consumers
and rewritten; vanished streams are marked only by a full pass; the beat body runs a full pass when one
is due. What changed is decided by the test's own Redis commands, and the rows are checked against
Redis's XINFO (tests/console/metrics/helpers.py).
"""

from __future__ import annotations

from datetime import timedelta

import pytest
import redis
from django.db import connection
from django.utils import timezone

from streams_app.metrics import mirror, mirror_schedule, snapshots
from streams_app.metrics.mirror import prefix_filter
from streams_app.metrics.models import ConsumerMirror, MirrorState, StreamMirror, name_hash
from tests.console.helpers import CONN
from tests.console.metrics.helpers import assert_stream_matches_redis, bus, group_row, mirror_row


def _many(r: redis.Redis, n: int) -> None:
    for i in range(n):
        r.xadd(f"quiet:{i}", {"n": str(i)})
        r.xgroup_create(f"quiet:{i}", "g", id="0")
        r.xreadgroup("g", "c", {f"quiet:{i}": ">"}, count=1)


def test_an_incremental_sync_rewrites_only_what_changed(r: redis.Redis, db) -> None:
    bus(r)
    _many(r, 30)
    first = mirror.mirror_sync(conn=CONN, full=False)  # nothing mirrored yet: every stream is new
    assert first.streams_written == first.streams == 34 and first.streams_created == 34
    before = dict(StreamMirror.objects.values_list("key_hash", "last_seen"))

    nothing = mirror.mirror_sync(conn=CONN, full=False)
    assert nothing.streams_written == 0 and nothing.streams == 34

    r.xadd("quiet:7", {"n": "again"})  # a new entry
    r.xreadgroup("billing", "worker-9", {"orders": ">"}, count=1)  # a new consumer in another stream
    r.xadd("fresh", {"x": "1"})  # a new stream
    changed = mirror.mirror_sync(conn=CONN, full=False)
    assert changed.streams_written == 3 and changed.streams_created == 1
    for key in ("quiet:7", "orders", "fresh"):
        assert_stream_matches_redis(r, key)
    assert ConsumerMirror.objects.filter(group=group_row("orders", "billing"), name_hash=name_hash(b"worker-9"),
                                         deleted_at__isnull=True).exists()
    after = dict(StreamMirror.objects.values_list("key_hash", "last_seen"))
    untouched = [h for h in before if h not in {name_hash(b"quiet:7"), name_hash(b"orders")}]
    assert all(after[h] == before[h] for h in untouched)  # rows of unchanged streams were not written


def test_only_a_full_pass_marks_vanished_streams(r: redis.Redis, db) -> None:
    bus(r)
    mirror.mirror_sync(conn=CONN, full=True)
    r.delete("empty")
    r.xgroup_delconsumer("orders", "billing", "worker-2")

    inc = mirror.mirror_sync(conn=CONN, full=False)
    assert inc.streams_deleted == 0 and mirror_row("empty").deleted_at is None
    gone = ConsumerMirror.objects.get(group=group_row("orders", "billing"), name_hash=name_hash(b"worker-2"))
    assert gone.deleted_at == inc.synced_at  # a vanished consumer of a changed stream is marked at once

    full = mirror.mirror_sync(conn=CONN, full=True)
    assert full.streams_deleted == 1 and mirror_row("empty").deleted_at == full.synced_at
    state = MirrorState.objects.get(connection=CONN)
    assert state.full and state.full_synced_at == full.synced_at and state.streams == 3


def test_a_stream_that_comes_back_is_rewritten_by_the_next_incremental_pass(r: redis.Redis, db) -> None:
    bus(r)
    mirror.mirror_sync(conn=CONN, full=True)
    r.delete("empty")
    mirror.mirror_sync(conn=CONN, full=True)
    r.xadd("empty", {"x": "back"})
    back = mirror.mirror_sync(conn=CONN, full=False)
    assert back.streams_returned == 1 and back.streams_written == 1
    assert_stream_matches_redis(r, "empty")


def test_the_beat_body_runs_a_full_pass_when_one_is_due(r: redis.Redis, db, settings) -> None:
    settings.BUSCONSOLE_MIRROR_FULL_EVERY_S = 300
    bus(r)
    now = timezone.now()
    assert mirror_schedule.mirror_sync_guarded(now=now)[CONN].full  # the first sync of a connection is full
    assert not mirror_schedule.mirror_sync_guarded(now=now + timedelta(seconds=60))[CONN].full
    assert mirror_schedule.mirror_sync_guarded(now=now + timedelta(seconds=301))[CONN].full


def test_a_snapshot_leaves_a_group_row_alone_when_only_the_idle_time_grew(r: redis.Redis, db) -> None:
    bus(r)
    snapshots.snapshot_take(tick=snapshots.snapshot_tick_for(now=timezone.now()))
    billing = group_row("orders", "billing")
    GroupMirror = type(billing)
    GroupMirror.objects.filter(pk=billing.pk).update(oldest_pending_idle_ms=1)  # as if read a while ago
    snapshots.snapshot_take(tick=snapshots.snapshot_tick_for(now=timezone.now()) + timedelta(seconds=10))
    assert group_row("orders", "billing").oldest_pending_idle_ms == 1
    r.xack("orders", "billing", r.xpending_range("orders", "billing", "-", "+", 1)[0]["message_id"])
    snapshots.snapshot_take(tick=snapshots.snapshot_tick_for(now=timezone.now()) + timedelta(seconds=20))
    row = group_row("orders", "billing")
    assert row.pending == r.xpending("orders", "billing")["pending"] and row.oldest_pending_idle_ms != 1


def test_after_a_full_pass_a_glob_prefix_reads_the_key_text_index(r: redis.Redis, db) -> None:
    if connection.vendor != "sqlite":
        pytest.skip("the statistics refresh and the range are SQLite's")
    _many(r, 40)
    r.xadd("orders:eu", {"x": "1"})
    mirror.mirror_sync(conn=CONN, full=True)
    rows = prefix_filter(StreamMirror.objects.filter(connection=CONN, deleted_at__isnull=True), b"orders:")
    assert [bytes(k) for k in rows.values_list("key", flat=True)] == [b"orders:eu"]
    sql, params = rows.order_by("key_text").values_list("id").query.sql_with_params()
    with connection.cursor() as cursor:
        cursor.execute("EXPLAIN QUERY PLAN " + sql, params)
        plan = " ".join(str(row[-1]) for row in cursor.fetchall())
    assert "key_text_" in plan and "key_text>?" in plan, plan  # the text index, by a range
