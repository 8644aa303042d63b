"""The latency rollup's percentiles (per stream, group, type and hour) against nearest-rank percentiles
computed here over the same generated history.

The history is written to the real Redis, exported by the real exporter and rolled up by real Spark
(``run_all``, the entry point ``spark-submit`` uses); the rollup files are read back with pyarrow. The
expected values are computed here from the generated entries, never by the pipeline's code (docs/architecture.md#tests).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from pathlib import Path

import pytest

from tests.pipeline import data
from tests.pipeline.rollups import rollup, run

pytestmark = [pytest.mark.spark, pytest.mark.django_db]


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


def test_latency_ranks_in_one_window_operator(spark) -> None:
    """The running sum and the total of a key's runs are one window spec: one Window operator, one pass
    over each sorted partition (a plan only: nothing runs)."""
    from pyspark.sql import functions as F

    from pipeline import transform

    metrics = spark.range(3).select(  # not a local relation: the optimizer would fold its window away
        F.lit("c").alias("conn"), F.current_timestamp().alias("ts"), F.lit("processed").alias("event"),
        F.lit("s").alias("stream"), F.lit("g").alias("group"), F.lit("t").alias("type"),
        F.col("id").alias("count"), F.col("id").cast("double").alias("duration_ms"), F.lit(1.0).alias("max_ms"),
    )
    plan = transform.latency(metrics)._jdf.queryExecution().executedPlan().toString()
    assert plan.count("Window [") == 1, plan
