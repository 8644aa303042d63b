"""The metadata mirror, metric snapshots, rollups, ``/metrics`` and the beat tasks, against a real Redis.

Expected values come from Redis itself (redis-py's own XINFO/XPENDING parsing, not the console's) or from
plain-Python computations over the same inputs; the end-to-end test runs real ``celery worker`` and
``celery beat`` processes on the test database file.
"""

from __future__ import annotations

import asyncio
import math
import os
import random
import signal
import subprocess
import tempfile
import threading
from collections import defaultdict
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
import redis
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer
from django.db import connection, connections
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from busconsole.locks import lock_held
from streams_app import signals
from streams_app.live.groups import snapshot_group
from streams_app.metrics import snapshots
from streams_app.metrics.models import (
    ConsumerMirror,
    DlqSample,
    GroupMirror,
    GroupSample,
    SnapshotRun,
    StreamMirror,
    StreamSample,
    name_hash,
)
from streams_app.redis_ops import client as redis_client
from tests.console.helpers import wait_for
from tests.servers import REPO, RedisServer

CONN = "default"
T0 = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.fixture(autouse=True)
def _fresh_clients() -> Iterator[None]:
    redis_client.reset()
    yield
    redis_client.reset()


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


# ------------------------------------------------------------------------------------ mirror sync


def test_sync_creates_rows_as_redis_reports_them(r: redis.Redis, db) -> None:
    bus(r)
    result = snapshots.mirror_sync(conn=CONN)
    assert result.streams == result.streams_created == 4
    for key in ("orders", "orders:dlq", b"bin\xff\x00key", "empty"):
        assert_stream_matches_redis(r, key)
    dlq = mirror_row("orders:dlq")
    assert dlq.is_dlq and dlq.dlq_convention == "eventbus-or-streams" and dlq.dlq_sources == ["orders"]
    assert not mirror_row("orders").is_dlq
    binary = mirror_row(b"bin\xff\x00key")
    assert binary.key_bytes == b"bin\xff\x00key" and binary.key_text == "bin\\xff\x00key"
    assert group_row(b"bin\xff\x00key", b"g\xff").name_text == "g\\xff"
    assert mirror_row("empty").length == 0 and mirror_row("empty").last_id is None
    assert mirror_row("orders").lag == max(g["lag"] for g in r.xinfo_groups("orders"))


def test_sync_follows_changes_marks_vanished_and_restores_returned(r: redis.Redis, db) -> None:
    bus(r)
    snapshots.mirror_sync(conn=CONN)
    orders_id, first_seen = mirror_row("orders").pk, mirror_row("orders").first_seen
    shipping = group_row("orders", "shipping")

    r.xadd("orders", {"type": "late"})  # changed
    r.xreadgroup("billing", "worker-3", {"orders": ">"}, count=1)  # a new consumer
    r.xgroup_delconsumer("orders", "billing", "worker-2")  # vanished consumer
    r.xgroup_destroy("orders", "shipping")  # vanished group
    r.delete("empty")  # vanished stream
    r.xadd("fresh", {"x": "1"})  # created
    result = snapshots.mirror_sync(conn=CONN)

    assert (result.streams_created, result.streams_deleted, result.groups_deleted, result.consumers_deleted) == (1, 1, 1, 1)
    assert mirror_row("orders").pk == orders_id and mirror_row("orders").first_seen == first_seen
    for key in ("orders", "orders:dlq", "fresh"):
        assert_stream_matches_redis(r, key)
    assert mirror_row("empty").deleted_at == result.synced_at
    shipping.refresh_from_db()
    assert shipping.deleted_at == result.synced_at
    gone = ConsumerMirror.objects.get(group=group_row("orders", "billing"), name_hash=name_hash(b"worker-2"))
    assert gone.deleted_at == result.synced_at

    # they come back: same rows, no longer deleted
    r.xadd("empty", {"x": "again"})
    r.xgroup_create("orders", "shipping", id="$")
    again = snapshots.mirror_sync(conn=CONN)
    assert again.streams_returned == 1
    assert mirror_row("empty").deleted_at is None and group_row("orders", "shipping").pk == shipping.pk
    assert group_row("orders", "shipping").deleted_at is None
    assert_stream_matches_redis(r, "empty")
    assert_stream_matches_redis(r, "orders")


