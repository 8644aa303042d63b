"""The reads of the time-first sample tables (streams_app.metrics.ticks): the window's ticks, one object's
series, the lag streaks and the (objects, ticks) parts, each against a plain-Python reading of the rows
the test wrote. ``test_the_same_reads_on_postgresql`` runs this module again on a private PostgreSQL,
whose planner and date-time handling differ from SQLite's.
"""

from __future__ import annotations

import functools
import itertools
import os
import random
import re
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from django.db import connection

from streams_app.alerts import evaluation
from streams_app.metrics import series, ticks
from streams_app.metrics.models import (
    DlqSample,
    GroupMirror,
    GroupSample,
    StreamMirror,
    StreamSample,
    name_hash,
)

ROOT = Path(__file__).resolve().parents[3]
T0 = datetime(2026, 1, 1, 9, 0, tzinfo=UTC)
STEP = timedelta(seconds=10)


def _streams(n: int) -> list[StreamMirror]:
    return [
        StreamMirror.objects.create(connection="c", key=k, key_hash=name_hash(k), key_text=k.decode(),
                                    first_seen=T0, last_seen=T0, synced_at=T0)
        for k in (f"s{i}".encode() for i in range(n))
    ]


def _groups(stream: StreamMirror, n: int) -> list[GroupMirror]:
    return [
        GroupMirror.objects.create(stream=stream, name=k, name_hash=name_hash(k), name_text=k.decode(),
                                   first_seen=T0, last_seen=T0)
        for k in (f"g{i}".encode() for i in range(n))
    ]


def _within(at: datetime, bounds: dict[str, datetime | None]) -> bool:
    since, until, after, before = (bounds.get(k) for k in ("since", "until", "after", "before"))
    return (
        (since is None or at >= since) and (until is None or at <= until)
        and (after is None or at > after) and (before is None or at < before)
    )


def test_the_ticks_are_the_distinct_times_of_a_resolution_within_the_bounds(db) -> None:
    streams = _streams(4)
    rng = random.Random(32)
    rows: list[tuple[str, datetime, int]] = []
    for i in range(60):
        at = T0 + i * STEP
        for resolution in ("raw", "1m"):
            for s in streams:
                if rng.random() < 0.4:  # gaps: some ticks have no row of some stream, some none at all
                    rows.append((resolution, at, s.pk))
    StreamSample.objects.bulk_create([StreamSample(stream_id=pk, at=at, resolution=r, length=1) for r, at, pk in rows])
    times = [T0 + i * STEP for i in range(-2, 62)] + [T0 + 7 * STEP + timedelta(seconds=3)]
    cases = 0
    for _ in range(300):
        bounds = {k: None if rng.random() < 0.6 else rng.choice(times) for k in ("since", "until", "after", "before")}
        newest_first = rng.random() < 0.5
        limit = rng.choice([None, 1, 3, 500])
        for resolution in ("raw", "1m", "1h"):
            expected = sorted({at for r, at, _ in rows if r == resolution and _within(at, bounds)}, reverse=newest_first)
            got = ticks.sample_ticks(StreamSample, resolution, newest_first=newest_first, limit=limit, **bounds)
            assert got == expected[:limit], (resolution, bounds, newest_first, limit)
            cases += bool(expected)
    assert cases > 300  # a third of the cases or more had ticks to find
    with pytest.raises(ValueError):
        ticks.sample_ticks(StreamSample, "raw", limit=0)


def test_a_series_is_the_objects_rows_at_the_windows_ticks(db, settings) -> None:
    settings.BUSCONSOLE_RETENTION_RAW_H = 10_000  # every window below reads raw rows
    streams = _streams(3)
    groups = _groups(streams[0], 2)
    rng = random.Random(7)
    mine: dict[tuple[str, int], list[tuple[datetime, float | None]]] = {}
    s_rows, g_rows, d_rows = [], [], []
    for i in range(120):
        at = T0 + i * STEP
        for s in streams:
            if rng.random() < 0.7:
                length = rng.randrange(1000)
                s_rows.append(StreamSample(stream=s, at=at, length=length))
                mine.setdefault(("length", s.pk), []).append((at, float(length)))
                depth = rng.randrange(50)
                d_rows.append(DlqSample(stream=s, at=at, depth=depth))
                mine.setdefault(("depth", s.pk), []).append((at, float(depth)))
        for g in groups:
            if rng.random() < 0.7:
                lag = rng.choice([None, rng.randrange(100)])
                g_rows.append(GroupSample(group=g, at=at, lag=lag, pending=0))
                mine.setdefault(("lag", g.pk), []).append((at, None if lag is None else float(lag)))
    StreamSample.objects.bulk_create(s_rows)
    GroupSample.objects.bulk_create(g_rows)
    DlqSample.objects.bulk_create(d_rows)
    kinds = {"length": "stream", "depth": "dlq", "lag": "group"}
    for (metric, pk), points in mine.items():
        for since, until in [(T0, None), (T0 + 30 * STEP, T0 + 80 * STEP), (T0 + 119 * STEP, None), (T0 - STEP, T0)]:
            expected = [(at, v) for at, v in points if at >= since and (until is None or at <= until)]
            got = series.series(kind=kinds[metric], obj_id=pk, metric=metric, since=since, until=until)
            assert got == expected, (metric, pk, since, until)


def _plain_streak(samples: list[tuple[datetime, int | None]], threshold: float, tick: datetime) -> datetime | None:
    start = None
    for at, lag in sorted((s for s in samples if s[0] <= tick), reverse=True):
        if lag is None or lag <= threshold:
            break
        start = at
    return start


