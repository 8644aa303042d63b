"""Retention in bounded batches: ``samples_prune`` deletes exactly the rows older than the cutoff (worked
out here from the rows the test wrote and the settings), in DELETE statements of at most PRUNE_BATCH rows,
and a spent budget stops it between batches with the rest left for the next run.
"""

from __future__ import annotations

import math
import random
from datetime import timedelta

from django.db import connection
from django.test.utils import CaptureQueriesContext

from streams_app.metrics import pruning
from streams_app.metrics.models import (
    GroupMirror,
    GroupSample,
    SnapshotRun,
    StreamMirror,
    StreamSample,
    name_hash,
)
from tests.console.helpers import CONN
from tests.console.metrics.helpers import T0


def _objects() -> tuple[list[StreamMirror], GroupMirror]:
    streams = [
        StreamMirror.objects.create(connection=CONN, key=k, key_hash=name_hash(k), key_text=k.decode(),
                                    first_seen=T0, last_seen=T0, synced_at=T0)
        for k in (b"a", b"b", b"c")
    ]
    group = GroupMirror.objects.create(stream=streams[0], name=b"g", name_hash=name_hash(b"g"), name_text="g",
                                       first_seen=T0, last_seen=T0)
    return streams, group


def test_prune_deletes_exactly_the_rows_older_than_the_cutoff_in_small_batches(db, settings, monkeypatch) -> None:
    settings.BUSCONSOLE_RETENTION_RAW_H = 48
    settings.BUSCONSOLE_RETENTION_1M_D = 14
    settings.BUSCONSOLE_RETENTION_1H_D = 365
    monkeypatch.setattr(pruning, "PRUNE_BATCH", 7)
    monkeypatch.setattr(pruning, "PRUNE_PAUSE_S", 0)
    streams, group = _objects()
    now = T0 + timedelta(days=20)
    rng = random.Random(12)
    # Raw rows around the 48 h cutoff, 1-minute rows around the 14-day one; rollups that cover everything
    # (so raw retention is not held back by the downsampler).
    raw_ats = [now - timedelta(hours=48) + timedelta(minutes=rng.randrange(-600, 600)) for _ in range(40)]
    minute_ats = [now - timedelta(days=14) + timedelta(minutes=rng.randrange(-600, 600)) for _ in range(30)]
    rows = []
    for i, at in enumerate(sorted(set(raw_ats))):
        rows.append(StreamSample(stream=streams[i % 3], at=at, resolution="raw", length=i))
    for i, at in enumerate(sorted(set(minute_ats))):
        rows.append(StreamSample(stream=streams[i % 3], at=at, resolution="1m", length=i))
    for res in ("1m", "1h"):
        rows.append(StreamSample(stream=streams[0], at=now, resolution=res, length=0))
    StreamSample.objects.bulk_create(rows)
    GroupSample.objects.bulk_create([GroupSample(group=group, at=at, resolution="raw", pending=1)
                                     for at in sorted(set(raw_ats))])
    for res in ("1m", "1h"):
        GroupSample.objects.create(group=group, at=now, resolution=res, pending=0)

    raw_cut = now - timedelta(hours=48)
    minute_cut = now - timedelta(days=14)
    expected_left = sorted(
        [(r.stream_id, r.at, r.resolution) for r in rows
         if (r.resolution == "raw" and r.at >= raw_cut) or (r.resolution == "1m" and r.at >= minute_cut)
         or r.resolution == "1h"]
    )
    expected_gone = len(rows) - len(expected_left)

    with CaptureQueriesContext(connection) as queries:
        deleted = pruning.samples_prune(now=now)

    left = sorted(StreamSample.objects.values_list("stream_id", "at", "resolution"))
    assert left == expected_left
    assert deleted["stream.raw"] + deleted["stream.1m"] == expected_gone > 7
    assert GroupSample.objects.filter(resolution="raw", at__lt=raw_cut).count() == 0
    assert GroupSample.objects.filter(resolution="raw").count() == sum(1 for at in set(raw_ats) if at >= raw_cut)
    # One DELETE per batch, each of at most seven rows here (every time has one row: a batch that ends
    # within a tick, as on PostgreSQL, takes no more): as many statements per resolution as it takes to
    # delete its rows seven at a time, and at most one more (the batch that finds fewer).
    table = StreamSample._meta.db_table
    deletes = [q["sql"] for q in queries.captured_queries if q["sql"].startswith(f'DELETE FROM "{table}"')]
    per_resolution = [math.ceil(deleted[f"stream.{res}"] / 7) for res in ("raw", "1m")]
    assert sum(per_resolution) <= len(deletes) <= sum(per_resolution) + 2


def test_a_spent_budget_stops_between_batches_and_the_next_run_finishes(db, settings, monkeypatch) -> None:
    monkeypatch.setattr(pruning, "PRUNE_BATCH", 5)
    streams, _ = _objects()
    now = T0 + timedelta(days=400)
    old = [StreamSample(stream=streams[0], at=T0 + timedelta(minutes=i), resolution="1h", length=i) for i in range(23)]
    StreamSample.objects.bulk_create(old)
    SnapshotRun.objects.create(tick=T0, started_at=T0)

    assert sum(pruning.samples_prune(now=now, budget_s=0).values()) == 0  # nothing starts on a spent budget
    assert StreamSample.objects.count() == 23
    pruning.samples_prune(now=now, budget_s=60)
    assert StreamSample.objects.count() == 0 and SnapshotRun.objects.count() == 0
