"""Run the rollup jobs: ``spark-submit pipeline/main.py --lake <uri> [--out <uri>]`` or ``python -m pipeline``.

Under ``spark-submit`` the master and resources come from its command line (``--master spark://...``,
``yarn``, ``k8s://...``); run by plain Python the master is ``--master``, else ``SPARK_MASTER``, else
``local[*]``, and ``--conf key=value`` (repeatable) adds Spark options. The lake may be any
Hadoop-compatible URI (``hdfs://``, ``s3a://``, ``gs://``, ``abfs://``) or a local path. Prints one JSON
line per job and a summary, and exits non-zero on failure.

The console runs this command in a child process (:mod:`streams_app.lake.run`), reading the JSON lines as
progress and the last one, ``{"error": ...}``, as the reason of a failure.
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

from pyspark.sql import DataFrame, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from pipeline import conf as spark_conf  # noqa: E402
from pipeline import extract, failures, lake, load, session, transform  # noqa: E402

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
    session.size_shuffle(spark, extract.input_bytes(spark, lake_uri))
    session.size_listing(spark, lake_uri)
    results: list[JobResult] = []

    def step(name: str, work: Callable[[], dict[str, int]]) -> None:
        started = time.monotonic()
        result = JobResult(name, work(), round(time.monotonic() - started, 3))
        results.append(result)
        if on_step:
            on_step(result)

    if "throughput" in jobs:
        step("throughput", lambda: {
            lake.THROUGHPUT: load.write_then_derive(
                spark, transform.minute_rows(transform.throughput_minutes(extract.entries(spark, lake_uri))),
                transform.throughput_totals, target, lake.THROUGHPUT,
            )
        })
    if "latency" in jobs:
        step("latency", lambda: {
            lake.LATENCY: load.write(spark, transform.latency(extract.metrics(spark, lake_uri)), target, lake.LATENCY)
        })
    if "failures" in jobs:
        dead = extract.dead_letters(spark, lake_uri)
        step("failures", lambda: {
            lake.ERROR_SIGNATURES: load.write(spark, failures.error_signatures(dead), target, lake.ERROR_SIGNATURES),
            lake.RETRIES: load.write(spark, failures.retries_histogram(dead), target, lake.RETRIES),
        })
    if "lag_trend" in jobs:
        step("lag_trend", lambda: {
            lake.LAG_TREND: load.write(spark, transform.lag_trend(extract.group_samples(spark, lake_uri)),
                                       target, lake.LAG_TREND)
        })
    if "anomalies" in jobs:
        def anomalies() -> dict[str, int]:
            found = transform.anomalies(_hourly(spark, lake_uri, target, reuse="throughput" in jobs), as_of=as_of,
                                        threshold=threshold, baseline_days=baseline_days)
            return {lake.ANOMALIES: load.write(spark, found, target, lake.ANOMALIES)}

        step("anomalies", anomalies)
    return results


def _hourly(spark: SparkSession, lake_uri: str, target: str, *, reuse: bool) -> DataFrame:
    """Per-stream hourly counts for the anomaly scores: the rows the throughput job just wrote, when it ran.

    Reading them back (a few thousand rows of one Parquet directory) replaces a second pass over every
    entry; the throughput job used to cache its per-minute counts for this, and building that cache
    (serializing millions of rows with their binary stream keys) cost more than the job's own
    aggregation.
    """
    if reuse:
        frame = spark.read.parquet(target.rstrip("/") + "/" + lake.THROUGHPUT)
    else:
        frame = transform.throughput(transform.throughput_minutes(extract.entries(spark, lake_uri)))
    return frame.filter((F.col("scope") == transform.SCOPE_STREAM) & (F.col("resolution") == transform.HOUR))


def _parse(argv: Sequence[str] | None) -> argparse.Namespace:
    parser = argparse.ArgumentParser(prog="python -m pipeline", description=__doc__.split("\n\n")[0])
    parser.add_argument("--lake", required=True, help="The lake's root: a path or a Hadoop URI (s3a://...).")
    parser.add_argument("--out", help="Where rollups go (default: <lake>/rollups).")
    parser.add_argument("--master", help="Spark master when not under spark-submit (default: $SPARK_MASTER or local[*]).")
    parser.add_argument("--as-of", help="ISO-8601 time: hours ending after it are not scored (default: now).")
    parser.add_argument("--z", type=float, default=transform.ANOMALY_THRESHOLD, help="Anomaly |z| threshold.")
    parser.add_argument("--baseline-days", type=int, default=transform.BASELINE_DAYS)
    parser.add_argument("--jobs", default=",".join(JOBS), help=f"Comma-separated subset of: {', '.join(JOBS)}.")
    parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                        help="A Spark option, e.g. spark.executor.memory=4g (repeatable; wins over the defaults).")
    parser.add_argument("--parent-pid", type=int, help=argparse.SUPPRESS)  # the console's run: die with it
    args = parser.parse_args(argv)
    try:
        args.conf = spark_conf.parse_items(args.conf)
    except spark_conf.ConfError as exc:
        parser.error(str(exc))
    return args


def _die_with_parent(parent: int) -> None:
    """Ask Linux to kill this process when the console process that started it dies (SIGKILL included).

    Without it a Celery worker killed mid-run would leave this run (and its JVM, which exits when this
    process does: PySpark's gateway watches its stdin) writing rollups next to the run that resumes
    the job. Elsewhere than Linux nothing happens.
    """
    if not sys.platform.startswith("linux"):
        return
    import ctypes
    import signal

    pr_set_pdeathsig = 1
    ctypes.CDLL(None, use_errno=True).prctl(pr_set_pdeathsig, signal.SIGKILL, 0, 0, 0)
    if os.getppid() != parent:  # the parent died before the call: nobody would kill us
        os._exit(1)


def main(argv: Sequence[str] | None = None) -> int:
    args = _parse(argv)
    if args.parent_pid:
        _die_with_parent(args.parent_pid)
    under_submit = "PYSPARK_GATEWAY_PORT" in os.environ  # spark-submit started the JVM for us
    master = args.master or (None if under_submit else os.environ.get("SPARK_MASTER") or "local[*]")
    as_of = datetime.fromisoformat(args.as_of.replace("Z", "+00:00")) if args.as_of else datetime.now(UTC)
    started = time.monotonic()
    try:
        spark = session.build_session(master, conf=args.conf)
    except Exception as exc:
        print(json.dumps({"error": f"Spark did not start: {_brief(exc)}"}), flush=True)
        raise
    startup = round(time.monotonic() - started, 3)
    print(json.dumps({"spark_startup_s": startup, "master": spark.sparkContext.master}), flush=True)
    try:
        results = run_all(
            spark, args.lake, args.out, as_of=as_of, threshold=args.z, baseline_days=args.baseline_days,
            jobs=[j.strip() for j in args.jobs.split(",") if j.strip()],
            on_step=lambda result: print(json.dumps(asdict(result)), flush=True),
        )
    except Exception as exc:
        print(json.dumps({"error": _brief(exc)}), flush=True)  # the console's run reads this line
        raise
    finally:
        partitions = spark.conf.get(session.SHUFFLE_PARTITIONS)
        spark.stop()
    print(json.dumps({"jobs_s": round(sum(r.seconds for r in results), 3), "shuffle_partitions": int(partitions),
                      "total_s": round(time.monotonic() - started, 3)}), flush=True)
    return 0


def _brief(exc: BaseException) -> str:
    """An exception as one line a person can act on: its first line and, for a JVM error, its root cause.

    Spark wraps the cause a person needs ("spark.sql.shuffle.partitions should be int, but was x") in
    layers of "Error while instantiating ..."; the chain is walked in the JVM (``getCause``), since the
    Python text of the exception carries the outer message only.
    """
    text = str(exc).strip()
    brief = f"{type(exc).__name__}: " + next((line.strip() for line in text.splitlines() if line.strip()), "")
    throwable = getattr(exc, "_origin", None) or getattr(exc, "java_exception", None)
    try:
        root = throwable
        for _ in range(20):  # a cause chain is short; a cycle must not hang the error path
            cause = root.getCause() if root is not None else None
            if cause is None:
                break
            root = cause
        if root is not None and root is not throwable:
            brief += f" (caused by {root.getClass().getName()}: {root.getMessage()})"
    except Exception:  # noqa: BLE001 - the JVM may be gone: the outer message will do
        pass
    return brief[:2000]


if __name__ == "__main__":
    sys.exit(main())