def test_an_unreachable_server_marks_nothing_deleted(r: redis.Redis, db, settings, spare_redis: RedisServer) -> None:
    spare = redis.Redis.from_url(spare_redis.url(0))
    spare.xadd("s", {"x": "1"})
    settings.BUS_REDIS_URLS = {CONN: settings.BUS_REDIS_URLS[CONN], "spare": spare_redis.url(0)}
    snapshots.mirror_sync(conn="spare")
    spare_redis.stop()
    redis_client.reset()
    with pytest.raises(Exception, match="unreachable"):
        snapshots.mirror_sync(conn="spare")
    assert StreamMirror.objects.get(connection="spare").deleted_at is None


# -------------------------------------------------------------------------------------- snapshots


def test_snapshot_values_match_xinfo_and_xpending(r: redis.Redis, db) -> None:
    bus(r)
    before = {g: r.xpending_range("orders", g, "-", "+", 1) for g in ("billing",)}
    run = snapshots.snapshot_take(tick=T0)
    after = r.xpending_range("orders", "billing", "-", "+", 1)
    assert run.tick == T0 and run.errors == [] and run.finished_at is not None
    assert (run.streams, run.groups) == (4, 3)

    for key in ("orders", "orders:dlq", b"bin\xff\x00key", "empty"):
        sample = StreamSample.objects.get(stream=mirror_row(key), at=T0, resolution="raw")
        info = r.xinfo_stream(key)
        assert (sample.length, sample.entries_added) == (info["length"], info["entries-added"])
        assert sample.added is None and sample.rate_per_s is None  # no previous tick to compare with
        for g in r.xinfo_groups(key):
            gs = GroupSample.objects.get(group=group_row(key, g["name"]), at=T0)
            assert (gs.lag, gs.pending) == (g["lag"], g["pending"])
            if g["pending"] == 0:
                assert gs.oldest_pending_idle_ms is None
    billing = GroupSample.objects.get(group=group_row("orders", "billing"), at=T0)
    oldest_before, oldest_after = before["billing"][0], after[0]
    assert oldest_before["message_id"] == oldest_after["message_id"]
    assert oldest_before["time_since_delivered"] <= billing.oldest_pending_idle_ms <= oldest_after["time_since_delivered"]
    assert group_row("orders", "billing").oldest_pending_id == oldest_after["message_id"].decode()

    dlqs = {bytes(s.stream.key): s.depth for s in DlqSample.objects.filter(at=T0).select_related("stream")}
    assert dlqs == {b"orders:dlq": r.xlen("orders:dlq")}


def test_rate_counts_entries_added_between_ticks(r: redis.Redis, db) -> None:
    r.xadd("s", {"x": "0"})
    snapshots.snapshot_take(tick=T0)
    for i in range(30):
        r.xadd("s", {"x": str(i)})
    r.xtrim("s", maxlen=5, approximate=False)  # trimming does not hide what was added
    snapshots.snapshot_take(tick=T0 + timedelta(seconds=10))
    sample = StreamSample.objects.get(stream=mirror_row("s"), at=T0 + timedelta(seconds=10))
    assert (sample.length, sample.added, sample.rate_per_s) == (5, 30, 3.0)
    assert mirror_row("s").length == 5  # the snapshot keeps the mirror's figures fresh


def test_the_same_tick_is_recorded_once(r: redis.Redis, db) -> None:
    bus(r)
    first = snapshots.snapshot_take(tick=T0)
    r.xadd("orders", {"more": "1"})
    second = snapshots.snapshot_take(tick=T0)
    assert second.pk == first.pk and SnapshotRun.objects.count() == 1
    assert StreamSample.objects.filter(at=T0).count() == 4
    assert StreamSample.objects.get(stream=mirror_row("orders"), at=T0).length == 12


def test_tick_is_the_interval_aligned_time() -> None:
    now = datetime(2026, 1, 1, 12, 0, 17, 500000, tzinfo=UTC)
    assert snapshots.snapshot_tick_for(now=now, interval_s=10) == datetime(2026, 1, 1, 12, 0, 10, tzinfo=UTC)
    assert snapshots.snapshot_tick_for(now=now, interval_s=60) == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)


