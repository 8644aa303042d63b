"""Each Spark rollup against a plain-Python computation over the same generated history (docs/architecture.md#tests).

The history is written to the real Redis, exported by the real exporter and rolled up by real Spark
(``run_all``, the entry point ``spark-submit`` uses); the rollup files are read back with pyarrow. The
expected values are computed here from the generated entries, never by the pipeline's code, except
that error signatures are grouped with :func:`normalize_error`, whose rules have their own literal cases
below, checked against both the Python and the Spark implementation.
"""

from __future__ import annotations

import statistics
import threading
from collections import Counter, defaultdict
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.dataset as ds
import pyarrow.parquet as pq
import pytest
from pyspark.sql import functions as F

from pipeline import failures, main, session, signatures
from pipeline.signatures import NO_ERROR, normalize_error
from streams_app.lake import export
from streams_app.metrics.models import GroupMirror, GroupSample, StreamMirror, name_hash
from tests.pipeline import data
from tests.polling import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.django_db]


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def rollup(lake: Path, name: str) -> list[dict]:
    files = [str(p) for p in (lake / "rollups" / name).glob("*.parquet")]
    return ds.dataset(files, format="parquet").to_table().to_pylist() if files else []


def run(spark, lake: Path, jobs: list[str], *, as_of: datetime | None = None) -> None:
    stats = export.export_run(tables="lag_trend" in jobs, now=as_of)
    assert not stats.failed
    main.run_all(spark, str(lake), as_of=as_of or datetime.now(UTC), jobs=jobs)


# ------------------------------------------------------------------------------------ normalization

CASES = [
    ("ValueError: order 12345 not found", "ValueError: order <num> not found"),
    ("KeyError: 'sku-42'", "KeyError: <str>"),
    (
        'app.errors.PaymentDeclined: card "4111 1111" declined for 550e8400-e29b-41d4-a716-446655440000',
        "app.errors.PaymentDeclined: card <str> declined for <uuid>",
    ),
    ("ConnectionError: lost 0x7f3a2b1c at 10.0.0.7:6379", "ConnectionError: lost <hex> at <num>.<num>:<num>"),
    ("RuntimeError: object 5f9d88b9c2a1e3f4a6b7c8d9 missing", "RuntimeError: object <hex> missing"),
    ("TimeoutError: can't reach 'db-1' after 3 tries", "TimeoutError: can't reach <str> after <num> tries"),
    ("  boom   42 \n times  ", "boom <num> times"),
    ("HTTP404Error: page 7", "HTTP404Error: page <num>"),
    ("ValueError: ", "ValueError"),
    ("deadbeefcafe and facade words 12", "deadbeefcafe and facade words <num>"),
    ("ValueError: user42 at 2026-01-05T10:00:00Z", "ValueError: user<num> at <num>-<num>-<num>T<num>:<num>:<num>Z"),
    ("Error:no space 1", "Error:no space <num>"),
    ("ValueError: a\tb\n\nc", "ValueError: a b c"),
    ("ValueError: " + "x" * 400, "ValueError: " + "x" * 288),
    ("", NO_ERROR),
    ("   ", NO_ERROR),
    (None, NO_ERROR),
]


def test_error_normalization_rules_in_python_and_spark(spark) -> None:
    assert [normalize_error(text) for text, _ in CASES] == [expected for _, expected in CASES]
    frame = spark.createDataFrame([(i, text) for i, (text, _) in enumerate(CASES)], "i int, error string")
    rows = frame.select("i", failures.signature_column(frame["error"]).alias("sig")).orderBy("i").collect()
    assert [row["sig"] for row in rows] == [expected for _, expected in CASES]
    assert signatures.search_text("ValueError: order <num> not found") == "ValueError: order"
    assert signatures.search_text(NO_ERROR) == ""


# -------------------------------------------------------------------------------------- throughput


def test_throughput_per_stream_and_type_per_minute_and_hour(spark, r, lake_dir: Path) -> None:
    entries = data.traffic()
    data.write(r, entries)
    run(spark, lake_dir, ["throughput"])

    expected: Counter = Counter()
    for e in entries:
        fields = dict(e.fields)
        kind = fields[b"type"].decode() if b"type" in fields else ""
        size = sum(len(x) for pair in e.fields for x in pair)
        for resolution, width in (("minute", 60_000), ("hour", data.HOUR_MS)):
            bucket = e.ms - e.ms % width
            for scope, type_ in (("type", kind), ("stream", "")):
                expected[(e.key, scope, type_, resolution, bucket, "n")] += 1
                expected[(e.key, scope, type_, resolution, bucket, "b")] += size
    got: Counter = Counter()
    for row in rollup(lake_dir, "throughput"):
        key = (row["stream"], row["scope"], row["event_type"], row["resolution"], int(row["bucket"].timestamp() * 1000))
        assert row["conn"] == "default"
        assert row["stream_text"] == ("bin\\xfekey" if row["stream"] == b"bin\xfekey" else "orders")
        got[(*key, "n")] += row["entries"]
        got[(*key, "b")] += row["bytes"]
    assert got == expected
    assert {k[2] for k in expected if k[1] == "type"} == {"order.created", "order.paid", "ünïcode", ""}


