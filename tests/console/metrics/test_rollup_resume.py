"""Rollups that stop part-way and resume: the hour is made of the minute rows (each with its count of raw
samples and the sums its means were taken of), and a run cut short by its row budget, inside a bucket,
leaves a watermark the next run goes on from.

The expected figures are a plain-Python rollup of the raw samples the test wrote (exact fractions for the
means rounded half up); the same rollups made in one run must equal those made in many short ones.
"""

from __future__ import annotations

import math
import random
from collections import defaultdict
from datetime import UTC, datetime, timedelta
from fractions import Fraction
from typing import Any

import pytest

from streams_app.metrics import rollups
from streams_app.metrics.models import (
    DlqSample,
    GroupMirror,
    GroupSample,
    RollupMark,
    StreamMirror,
    StreamSample,
    name_hash,
)
from tests.console.helpers import CONN
from tests.console.metrics.helpers import T0

NOW = datetime(2026, 1, 1, 12, 0, 30, tzinfo=UTC)
LIMIT = NOW - timedelta(seconds=60)  # rollup_grace() at a 10 s snapshot interval
#: per model: its foreign key and how each column is rolled up
CASES: list[tuple[Any, str, dict[str, str]]] = [
    (StreamSample, "stream_id", {"length": "mean", "rate_per_s": "fmean", "added": "sum"}),
    (GroupSample, "group_id", {"lag": "mean", "pending": "mean", "oldest_pending_idle_ms": "max"}),
    (DlqSample, "stream_id", {"depth": "mean"}),
]


def _raw_samples() -> dict[Any, list[Any]]:
    """Raw samples of 5 streams, 2 DLQs and 6 groups from 09:57:40 to 11:30:50 at irregular ticks (some
    minutes have 2 samples, others 6), with None values, so an hour's minutes weigh differently."""
    streams = [
        StreamMirror.objects.create(connection=CONN, key=k, key_hash=name_hash(k), key_text=k.decode(),
                                    first_seen=T0, last_seen=T0, synced_at=T0, is_dlq=k.endswith(b":dlq"))
        for k in (b"s0", b"s1", b"s2", b"s3", b"s4", b"d0:dlq", b"d1:dlq")
    ]
    groups = [
        GroupMirror.objects.create(stream=streams[i % 3], name=n, name_hash=name_hash(n), name_text=n.decode(),
                                   first_seen=T0, last_seen=T0)
        for i, n in enumerate((b"g0", b"g1", b"g2", b"g3", b"g4", b"g5"))
    ]
    rng = random.Random(32)
    start = datetime(2026, 1, 1, 9, 57, 40, tzinfo=UTC)
    raw: dict[Any, list[Any]] = defaultdict(list)
    for i in range(560):
        at = start + timedelta(seconds=10 * i)
        if (at.minute % 7 == 3 and at.second < 40) or 300 <= i < 330:  # thin minutes, and a gap
            continue
        for s in streams[:5]:
            added = None if rng.random() < 0.1 else rng.randrange(0, 50)
            raw[StreamSample].append(StreamSample(stream=s, at=at, length=rng.randrange(0, 10_000), added=added,
                                                  rate_per_s=None if added is None else added / 8))
        for d in streams[5:]:
            raw[DlqSample].append(DlqSample(stream=d, at=at, depth=rng.randrange(0, 100)))
        for g in groups:
            raw[GroupSample].append(GroupSample(
                group=g, at=at, lag=None if rng.random() < 0.2 else rng.randrange(0, 500),
                pending=rng.randrange(0, 40),
                oldest_pending_idle_ms=None if rng.random() < 0.3 else rng.randrange(0, 10**6)))
    for model, rows in raw.items():
        model.objects.bulk_create(rows)
    return raw