@pytest.mark.django_db(transaction=True)
def test_overlapping_runs_record_one_snapshot_per_tick(r: redis.Redis) -> None:
    bus(r)
    barrier = threading.Barrier(3)
    runs: list[int] = []
    failures: list[BaseException] = []

    def run() -> None:
        try:
            barrier.wait(10)
            runs.append(snapshots.snapshot_take(tick=T0).pk)
        except BaseException as exc:  # noqa: BLE001 - reported below
            failures.append(exc)
        finally:
            connections.close_all()

    threads = [threading.Thread(target=run) for _ in range(3)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(60)
    assert not failures, failures
    assert len(runs) == 3 and len(set(runs)) == 1
    assert SnapshotRun.objects.count() == 1
    assert StreamSample.objects.filter(at=T0).count() == 4 and GroupSample.objects.filter(at=T0).count() == 3
    assert StreamMirror.objects.count() == 4 and GroupMirror.objects.count() == 3


def test_the_beat_task_skips_while_another_run_holds_the_lock(r: redis.Redis, db) -> None:
    r.xadd("s", {"x": "1"})
    with lock_held(name="snapshot", ttl_ms=5000) as held:
        assert held
        assert snapshots.snapshot_take_guarded(now=T0) is None
        with lock_held(name="snapshot", ttl_ms=5000) as again:
            assert not again
    assert SnapshotRun.objects.count() == 0
    run = snapshots.snapshot_take_guarded(now=T0 + timedelta(seconds=3))
    assert run is not None and run.tick == T0  # the lock is released after the block


def test_an_unreachable_connection_is_an_error_of_the_run(r: redis.Redis, db, settings) -> None:
    r.xadd("s", {"x": "1"})
    settings.BUS_REDIS_URLS = {CONN: settings.BUS_REDIS_URLS[CONN], "down": "redis://127.0.0.1:1/0"}
    run = snapshots.snapshot_take(tick=T0)
    assert [e["conn"] for e in run.errors] == ["down"]
    assert run.streams == 1 and StreamSample.objects.filter(at=T0).count() == 1


def test_signal_then_broadcast_after_commit(r: redis.Redis, db, django_capture_on_commit_callbacks) -> None:
    r.xadd("s", {"x": "1"})
    layer = get_channel_layer()
    channel = async_to_sync(layer.new_channel)()
    async_to_sync(layer.group_add)(snapshot_group(), channel)
    seen: list[tuple[datetime, int]] = []

    def receiver(sender, *, tick, run, **kwargs) -> None:
        seen.append((tick, run.pk))

    def broken(sender, **kwargs) -> None:
        raise RuntimeError("a receiver's bug must not fail the snapshot")

    signals.snapshot_taken.connect(receiver)
    signals.snapshot_taken.connect(broken)
    try:
        with django_capture_on_commit_callbacks(execute=True) as callbacks:
            run = snapshots.snapshot_take(tick=T0)
            assert seen == []  # nothing before the commit
        assert len(callbacks) == 1
    finally:
        signals.snapshot_taken.disconnect(receiver)
        signals.snapshot_taken.disconnect(broken)
    assert seen == [(T0, run.pk)]
    event = async_to_sync(_receive)(layer, channel)
    assert event == {"type": "metrics.snapshot", "tick": T0.isoformat()}


async def _receive(layer, channel: str) -> dict | None:
    try:
        return await asyncio.wait_for(layer.receive(channel), timeout=5)
    except TimeoutError:
        return None


# -------------------------------------------------------------------------- rollups and retention


def _rollup_fixture() -> tuple[list[StreamMirror], list[GroupMirror]]:
    streams = [
        StreamMirror.objects.create(connection=CONN, key=k, key_hash=name_hash(k), key_text=k.decode(),
                                    first_seen=T0, last_seen=T0, synced_at=T0, is_dlq=k.endswith(b":dlq"))
        for k in (b"a", b"b:dlq")
    ]
    groups = [
        GroupMirror.objects.create(stream=streams[0], name=n, name_hash=name_hash(n), name_text=n.decode(),
                                   first_seen=T0, last_seen=T0)
        for n in (b"g1", b"g2")
    ]
    return streams, groups


def _half_up(values: list[float]) -> int | None:
    return math.floor(sum(values) / len(values) + 0.5) if values else None


def test_downsampling_matches_a_plain_python_rollup(db, settings) -> None:
    settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S = 10
    settings.BUSCONSOLE_RETENTION_RAW_H = 2
    streams, groups = _rollup_fixture()
    rng = random.Random(6)
    start = datetime(2026, 1, 1, 9, 57, 40, tzinfo=UTC)
    raw_s, raw_g, raw_d = [], [], []
    for i in range(560):  # 09:57:40 .. 11:30:50, one tick every 10 s, a gap of five minutes in the middle
        at = start + timedelta(seconds=10 * i)
        if 300 <= i < 330:
            continue
        for s in streams:
            added = None if rng.random() < 0.1 else rng.randrange(0, 50)
            raw_s.append(StreamSample(stream=s, at=at, length=rng.randrange(0, 10_000), added=added,
                                      rate_per_s=None if added is None else added / 10))
        raw_d.append(DlqSample(stream=streams[1], at=at, depth=rng.randrange(0, 100)))
        for g in groups:
            raw_g.append(GroupSample(group=g, at=at, lag=None if rng.random() < 0.2 else rng.randrange(0, 500),
                                     pending=rng.randrange(0, 40),
                                     oldest_pending_idle_ms=None if rng.random() < 0.3 else rng.randrange(0, 10**6)))
    StreamSample.objects.bulk_create(raw_s)
    GroupSample.objects.bulk_create(raw_g)
    DlqSample.objects.bulk_create(raw_d)
    now = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)  # the 11:00 hour is not over (plus grace): not rolled

    made = snapshots.samples_downsample(now=now)

    def expected(rows, fk, size, columns):
        buckets = defaultdict(list)
        for row in rows:
            floor = datetime.fromtimestamp(row.at.timestamp() // size * size, tz=UTC)
            if floor + timedelta(seconds=size) <= now - timedelta(seconds=60):
                buckets[(getattr(row, fk), floor)].append(row)
        out = {}
        for key, members in buckets.items():
            values = {}
            for column, how in columns.items():
                present = [getattr(m, column) for m in members if getattr(m, column) is not None]
                if how == "avg":
                    values[column] = _half_up(present)
                elif how == "favg":
                    values[column] = sum(present) / len(present) if present else None
                elif how == "max":
                    values[column] = max(present) if present else None
                else:
                    values[column] = sum(present) if present else None
            out[key] = values
        return out

    cases = [
        (StreamSample, raw_s, "stream_id", {"length": "avg", "added": "sum", "rate_per_s": "favg"}),
        (GroupSample, raw_g, "group_id", {"lag": "avg", "pending": "avg", "oldest_pending_idle_ms": "max"}),
        (DlqSample, raw_d, "stream_id", {"depth": "avg"}),
    ]
    for resolution, size in (("1m", 60), ("1h", 3600)):
        for model, raw, fk, columns in cases:
            want = expected(raw, fk, size, columns)
            got = {
                (getattr(row, fk), row.at): {c: getattr(row, c) for c in columns}
                for row in model.objects.filter(resolution=resolution)
            }
            assert set(got) == set(want), (model.__name__, resolution)
            for key, values in want.items():
                for column, value in values.items():
                    assert got[key][column] == pytest.approx(value), (model.__name__, resolution, key, column)
    assert made["1h"]["stream"] == 4 and {at for _, at in
                                          StreamSample.objects.filter(resolution="1h").values_list("id", "at")} == {
        datetime(2026, 1, 1, 9, tzinfo=UTC), datetime(2026, 1, 1, 10, tzinfo=UTC)}
    assert snapshots.samples_downsample(now=now) == {r: {"stream": 0, "group": 0, "dlq": 0} for r in ("1m", "1h")}

    # Retention: raw rows older than 2 h go (before 10:00:30); every one of them is covered by both rollups.
    deleted = snapshots.samples_prune(now=now)
    cut = now - timedelta(hours=2)
    assert deleted["stream.raw"] == sum(1 for s in raw_s if s.at < cut)
    assert not StreamSample.objects.filter(resolution="raw", at__lt=cut).exists()
    assert StreamSample.objects.filter(resolution="raw").count() == sum(1 for s in raw_s if s.at >= cut)


def test_raw_samples_outlive_retention_until_rolled_up(db, settings) -> None:
    settings.BUSCONSOLE_RETENTION_RAW_H = 2
    settings.BUSCONSOLE_RETENTION_1M_D = 1
    streams, _ = _rollup_fixture()
    old = datetime(2026, 1, 1, 6, 0, tzinfo=UTC)
    StreamSample.objects.bulk_create([StreamSample(stream=streams[0], at=old + timedelta(seconds=10 * i), length=i)
                                      for i in range(12)])
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    assert snapshots.samples_prune(now=now).get("stream.raw", 0) == 0  # not rolled up yet: kept
    assert StreamSample.objects.filter(resolution="raw").count() == 12
    snapshots.samples_downsample(now=now)
    snapshots.samples_prune(now=now)
    assert not StreamSample.objects.filter(resolution="raw").exists()
    assert list(StreamSample.objects.filter(resolution="1m").values_list("length", flat=True)) == [3, 9]
    assert StreamSample.objects.filter(resolution="1h").get().length == 6  # mean of 0..11 = 5.5, half up
    snapshots.samples_prune(now=now + timedelta(days=2))  # past the 1-minute retention
    assert not StreamSample.objects.filter(resolution="1m").exists()
    assert StreamSample.objects.filter(resolution="1h").exists()


def test_series_picks_the_resolution_from_the_window(db, settings) -> None:
    settings.BUSCONSOLE_RETENTION_RAW_H = 48
    settings.BUSCONSOLE_RETENTION_1M_D = 14
    streams, groups = _rollup_fixture()
    now = datetime.now(tz=UTC).replace(microsecond=0)
    recent = now - timedelta(minutes=5)
    StreamSample.objects.create(stream=streams[0], at=recent, resolution="raw", length=1, rate_per_s=0.5)
    StreamSample.objects.create(stream=streams[0], at=recent, resolution="1m", length=2)
    StreamSample.objects.create(stream=streams[0], at=recent, resolution="1h", length=3)
    GroupSample.objects.create(group=groups[0], at=recent, resolution="raw", lag=None, pending=4)
    DlqSample.objects.create(stream=streams[1], at=recent, resolution="raw", depth=7)

    assert snapshots.series(kind="stream", obj_id=streams[0].pk, metric="length", since=now - timedelta(hours=1)) == [
        (recent, 1.0)]
    assert snapshots.series(kind="stream", obj_id=streams[0].pk, metric="rate", since=now - timedelta(hours=24)) == [
        (recent, 0.5)]
    assert snapshots.series(kind="stream", obj_id=streams[0].pk, metric="length", since=now - timedelta(days=7)) == [
        (recent, 2.0)]
    assert snapshots.series(kind="stream", obj_id=streams[0].pk, metric="length", since=now - timedelta(days=30)) == [
        (recent, 3.0)]
    assert snapshots.series(kind="stream", obj_id=streams[0].pk, metric="length", since=now - timedelta(hours=1),
                            until=recent - timedelta(seconds=1)) == []
    assert snapshots.series(kind="group", obj_id=groups[0].pk, metric="lag", since=now - timedelta(hours=1)) == [
        (recent, None)]
    assert snapshots.series(kind="dlq", obj_id=streams[1].pk, metric="depth", since=now - timedelta(hours=1)) == [
        (recent, 7.0)]
    with pytest.raises(ValueError):
        snapshots.series(kind="group", obj_id=1, metric="length", since=now)


# ---------------------------------------------------------------------------------------- /metrics


def _families(text: str) -> dict[str, dict[tuple, float]]:
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_metrics_needs_a_token(client: Client, viewer_client: Client, viewer, api_token) -> None:
    for anonymous_or_session in (client, viewer_client):
        response = anonymous_or_session.get("/metrics")
        assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-a-token").status_code == 401
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {api_token(viewer)}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")


def test_metrics_values_equal_redis(r: redis.Redis, client: Client, viewer, api_token) -> None:
    bus(r)
    xpending_before = r.xpending_range("orders", "billing", "-", "+", 1)[0]["time_since_delivered"]
    run = snapshots.snapshot_take(tick=T0)
    xpending_after = r.xpending_range("orders", "billing", "-", "+", 1)[0]["time_since_delivered"]
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {api_token(viewer)}").content.decode()
    metrics = _families(text)

    def labels(**kw: str) -> tuple:
        return tuple(sorted({"connection": CONN, **kw}.items()))

    for key in ("orders", "orders:dlq", "bin\\xff\x00key", "empty"):
        raw_key = key.encode("utf-8") if "\\x" not in key else b"bin\xff\x00key"
        info = r.xinfo_stream(raw_key)
        assert metrics["busconsole_stream_length"][labels(stream=key)] == info["length"]
        assert metrics["busconsole_stream_entries_added_total"][labels(stream=key)] == info["entries-added"]
        for g in r.xinfo_groups(raw_key):
            group = g["name"].decode("utf-8", "backslashreplace")
            assert metrics["busconsole_group_pending"][labels(stream=key, group=group)] == g["pending"]
            assert metrics["busconsole_group_lag"][labels(stream=key, group=group)] == g["lag"]
    age = metrics["busconsole_group_oldest_pending_age_seconds"]
    assert xpending_before / 1000 <= age[labels(stream="orders", group="billing")] <= xpending_after / 1000
    assert age[labels(stream="orders", group="shipping")] == 0  # nothing pending
    assert metrics["busconsole_dlq_depth"] == {
        labels(dlq="orders:dlq", convention="eventbus-or-streams"): r.xlen("orders:dlq")}
    assert metrics["busconsole_snapshot_duration_seconds"][()] == run.duration_ms / 1000
    assert metrics["busconsole_snapshot_errors"][()] == 0
    assert metrics["busconsole_snapshot_last_tick_timestamp_seconds"][()] == T0.timestamp()
    assert metrics["busconsole_snapshot_connection_error"] == {labels(): 0}


def test_metrics_before_any_snapshot_reports_only_the_job(client: Client, viewer, api_token, db) -> None:
    metrics = _families(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {api_token(viewer)}").content.decode())
    assert "busconsole_stream_length" not in metrics and "busconsole_snapshot_duration_seconds" not in metrics


# ------------------------------------------------------------------------------- the streams page


def test_streams_page_filters_sorts_and_pages_the_mirror(r: redis.Redis, viewer_client: Client) -> None:
    bus(r)
    for i in range(5):
        r.xadd(f"busy:{i}", {"x": "1"})
        r.xgroup_create(f"busy:{i}", "g", id="0")
        for _ in range(i):
            r.xadd(f"busy:{i}", {"x": "1"})
        if i:
            r.xreadgroup("g", "c", {f"busy:{i}": ">"}, count=i)
    snapshots.mirror_sync(conn=CONN)
    r.xadd("busy:0", {"after": "sync"})  # live figures on screen, the mirror's as of the sync

    body = viewer_client.get("/c/default/streams/?match=busy:*&sort=pending&count=3").content.decode()
    assert "listed from the mirror as of" in body
    assert [f"busy%3A{i}" for i in (4, 3, 2)] == _keys(body)
    assert "5 streams" in body and 'rel="next"' in body
    second = viewer_client.get("/c/default/streams/?match=busy:*&sort=pending&count=3&offset=3").content.decode()
    assert _keys(second) == ["busy%3A1", "busy%3A0"]
    assert f'<td class="num">{r.xlen("busy:0")}</td>' in second  # live length, not the mirror's

    assert _keys(viewer_client.get("/c/default/streams/?match=DLQ").content.decode()) == ["orders%3Adlq"]  # substring
    by_length = _keys(viewer_client.get("/c/default/streams/?match=busy:[34]&sort=length").content.decode())
    assert by_length == ["busy%3A4", "busy%3A3"]

    r.delete("busy:4")  # deleted since the sync: still listed until the next one, marked gone
    assert ">gone<" in viewer_client.get("/c/default/streams/?match=busy:4").content.decode()
    snapshots.mirror_sync(conn=CONN)
    assert _keys(viewer_client.get("/c/default/streams/?match=busy:4").content.decode()) == []


def test_streams_page_scans_redis_while_the_mirror_is_empty(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd("s", {"x": "1"})
    body = viewer_client.get("/c/default/streams/").content.decode()
    assert "from the mirror" not in body and _keys(body) == ["s"]
    snapshots.mirror_sync(conn=CONN)
    r.xadd("t", {"x": "1"})
    assert _keys(viewer_client.get("/c/default/streams/").content.decode()) == ["s"]
    assert sorted(_keys(viewer_client.get("/c/default/streams/?live=1").content.decode())) == ["s", "t"]


def _keys(body: str) -> list[str]:
    import re

    return re.findall(r'<a class="mono" href="/c/default/streams/([^"/]+)/">', body)


def test_admin_shows_the_mirror_read_only(r: redis.Redis, db, client: Client, django_user_model) -> None:
    bus(r)
    snapshots.mirror_sync(conn=CONN)
    snapshots.snapshot_take(tick=T0)
    admin = django_user_model.objects.create_superuser("root", "root@example.com", "pw-for-tests-1")
    client.force_login(admin)
    for model in ("streammirror", "groupmirror", "consumermirror", "snapshotrun"):
        assert client.get(f"/admin/streams_app/{model}/").status_code == 200
        assert client.get(f"/admin/streams_app/{model}/add/").status_code == 403
    row = mirror_row("orders")
    page = client.get(f"/admin/streams_app/streammirror/{row.pk}/change/")
    assert page.status_code == 200 and b'name="length"' not in page.content  # no editable inputs
    assert client.post(f"/admin/streams_app/streammirror/{row.pk}/delete/").status_code == 403


# ------------------------------------------------------------------------------ beat and worker


class _Process:
    def __init__(self, name: str, args: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.log = Path(tempfile.mkstemp(prefix=f"celery-{name}-", suffix=".log")[1])
        self.process = subprocess.Popen(args, cwd=REPO, env=env, stdout=self.log.open("wb"), stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"{self.name} exited:\n{self.output()[-3000:]}")
        return True

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(10)
        self.log.unlink(missing_ok=True)


@pytest.mark.django_db(transaction=True)
def test_beat_and_worker_fill_the_mirror_and_the_samples(r: redis.Redis, tmp_path: Path) -> None:
    bus(r)
    db_name = connection.settings_dict["NAME"]
    env = {
        **os.environ,
        "DATABASE_URL": f"sqlite:///{db_name}",
        "DJANGO_SETTINGS_MODULE": "busconsole.settings",
        "BUSCONSOLE_SNAPSHOT_INTERVAL_S": "1",
        "BUSCONSOLE_MIRROR_INTERVAL_S": "1",
        "PYTHONUNBUFFERED": "1",
    }
    celery = str(REPO / ".venv" / "bin" / "celery")
    worker = _Process("worker", [celery, "-A", "busconsole", "worker", "--pool", "solo", "--loglevel", "INFO",
                                 "--without-gossip", "--without-mingle", "--without-heartbeat",
                                 "-n", "metrics@127.0.0.1"], env)
    beat = _Process("beat", [celery, "-A", "busconsole", "beat", "--loglevel", "INFO",
                             "-s", str(tmp_path / "celerybeat-schedule")], env)
    try:
        wait_for(lambda: worker.alive() and beat.alive() and SnapshotRun.objects.filter(streams=4).count() >= 2,
                 timeout=90, what="two snapshot runs written by the worker", step=0.05)
        wait_for(lambda: ConsumerMirror.objects.exists(), timeout=60, what="the mirror sync (consumers)", step=0.05)
    finally:
        beat.stop()
        worker.stop()
    ticks = list(SnapshotRun.objects.order_by("tick").values_list("tick", flat=True))
    assert len(ticks) == len(set(ticks)) and all(t.microsecond == 0 for t in ticks)
    assert_stream_matches_redis(r, "orders")
    latest = ticks[-1]
    assert StreamSample.objects.get(stream=mirror_row("orders"), at=latest).length == r.xlen("orders")