def test_a_second_run_replaces_the_throughput_rollup_and_an_empty_lake_gives_none(spark, r, lake_dir: Path) -> None:
    """The job writes the minute rows, then adds the hours and totals it derives from the files it wrote:
    a run over a lake whose rollup exists must replace every part of it, not add a second set."""
    results = main.run_all(spark, str(lake_dir), jobs=["throughput", "anomalies"])  # nothing exported yet
    assert {name: n for result in results for name, n in result.rows.items()} == {"throughput": 0, "anomalies": 0}
    assert rollup(lake_dir, "throughput") == []

    entries = data.traffic()
    data.write(r, entries)
    run(spark, lake_dir, ["throughput"])
    first = Counter(tuple(sorted(row.items())) for row in rollup(lake_dir, "throughput"))
    main.run_all(spark, str(lake_dir), jobs=["throughput"])
    assert Counter(tuple(sorted(row.items())) for row in rollup(lake_dir, "throughput")) == first
    # every entry is counted once per scope and resolution: four parts, each summing to all the entries
    parts = Counter()
    for row, n in first.items():
        values = dict(row)
        parts[(values["scope"], values["resolution"])] += values["entries"] * n
    assert parts == {(scope, res): len(entries) for scope in ("type", "stream") for res in ("minute", "hour")}


def test_each_job_reports_the_rows_its_rollup_files_hold(spark, r, lake_dir: Path) -> None:
    data.write(r, data.traffic())
    assert not export.export_run().failed
    results = main.run_all(spark, str(lake_dir), jobs=["throughput", "lag_trend"])  # no samples: lag_trend is empty
    counted = {name: n for result in results for name, n in result.rows.items()}
    assert counted == {name: len(rollup(lake_dir, name)) for name in ("throughput", "lag_trend")}
    assert counted["throughput"] > 0 and counted["lag_trend"] == 0


def test_every_job_at_once_each_heard_once_results_in_jobs_order(spark, r, lake_dir: Path) -> None:
    """All five jobs run side by side: each rollup is still right, ``on_step`` hears each job once, in
    the caller's thread, and the results come in ``JOBS`` order whatever finished first."""
    traffic, metrics, dead = data.traffic(), data.metrics(), data.dead_letters()
    data.write(r, [*traffic, *metrics, *(d.entry for d in dead)])
    assert not export.export_run(tables=False).failed
    heard: list[tuple[str, threading.Thread]] = []

    def on_step(result: main.JobResult) -> None:
        heard.append((result.job, threading.current_thread()))

    results = main.run_all(spark, str(lake_dir), as_of=at(max(e.ms for e in traffic)), on_step=on_step)
    assert sorted(job for job, _ in heard) == sorted(main.JOBS)
    assert {thread for _, thread in heard} == {threading.current_thread()}
    assert [result.job for result in results] == list(main.JOBS)
    assert {n for result in results for n in result.rows} == {
        "throughput", "latency", "error_signatures", "retries", "lag_trend", "anomalies"
    }
    # each lane's rollups against plain Python: every entry counted once per scope and resolution,
    # the latency runs per stream, group, type and hour, the retries per stream
    parts = Counter()
    for row in rollup(lake_dir, "throughput"):
        parts[(row["stream"], row["scope"], row["resolution"])] += row["entries"]
    entries = Counter(e.key for e in [*traffic, *metrics, *(d.entry for d in dead)])
    assert parts == {(key, scope, res): n for key, n in entries.items()
                     for scope in ("type", "stream") for res in ("minute", "hour")}
    runs: Counter = Counter()
    for e in metrics:
        f = {k.decode(): v.decode() for k, v in e.fields}
        if f["event"] in ("processed", "failed"):
            runs[(f["stream"], f["group"], f["type"], e.ms - e.ms % data.HOUR_MS)] += int(f["count"])
    assert {(x["stream"], x["group"], x["event_type"], int(x["hour"].timestamp() * 1000)): x["runs"]
            for x in rollup(lake_dir, "latency")} == dict(runs)
    histogram = Counter((d.stream, -1 if d.retries is None else d.retries) for d in dead)
    assert {(x["stream"], x["retries"]): x["count"] for x in rollup(lake_dir, "retries")} == dict(histogram)


