"""Run the rollup jobs: ``spark-submit pipeline/main.py --lake <uri> [--out <uri>]`` or ``python -m pipeline.main``.

Under ``spark-submit`` the master and resources come from its command line (``--master spark://...``,
``yarn``, ``k8s://...``); run by plain Python the session is local (``--master``, else ``SPARK_MASTER``,
else ``local[*]``). The lake may be any Hadoop-compatible URI (``hdfs://``, ``s3a://``, ``gs://``,
``abfs://``) or a local path. Prints one JSON line per job and a summary, and exits non-zero on failure.

The console runs the same :func:`run_all` in-process (:mod:`streams_app.lake.run`).
"""

from __future__ import annotations

import sys
from pathlib import Path

if __package__ in (None, ""):  # spark-submit runs this file as a script: make `pipeline` importable
    sys.path.insert(0, str(Path(__file__).resolve().parent.parent))

import argparse  # noqa: E402
import json  # noqa: E402
import os  # noqa: E402
import time  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402
from datetime import UTC, datetime  # noqa: E402

from pyspark import StorageLevel  # noqa: E402
from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from pipeline import extract, failures, lake, load, transform  # noqa: E402
from pipeline.session import build_session  # noqa: E402

JOBS = ("throughput", "latency", "failures", "lag_trend", "anomalies")


@dataclass(frozen=True, slots=True)
class JobResult:
    job: str
    rows: dict[str, int]
    seconds: float


StepFn = Callable[[JobResult], None]


def run_all(
    spark: SparkSession,
    lake_uri: str,
    out: str | None = None,
    *,
    as_of: datetime | None = None,
    threshold: float = transform.ANOMALY_THRESHOLD,
    baseline_days: int = transform.BASELINE_DAYS,
    jobs: Sequence[str] = JOBS,
    on_step: StepFn | None = None,
) -> list[JobResult]:
    """Extract, transform and load every job in ``jobs``; ``on_step`` hears of each as it finishes."""
    unknown = sorted(set(jobs) - set(JOBS))
    if unknown:
        raise ValueError(f"unknown jobs: {', '.join(unknown)} (known: {', '.join(JOBS)})")
    target = load.out_uri(lake_uri, out)
    as_of = as_of or datetime.now(UTC)
    results: list[JobResult] = []
    minutes: DataFrame | None = None

    def step(name: str, work: Callable[[], dict[str, int]]) -> None:
        started = time.monotonic()
        result = JobResult(name, work(), round(time.monotonic() - started, 3))
        results.append(result)
        if on_step:
            on_step(result)

    def per_minute() -> DataFrame:
        nonlocal minutes
        if minutes is None:
            minutes = transform.throughput_minutes(extract.entries(spark, lake_uri)).persist(
                StorageLevel.MEMORY_AND_DISK
            )
        return minutes

    try:
        if "throughput" in jobs:
            step("throughput", lambda: {
                lake.THROUGHPUT: load.write(spark, transform.throughput(per_minute()), target, lake.THROUGHPUT)
            })
        if "latency" in jobs:
            step("latency", lambda: {
                lake.LATENCY: load.write(spark, transform.latency(extract.metrics(spark, lake_uri)), target,
                                         lake.LATENCY)
            })
        if "failures" in jobs:
            dead = extract.dead_letters(spark, lake_uri)
            step("failures", lambda: {
                lake.ERROR_SIGNATURES: load.write(spark, failures.error_signatures(dead), target,
                                                  lake.ERROR_SIGNATURES),
                lake.RETRIES: load.write(spark, failures.retries_histogram(dead), target, lake.RETRIES),
            })
        if "lag_trend" in jobs:
            step("lag_trend", lambda: {
                lake.LAG_TREND: load.write(spark, transform.lag_trend(extract.group_samples(spark, lake_uri)),
                                           target, lake.LAG_TREND)
            })
        if "anomalies" in jobs:
            def anomalies() -> dict[str, int]:
                hourly = (
                    transform.throughput(per_minute())
                    .filter((F.col("scope") == transform.SCOPE_STREAM) & (F.col("resolution") == transform.HOUR))
                )
                found = transform.anomalies(hourly, as_of=as_of, threshold=threshold, baseline_days=baseline_days)
                return {lake.ANOMALIES: load.write(spark, found, target, lake.ANOMALIES)}

            step("anomalies", anomalies)
    finally:
        if minutes is not None:
            minutes.unpersist()
    return results


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="pipeline.main", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lake", required=True, help="The lake's root: a path or a Hadoop URI (s3a://...).")
    parser.add_argument("--out", help="Where rollups go (default: <lake>/rollups).")
    parser.add_argument("--master", help="Spark master when not under spark-submit (default: $SPARK_MASTER or local[*]).")
    parser.add_argument("--as-of", help="ISO-8601 time: hours ending after it are not scored (default: now).")
    parser.add_argument("--z", type=float, default=transform.ANOMALY_THRESHOLD, help="Anomaly |z| threshold.")
    parser.add_argument("--baseline-days", type=int, default=transform.BASELINE_DAYS)
    parser.add_argument("--jobs", default=",".join(JOBS), help=f"Comma-separated subset of: {', '.join(JOBS)}.")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE", help="Extra Spark conf.")
    return parser.parse_args(argv)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started the JVM for us
    master = args.master or (None if under_submit else os.environ.get("SPARK_MASTER") or "local[*]")
    conf = dict(item.split("=", 1) for item in args.conf)
    as_of = datetime.fromisoformat(args.as_of.replace("Z", "+00:00")) if args.as_of else datetime.now(UTC)
    started = time.monotonic()
    spark = build_session(master, conf=conf)
    startup = round(time.monotonic() - started, 3)
    print(json.dumps({"spark_startup_s": startup, "master": spark.sparkContext.master}), flush=True)
    try:
        results = run_all(
            spark, args.lake, args.out, as_of=as_of, threshold=args.z, baseline_days=args.baseline_days,
            jobs=[j.strip() for j in args.jobs.split(",") if j.strip()],
            on_step=lambda result: print(json.dumps(asdict(result)), flush=True),
        )
    finally:
        spark.stop()
    print(json.dumps({"jobs_s": round(sum(r.seconds for r in results), 3),
                      "total_s": round(time.monotonic() - started, 3)}), flush=True)
    return 0


if __name__ == "__main__":
    sys.exit(main())
