"""Rollups and retention: ``samples_downsample`` into 1-minute and 1-hour rows, ``samples_prune`` keeping
raw samples until they are rolled up, and ``series`` picking the resolution from the window.

The rollups are checked against a plain-Python rollup of the same random raw samples: minutes and hours
from the samples (mean rounded half up, sum, max, float mean; the hours are made of the minutes, whose
sample counts and sums make them exact); retention against counts of the rows the test wrote.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta

import pytest

from streams_app.metrics import pruning, rollups, series
from streams_app.metrics.models import (
    DlqSample,
    GroupMirror,
    GroupSample,
    StreamMirror,
    StreamSample,
    name_hash,
)
from tests.console.helpers import CONN
from tests.console.metrics.helpers import T0


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

    made = rollups.samples_downsample(now=now)

    def rolled(rows, fk, size, columns):
        """``rows`` (objects with ``at``, the fk and the columns) rolled up into buckets of ``size`` seconds."""
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
    for model, raw, fk, columns in cases:
        minutes = rolled(raw, fk, 60, columns)
        hours = rolled(raw, fk, 3600, columns)  # made of its minutes, an hour weighs each by its samples
        for resolution, want in (("1m", minutes), ("1h", hours)):
            got = {
                (getattr(row, fk), row.at): {c: getattr(row, c) for c in columns}
                for row in model.objects.filter(resolution=resolution)  # type: ignore[attr-defined]  # the sample models all have objects
            }
            assert set(got) == set(want), (model.__name__, resolution)
            for key, values in want.items():
                for column, value in values.items():
                    assert got[key][column] == pytest.approx(value), (model.__name__, resolution, key, column)
    assert made["1h"]["stream"] == 4 and {at for _, at in
                                          StreamSample.objects.filter(resolution="1h").values_list("id", "at")} == {
        datetime(2026, 1, 1, 9, tzinfo=UTC), datetime(2026, 1, 1, 10, tzinfo=UTC)}
    assert rollups.samples_downsample(now=now) == {r: {"stream": 0, "group": 0, "dlq": 0} for r in ("1m", "1h")}

    # Retention: raw rows older than 2 h go (before 10:00:30); every one of them is covered by both rollups.
    deleted = pruning.samples_prune(now=now)
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
    assert pruning.samples_prune(now=now).get("stream.raw", 0) == 0  # not rolled up yet: kept
    assert StreamSample.objects.filter(resolution="raw").count() == 12
    rollups.samples_downsample(now=now)
    pruning.samples_prune(now=now)
    assert not StreamSample.objects.filter(resolution="raw").exists()
    assert list(StreamSample.objects.filter(resolution="1m").values_list("length", flat=True)) == [3, 9]
    assert StreamSample.objects.filter(resolution="1h").get().length == 6  # mean of 0..11 = 5.5, half up
    pruning.samples_prune(now=now + timedelta(days=2))  # past the 1-minute retention
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

    assert series.series(kind="stream", obj_id=streams[0].pk, metric="length", since=now - timedelta(hours=1)) == [
        (recent, 1.0)]
    assert series.series(kind="stream", obj_id=streams[0].pk, metric="rate", since=now - timedelta(hours=24)) == [
        (recent, 0.5)]
    assert series.series(kind="stream", obj_id=streams[0].pk, metric="length", since=now - timedelta(days=7)) == [
        (recent, 2.0)]
    assert series.series(kind="stream", obj_id=streams[0].pk, metric="length", since=now - timedelta(days=30)) == [
        (recent, 3.0)]
    assert series.series(kind="stream", obj_id=streams[0].pk, metric="length", since=now - timedelta(hours=1),
                            until=recent - timedelta(seconds=1)) == []
    assert series.series(kind="group", obj_id=groups[0].pk, metric="lag", since=now - timedelta(hours=1)) == [
        (recent, None)]
    assert series.series(kind="dlq", obj_id=streams[1].pk, metric="depth", since=now - timedelta(hours=1)) == [
        (recent, 7.0)]
    with pytest.raises(ValueError):
        series.series(kind="group", obj_id=1, metric="length", since=now)


def test_a_forgotten_mirror_row_takes_its_samples_with_it(db, settings) -> None:
    """The samples' foreign keys are not database constraints (one check per sample at commit is too
    dear for a tick) and do not cascade (the tables are keyed time first), so the forgetting deletes the
    samples retention kept: here raw rows no rollup covers, from before the stream was deleted. Counted
    in SQL."""
    from django.db import connection

    settings.BUSCONSOLE_RETENTION_1H_D = 30
    streams, groups = _rollup_fixture()  # a (groups g1, g2) and b:dlq
    now = datetime(2026, 3, 1, tzinfo=UTC)
    gone_at = now - timedelta(days=31)
    # Raw rows are kept until the rollups cover them, and none ran: only the forgetting can remove these.
    kept = [gone_at - timedelta(days=2), gone_at - timedelta(hours=1), gone_at]
    for at in kept:
        for s in streams:
            StreamSample.objects.create(stream=s, at=at, length=1)
        DlqSample.objects.create(stream=streams[1], at=at, depth=1)
        for g in groups:
            GroupSample.objects.create(group=g, at=at, pending=1)
    StreamMirror.objects.filter(pk=streams[0].pk).update(deleted_at=gone_at)

    assert pruning.samples_prune(now=now)["mirror"] == 1

    def count(sql: str) -> int:
        with connection.cursor() as cursor:
            cursor.execute(sql)
            return cursor.fetchone()[0]

    sample, group, dlq, mirror, gmirror = (
        t._meta.db_table for t in (StreamSample, GroupSample, DlqSample, StreamMirror, GroupMirror)
    )
    assert count(f"SELECT COUNT(*) FROM {sample} WHERE stream_id NOT IN (SELECT id FROM {mirror})") == 0
    assert count(f"SELECT COUNT(*) FROM {group} WHERE group_id NOT IN (SELECT id FROM {gmirror})") == 0
    assert count(f"SELECT COUNT(*) FROM {dlq} WHERE stream_id NOT IN (SELECT id FROM {mirror})") == 0
    assert count(f"SELECT COUNT(*) FROM {gmirror}") == 0  # a's groups went with it
    # b:dlq was not forgotten: its stream and DLQ samples are still there.
    assert count(f"SELECT COUNT(*) FROM {sample}") == len(kept) and count(f"SELECT COUNT(*) FROM {dlq}") == len(kept)


def test_an_hour_waits_for_all_of_its_minutes(db, settings, monkeypatch) -> None:
    """A run stopped by its bucket limit part way through an hour leaves that hour alone; the next runs
    finish the minutes and then roll the hour up from all sixty of them."""
    settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S = 10
    monkeypatch.setitem(rollups.MAX_BUCKETS, "1m", 25)
    streams, _ = _rollup_fixture()
    start = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    lengths = list(range(360))  # 10:00:00 .. 10:59:50, one tick every 10 s; minute m holds 6m .. 6m+5
    StreamSample.objects.bulk_create(
        [StreamSample(stream=streams[0], at=start + timedelta(seconds=10 * i), length=n) for i, n in enumerate(lengths)]
    )
    now = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)

    runs = [rollups.samples_downsample(now=now) for _ in range(4)]
    assert [r["1m"]["stream"] for r in runs] == [25, 25, 10, 0]
    assert [r["1h"]["stream"] for r in runs] == [0, 0, 1, 0]
    minutes = [math.floor((6 * m + 6 * m + 5) / 2 + 0.5) for m in range(60)]  # mean of 6m .. 6m+5, half up
    assert list(StreamSample.objects.filter(resolution="1m").order_by("at").values_list("length", flat=True)) == minutes
    assert StreamSample.objects.get(resolution="1h").length == _half_up(minutes)


def test_minute_rows_outlive_their_retention_until_their_hour_is_rolled_up(db, settings) -> None:
    settings.BUSCONSOLE_RETENTION_RAW_H = 2
    settings.BUSCONSOLE_RETENTION_1M_D = 1
    streams, _ = _rollup_fixture()
    old = datetime(2026, 1, 1, 6, 0, tzinfo=UTC)
    StreamSample.objects.bulk_create(
        [StreamSample(stream=streams[0], at=old + timedelta(minutes=m), resolution="1m", length=m) for m in range(60)]
    )
    now = datetime(2026, 1, 5, tzinfo=UTC)  # days past the minutes' retention

    assert pruning.samples_prune(now=now)["stream.1m"] == 0  # no hour made of them yet: kept
    assert StreamSample.objects.filter(resolution="1m").count() == 60
    assert rollups.samples_downsample(now=now)["1h"]["stream"] == 1
    assert StreamSample.objects.get(resolution="1h").length == 30  # mean of 0..59 = 29.5, half up
    assert pruning.samples_prune(now=now)["stream.1m"] == 60