class Injected(RuntimeError):
    pass


def test_a_failing_job_cancels_the_others_and_raises_once_all_have_stopped(
    spark, r, lake_dir: Path, monkeypatch
) -> None:
    """The latency job fails while the throughput job runs a Spark task that would take a minute:
    ``run_all`` raises the latency job's own error only after the throughput job was cancelled (no
    Spark job left active, its rollup never finished), and the jobs after either never start."""
    data.write(r, data.traffic())
    assert not export.export_run(tables=False).failed
    tracker = spark.sparkContext.statusTracker()
    error = Injected("the latency job broke")

    @F.udf("boolean")
    def slow(_: int) -> bool:
        import sys
        import time as clock

        if not getattr(sys, "_busconsole_slept", False):  # once per Python worker: a minute per task slot
            sys._busconsole_slept = True
            clock.sleep(60)  # ends only when the job is not cancelled
        return True

    entries = main.extract.entries
    monkeypatch.setattr(main.extract, "entries", lambda *args: entries(*args).filter(slow(F.lit(1))))

    def latency(_metrics):
        wait_for(lambda: tracker.getActiveJobsIds(), what="the throughput job's Spark job", timeout=60)
        raise error

    monkeypatch.setattr(main.transform, "latency", latency)
    heard: list[str] = []
    with pytest.raises(Injected) as caught:
        main.run_all(spark, str(lake_dir), on_step=lambda result: heard.append(result.job))
    spark.sparkContext._jsc.sc().listenerBus().waitUntilEmpty()  # the status tracker is told by events
    assert caught.value is error
    assert list(tracker.getActiveJobsIds()) == []
    assert heard == []  # throughput was cancelled; anomalies, failures and lag_trend never started
    assert rollup(lake_dir, "throughput") == [] and not (lake_dir / "rollups" / "error_signatures").exists()
    assert not (lake_dir / "rollups" / "anomalies").exists()


def test_a_local_lake_is_listed_by_the_driver_unless_the_caller_chose(spark, lake_dir: Path) -> None:
    threshold = spark.conf.get(session.LISTING_THRESHOLD)
    try:
        spark.conf.unset(session.LISTING_THRESHOLD)
        assert not session.size_listing(spark, "s3://bucket/lake")
        assert spark.conf.get(session.LISTING_THRESHOLD) == "32"  # Spark's default: a listing job
        assert session.size_listing(spark, str(lake_dir))
        assert spark.conf.get(session.LISTING_THRESHOLD) == str(session.LOCAL_LISTING_THRESHOLD)
        spark.conf.set(session.LISTING_THRESHOLD, "100")
        assert not session.size_listing(spark, str(lake_dir))
        assert spark.conf.get(session.LISTING_THRESHOLD) == "100"
    finally:
        spark.conf.set(session.LISTING_THRESHOLD, threshold)


# ----------------------------------------------------------------------------------------- latency