def _expected(rows: list[Any], fk: str, columns: dict[str, str], size: int) -> dict[tuple[int, datetime], dict]:
    """The raw ``rows`` rolled up into buckets of ``size`` seconds that ended by :data:`LIMIT`."""
    buckets: dict[tuple[int, datetime], list[Any]] = defaultdict(list)
    for row in rows:
        floor = datetime.fromtimestamp(row.at.timestamp() // size * size, tz=UTC)
        if floor + timedelta(seconds=size) <= LIMIT:
            buckets[(getattr(row, fk), floor)].append(row)
    out = {}
    for key, members in buckets.items():
        values: dict[str, Any] = {"samples": len(members)}
        for column, how in columns.items():
            present = [getattr(m, column) for m in members if getattr(m, column) is not None]
            if not present:
                values[column] = None
            elif how == "mean":
                values[column] = math.floor(Fraction(sum(present), len(present)) + Fraction(1, 2))
            elif how == "fmean":
                values[column] = sum(present) / len(present)
            elif how == "max":
                values[column] = max(present)
            else:
                values[column] = sum(present)
        out[key] = values
    return out


def _rolled(model: Any, fk: str, columns: dict[str, str], resolution: str) -> dict[tuple[int, datetime], dict]:
    return {
        (getattr(row, fk), row.at): {c: getattr(row, c) for c in ("samples", *columns)}
        for row in model.objects.filter(resolution=resolution)
    }


def _all_rollups() -> dict[tuple[str, str], dict]:
    return {(model.__name__, res): _rolled(model, fk, columns, res) for model, fk, columns in CASES
            for res in ("1m", "1h")}


@pytest.mark.slow  # a few hundred short runs: about 3 s
def test_an_hour_rolled_up_in_steps_equals_one_run_and_the_raw_samples(db, settings) -> None:
    settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S = 10
    raw = _raw_samples()

    # Many short runs: at most 20 rows each, in steps of 2 objects, so runs stop inside buckets.
    runs = 0
    stopped_inside = False
    while True:
        made = rollups.samples_downsample(now=NOW, max_rows=20, step=2)
        runs += 1
        if not any(n for by_table in made.values() for n in by_table.values()):
            break
        marks = RollupMark.objects.filter(after__gt=0)
        if marks.filter(table="stream", resolution="1m").exists():
            stopped_inside = True  # the raw rows of a half-done minute are not counted as rolled up
            mark = marks.get(table="stream", resolution="1m")
            assert rollups.rolled_until(StreamSample, "1m") == mark.bucket
        assert runs < 2000
    assert stopped_inside and runs > 50
    stepped = _all_rollups()

    for model, _, _ in CASES:
        model.objects.exclude(resolution="raw").delete()
    RollupMark.objects.all().delete()
    rollups.samples_downsample(now=NOW)  # the same in one run
    assert _all_rollups() == stepped

    for model, fk, columns in CASES:
        for resolution, size in (("1m", 60), ("1h", 3600)):
            want = _expected(raw[model], fk, columns, size)
            got = stepped[(model.__name__, resolution)]
            assert set(got) == set(want), (model.__name__, resolution)
            for key, values in want.items():
                for column, value in values.items():
                    assert got[key][column] == pytest.approx(value), (model.__name__, resolution, key, column)
    hours = {at for _, at in stepped[("StreamSample", "1h")]}
    assert hours == {datetime(2026, 1, 1, 9, tzinfo=UTC), datetime(2026, 1, 1, 10, tzinfo=UTC)}
    assert rollups.samples_downsample(now=NOW) == {r: {"stream": 0, "group": 0, "dlq": 0} for r in ("1m", "1h")}


def test_a_table_rolled_up_before_the_watermarks_goes_on_after_its_newest_bucket(db, settings) -> None:
    """Minute rows written before there was a watermark (whole buckets, counting one sample each) are
    neither rolled up again nor skipped: the run starts after the newest of them."""
    settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S = 10
    s = StreamMirror.objects.create(connection=CONN, key=b"a", key_hash=name_hash(b"a"), key_text="a",
                                    first_seen=T0, last_seen=T0, synced_at=T0)
    at = datetime(2026, 1, 1, 10, 0, tzinfo=UTC)
    StreamSample.objects.bulk_create(
        [StreamSample(stream=s, at=at + timedelta(minutes=m), resolution="1m", length=10) for m in range(30)]
        + [StreamSample(stream=s, at=at + timedelta(minutes=29, seconds=10 * i), length=i) for i in range(6)]
        + [StreamSample(stream=s, at=at + timedelta(minutes=30 + m, seconds=10 * i), length=40) for m in range(30)
           for i in range(3)]
    )
    made = rollups.samples_downsample(now=NOW)
    assert made["1m"]["stream"] == 30 and made["1h"]["stream"] == 1
    hour = StreamSample.objects.get(resolution="1h")
    assert (hour.samples, hour.length, hour.length_sum) == (30 + 90, math.floor((300 + 3600) / 120 + 0.5), 3900)


def test_the_rollups_run_with_the_query_log_on(db, settings) -> None:
    """With DEBUG (``make run``'s default) Django logs every statement by formatting it with its
    parameters; a literal "%" in a rollup statement made that raise, so no rollup was ever written on SQLite.
    CaptureQueriesContext turns the same log on; the rows must equal a run without it."""
    from django.db import connection
    from django.test.utils import CaptureQueriesContext

    settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S = 10
    _raw_samples()
    with CaptureQueriesContext(connection) as logged:
        rollups.samples_downsample(now=NOW)
    assert logged.captured_queries
    logged_rows = _all_rollups()
    for model, _, _ in CASES:
        model.objects.exclude(resolution="raw").delete()
    RollupMark.objects.all().delete()
    rollups.samples_downsample(now=NOW)
    assert _all_rollups() == logged_rows
    assert logged_rows[("StreamSample", "1m")]
