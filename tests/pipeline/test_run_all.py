"""``run_all``, the entry point ``spark-submit`` uses: each job reports the rows its files hold, every job
runs at once and is heard once with results in the jobs' order, a failing job cancels the others and is
raised once all have stopped, and a local lake is listed by the driver unless the caller chose.

The history is written to the real Redis, exported by the real exporter and rolled up by real Spark
(``run_all``, the entry point ``spark-submit`` uses); the rollup files are read back with pyarrow. The
expected values are computed here from the generated entries, never by the pipeline's code (docs/architecture.md#tests).
"""

from __future__ import annotations

import threading
from collections import Counter
from pathlib import Path

import pytest
from pyspark.sql import functions as F

from pipeline import main, session
from streams_app.lake import export
from tests.pipeline import data
from tests.pipeline.rollups import at, rollup
from tests.polling import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.django_db]


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
            sys._busconsole_slept = True  # type: ignore[attr-defined]  # a marker set once per worker process
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