def nearest_rank(observations: list[tuple[float, int]], p: int) -> float:
    """The smallest value v with at least ceil(p * N / 100) observations <= v."""
    total = sum(n for _, n in observations)
    rank = -(-(p * total) // 100)
    seen = 0
    for value, n in sorted(observations):
        seen += n
        if seen >= rank:
            return value
    raise AssertionError("empty")


def test_latency_percentiles_per_stream_group_type_and_hour(spark, r, lake_dir: Path) -> None:
    entries = data.metrics()
    data.write(r, entries)
    run(spark, lake_dir, ["latency"])

    runs: dict[tuple, list[tuple[float, int]]] = defaultdict(list)
    totals: Counter = Counter()
    failed: Counter = Counter()
    longest: dict[tuple, float] = {}
    for e in entries:
        f = {k.decode(): v.decode() for k, v in e.fields}
        if f["event"] not in ("processed", "failed"):
            continue
        key = (f["stream"], f["group"], f["type"], e.ms - e.ms % data.HOUR_MS)
        count, duration = int(f["count"]), float(f["duration_ms"])
        runs[key].append((duration / count, count))
        totals[key] += duration
        failed[key] += count if f["event"] == "failed" else 0
        longest[key] = max(longest.get(key, 0.0), float(f["max_ms"]))

    got = {(x["stream"], x["group"], x["event_type"], int(x["hour"].timestamp() * 1000)): x
           for x in rollup(lake_dir, "latency")}
    assert set(got) == set(runs) and len(got) == 2 * 2 * 2 * 3
    for key, observations in runs.items():
        row = got[key]
        n = sum(count for _, count in observations)
        assert (row["runs"], row["failed"]) == (n, failed[key])
        assert (row["p50_ms"], row["p95_ms"], row["p99_ms"]) == tuple(nearest_rank(observations, p) for p in (50, 95, 99))
        assert row["mean_ms"] == pytest.approx(totals[key] / n, rel=1e-12)
        assert row["max_ms"] == longest[key]


# ----------------------------------------------------------------------------------------- failures


def lay_out_by_day(lake: Path, dlq: bytes) -> None:
    """Move one DLQ's dead letters into a directory per day, as exports wrote them before the monthly layout."""
    directory = lake / "dlq" / "connection=default" / f"stream_hex={dlq.hex()}"
    for path in list(directory.glob("day=*/*.parquet")):
        table = pq.read_table(path, partitioning=None)
        days = table.column("date")
        for day in sorted(set(days.to_pylist())):
            part = table.filter(pc.equal(days, pa.scalar(day, pa.date32())))
            ids = part.column("entry_id")
            target = directory / f"day={day.isoformat()}" / f"part-{ids[0]}_{ids[-1]}.parquet"
            assert target.parent != path.parent  # the test's data must really move
            target.parent.mkdir(exist_ok=True)
            pq.write_table(part, target)
        path.unlink()


@pytest.mark.parametrize("before", [False, True], ids=["by-month", "some-by-day"])
def test_error_signatures_and_retries_histogram(spark, r, lake_dir: Path, before: bool) -> None:
    dead = data.dead_letters()
    data.write(r, [d.entry for d in dead])
    assert not export.export_run(tables=False).failed
    months = {p.parent.name for p in (lake_dir / "dlq").rglob("*.parquet")}
    assert months == {"day=2026-01-01"}  # one directory per DLQ and month (the data is of 2026-01-05)
    if before:  # a lake exported before: one DLQ by day, beside the others by month
        lay_out_by_day(lake_dir, b"orders:dlq")
        assert {p.parent.name for p in (lake_dir / "dlq").rglob("*.parquet")} == {"day=2026-01-01", "day=2026-01-05"}
    main.run_all(spark, str(lake_dir), as_of=datetime.now(UTC), jobs=["failures"])

    groups: dict[tuple, list[data.DeadLetter]] = defaultdict(list)
    for d in dead:
        groups[(d.stream, d.entry.key, normalize_error(d.error))].append(d)
    got = {(x["stream"], x["dlq"], x["signature"]): x for x in rollup(lake_dir, "error_signatures")}
    assert set(got) == set(groups)
    for key, members in groups.items():
        row = got[key]
        latest = max(members, key=lambda d: d.failed_ms)
        assert row["count"] == len(members)
        assert row["first_seen"] == at(min(d.failed_ms for d in members))
        assert row["last_seen"] == at(latest.failed_ms)
        assert (row["example_error"], row["example_entry_id"]) == (latest.error or "", latest.entry.id)
    for stream in {d.stream for d in dead}:
        ranked = sorted((k for k in groups if k[0] == stream), key=lambda k: (-len(groups[k]), k[2]))
        assert [got[k]["rank"] for k in ranked] == list(range(1, len(ranked) + 1))
    assert (b"jobs", b"jobs:dlq", NO_ERROR) in got and (b"omni-stream:t", b"omni-dlq:group:t:agent", "boom <num> times") in got

    histogram = Counter((d.stream, -1 if d.retries is None else d.retries) for d in dead)
    got_hist = {(x["stream"], x["retries"]): x["count"] for x in rollup(lake_dir, "retries")}
    assert got_hist == dict(histogram)


# ---------------------------------------------------------------------------------------- lag trend


def test_lag_trend_per_group_uses_each_hours_finest_samples(spark, lake_dir: Path) -> None:
    base = at(data.T0 + 9 * data.HOUR_MS)  # 09:00
    stream = StreamMirror.objects.create(
        connection="default", key=b"orders", key_hash=name_hash(b"orders"), key_text="orders",
        first_seen=base, last_seen=base, synced_at=base,
    )
    group = GroupMirror.objects.create(
        stream=stream, name=b"bill\xffing", name_hash=name_hash(b"bill\xffing"), name_text="bill\\xffing",
        first_seen=base, last_seen=base,
    )
    samples = [  # (minutes after 09:00, resolution, lag, pending, idle)
        (0, "1h", 3, 1, 100),  # 09:00: only an hourly rollup
        (60, "1h", 50, 50, 50), (60, "1m", 40, 40, 40),  # 10:00 also has raw samples: both ignored
        (65, "raw", 5, 2, None), (75, "raw", None, 3, 700), (85, "raw", 8, 1, 200),
        (95, "raw", 12, 6, None), (105, "raw", 9, 2, 50), (115, "raw", 20, 4, None),
        (120, "1m", 1, 0, None), (121, "1m", 2, 1, None), (122, "1m", 4, 1, 10),  # 11:00: 1-minute rows
    ]
    for minutes, resolution, lag, pending, idle in samples:
        GroupSample.objects.create(group=group, at=base + timedelta(minutes=minutes), resolution=resolution,
                                   lag=lag, pending=pending, oldest_pending_idle_ms=idle)
    run(spark, lake_dir, ["lag_trend"], as_of=base + timedelta(hours=6))

    finest = {0: "1h", 1: "raw", 2: "1m"}
    got = {int((x["hour"] - base).total_seconds() // 3600): x for x in rollup(lake_dir, "lag_trend")}
    assert set(got) == {0, 1, 2}
    for hour, row in got.items():
        used = [s for s in samples if s[0] // 60 == hour and s[1] == finest[hour]]
        lags = [s[2] for s in used if s[2] is not None]
        idles = [s[4] for s in used if s[4] is not None]
        assert (row["group"], row["group_text"], row["stream"]) == (b"bill\xffing", "bill\\xffing", b"orders")
        assert row["samples"] == len(used)
        assert row["mean_lag"] == pytest.approx(sum(lags) / len(lags))
        assert (row["max_lag"], row["last_lag"], row["lag_change"]) == (max(lags), lags[-1], lags[-1] - lags[0])
        assert row["max_pending"] == max(s[3] for s in used)
        assert row["max_idle_ms"] == (max(idles) if idles else None)


# ---------------------------------------------------------------------------------------- anomalies


def expected_anomalies(counts: dict[int, int], last_start: int, threshold: float = 3.0) -> dict[int, float]:
    """z per flagged hour by the rule of ``transform.anomalies``, over a dense hour grid."""
    hours = range(min(counts), last_start + 1, data.HOUR_MS)
    dense = {h: counts.get(h, 0) for h in hours}
    flagged = {}
    for h, x in dense.items():
        baseline = [dense[h - k * data.DAY_MS] for k in range(1, 15) if h - k * data.DAY_MS in dense]
        if len(baseline) < 3:
            continue
        z = (x - statistics.mean(baseline)) / max(statistics.stdev(baseline), 1.0)
        if abs(z) >= threshold:
            flagged[h] = z
    return flagged


def test_anomalies_flag_the_planted_spike_and_drop_only(spark, r, lake_dir: Path) -> None:
    entries, counts = data.hourly_traffic()
    data.write(r, entries)
    end = data.T0 + 10 * data.DAY_MS  # the end of the last generated hour
    run(spark, lake_dir, ["anomalies"], as_of=at(end))

    expected = expected_anomalies(counts, end - data.HOUR_MS)
    spike, drop = data.T0 + 8 * data.DAY_MS + 14 * data.HOUR_MS, data.T0 + 9 * data.DAY_MS + 3 * data.HOUR_MS
    assert set(expected) == {spike, drop}  # the generated pattern itself stays under the threshold
    got = {int(x["hour"].timestamp() * 1000): x for x in rollup(lake_dir, "anomalies")}
    assert set(got) == set(expected)
    for hour, z in expected.items():
        assert got[hour]["z"] == pytest.approx(z, rel=1e-9)
        assert got[hour]["entries"] == counts[hour] and got[hour]["threshold"] == 3.0
    assert got[spike]["direction"] == "spike" and got[drop]["direction"] == "drop"
    assert got[spike]["baseline_points"] == 8 and got[drop]["baseline_points"] == 9


def test_hours_after_the_last_entry_count_as_zero_until_as_of(spark, r, lake_dir: Path) -> None:
    entries, counts = data.hourly_traffic()
    data.write(r, entries)
    end = data.T0 + 10 * data.DAY_MS + 3 * data.HOUR_MS  # three silent hours after the data
    run(spark, lake_dir, ["anomalies"], as_of=at(end + 1800_000))
    expected = expected_anomalies(counts, end - data.HOUR_MS)
    got = {int(x["hour"].timestamp() * 1000) for x in rollup(lake_dir, "anomalies")}
    assert got == set(expected) and {end - h * data.HOUR_MS for h in (1, 2, 3)} <= got