@pytest.mark.parametrize("page", [(8, 4, 2880), (1, 2, 5)], ids=["default-pages", "tiny-pages"])
def test_lag_streak_starts_match_a_plain_walk_back(db, monkeypatch, page) -> None:
    first, growth, biggest = page
    monkeypatch.setattr(evaluation, "ticks_back", functools.partial(ticks.ticks_back, first=first, growth=growth, page=biggest))
    stream = _streams(1)[0]
    groups = _groups(stream, 12)
    rng = random.Random(11)
    samples: dict[int, list[tuple[datetime, int | None]]] = {g.pk: [] for g in groups}
    rows = []
    for i in range(200):
        at = T0 + i * STEP
        for n, g in enumerate(groups):
            if n == 0:
                lag: int | None = 100  # above from the table's first tick on: the walk reaches its end
            elif n == 1 and i % 3:
                continue  # a group seen every third tick only: the walk passes over the others
            else:
                # runs of a few to a hundred ticks above, with unknown lags among them
                lag = rng.choice([None, 5]) if rng.random() < (0.01 * n) else 100
            samples[g.pk].append((at, lag))
            rows.append(GroupSample(group=g, at=at, lag=lag, pending=0))
    GroupSample.objects.bulk_create(rows)
    ids = [g.pk for g in groups]
    for tick in (T0 + 199 * STEP, T0 + 150 * STEP, T0 + 3 * STEP, T0 + 150 * STEP + timedelta(seconds=5)):
        for threshold in (50.0, 100.0):
            expected = {pk: _plain_streak(samples[pk], threshold, tick) for pk in ids}
            assert evaluation._lag_streak_starts(ids, threshold, tick) == expected
    assert _plain_streak(samples[ids[0]], 50.0, T0 + 199 * STEP) == T0  # the walk that reaches the end was tested


def test_window_parts_pair_every_object_with_every_tick_once(db) -> None:
    streams = _streams(7)
    StreamSample.objects.bulk_create(
        [StreamSample(stream=s, at=T0 + i * STEP, length=1) for i in range(11) for s in streams[:2]]
    )
    ids = [s.pk for s in streams]
    window = {"after": T0 + STEP, "until": T0 + 9 * STEP}
    pairs = [
        (pk, at) for part, ats in ticks.window_parts(StreamSample, "raw", ids, size=3, **window)
        for pk, at in itertools.product(part, ats)
    ]
    expected = [(pk, T0 + i * STEP) for i in range(2, 10) for pk in ids]
    assert sorted(pairs) == sorted(expected) and len(pairs) == len(set(pairs))
    assert list(ticks.window_parts(StreamSample, "raw", [], **window)) == []


def _vm_steps(run) -> int:
    """SQLite's virtual-machine instructions (in thousands) a call takes: the work a read does, counted
    where a clock would be."""
    steps = [0]

    def count() -> int:
        steps[0] += 1
        return 0

    connection.ensure_connection()
    raw = connection.connection
    raw.set_progress_handler(count, 1000)
    try:
        run()
    finally:
        raw.set_progress_handler(None, 1000)
    return steps[0]


def test_the_reads_seek_by_tick_and_do_not_read_the_other_objects_rows(db) -> None:
    """The same window read from a table where each tick has 5 objects' rows and from one where it has
    500: the reads cost about the same, where reading the window's rows would cost a hundred times more."""
    if connection.vendor != "sqlite":
        pytest.skip("counts SQLite's instructions")
    streams = _streams(500)
    few, many = [s.pk for s in streams[:5]], [s.pk for s in streams]
    rows = [StreamSample(stream_id=pk, at=T0 + i * STEP, resolution="1m", length=i) for i in range(40) for pk in few]
    rows += [StreamSample(stream_id=pk, at=T0 + i * STEP, resolution="raw", length=i) for i in range(40) for pk in many]
    StreamSample.objects.bulk_create(rows, batch_size=2000)
    window = {"since": T0 + 5 * STEP, "until": T0 + 35 * STEP}
    costs = {}
    for resolution in ("1m", "raw"):
        def read(resolution: str = resolution) -> None:
            assert len(ticks.sample_ticks(StreamSample, resolution, limit=None, **window)) == 31
            got = StreamSample.objects.filter(
                stream_id=few[2], resolution=resolution, at__in=ticks.in_ticks(StreamSample, resolution, **window)
            )
            assert sorted(got.values_list("length", flat=True)) == list(range(5, 36))

        costs[resolution] = _vm_steps(read)
    assert costs["1m"] > 0 and costs["raw"] < 3 * costs["1m"], costs


@pytest.mark.postgres
@pytest.mark.slow
def test_the_same_reads_on_postgresql() -> None:
    env = {**os.environ}
    env.pop("DATABASE_URL", None)
    done = subprocess.run(
        [sys.executable, "-m", "pytest", "-p", "tests.postgres", "-p", "no:cacheprovider", "-q", "-m", "not postgres",
         str(Path(__file__).relative_to(ROOT))],
        cwd=ROOT, env=env, capture_output=True, text=True, timeout=600,
    )
    assert done.returncode == 0, done.stdout[-4000:] + done.stderr[-2000:]
    # Every test ran there but the one that counts SQLite's instructions, which skips itself elsewhere.
    assert re.search(r"\b[1-9]\d* passed, 1 skipped", done.stdout), done.stdout[-2000:]
