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
import logging  # noqa: E402
import os  # noqa: E402
import queue  # noqa: E402
import threading  # noqa: E402
import time  # noqa: E402
import uuid  # noqa: E402
from collections.abc import Callable, Sequence  # noqa: E402
from dataclasses import asdict, dataclass  # noqa: E402
from datetime import UTC, datetime  # noqa: E402

from pyspark import InheritableThread, StorageLevel  # noqa: E402
from pyspark.sql import DataFrame, Observation, SparkSession  # noqa: E402
from pyspark.sql import functions as F  # noqa: E402

from pipeline import conf as spark_conf  # noqa: E402
from pipeline import extract, failures, lake, load, session, transform  # noqa: E402

log = logging.getLogger(__name__)

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
    check: Callable[[], None] | None = None,
) -> list[JobResult]:
    """Extract, transform and load every job in ``jobs``, side by side; their results in :data:`JOBS` order.

    The jobs run in threads of this driver, in the lanes of :data:`_LANES`: throughput, then the
    anomalies that read its rollup, in one; the other jobs one after another in the second. The small
    jobs cost mostly the same fixed work each (planning, code generation, scheduling, a write's
    commit), which the driver does while the executors run the throughput job's tasks: the same CPU,
    less wall time. Measured on 2 cores over a lake of 10M entries, two lanes beat one job after another in a fresh JVM
    and in a warm one (docs/performance.md#figures-behind-the-design). Jobs are scheduled FIFO, Spark's default: the
    FAIR scheduler, a pool per lane, was no faster, as it lends the cores the throughput job, the longest
    chain, would use.

    ``on_step`` hears of each job as it finishes, in the caller's thread (never two calls at once).
    ``check`` is called there too, every :attr:`_Lanes.POLL_S` while the jobs run, and stops the run
    by raising (the resident driver's test for a client that went away). When a job raises, the jobs
    running in the other lanes are cancelled (their Spark jobs carry a tag of this run and are
    interrupted), those not yet started never start, and the first error is raised, itself, once
    every lane has stopped: nothing of the run goes on after this returns or raises. Rollups the
    cancelled jobs were replacing may then be half written, as when a run fails in a job's write.
    """
    unknown = sorted(set(jobs) - set(JOBS))
    if unknown:
        raise ValueError(f"unknown jobs: {', '.join(unknown)} (known: {', '.join(JOBS)})")
    target = load.out_uri(lake_uri, out)
    as_of = as_of or datetime.now(UTC)
    session.size_shuffle(spark, extract.input_bytes(spark, lake_uri))
    session.size_listing(spark, lake_uri)

    def throughput() -> dict[str, int]:
        return {lake.THROUGHPUT: _throughput(spark, lake_uri, target)}

    def latency() -> dict[str, int]:
        found = transform.latency(extract.metrics(spark, lake_uri))
        return {lake.LATENCY: load.write(spark, found, target, lake.LATENCY)}

    def dead_letters() -> dict[str, int]:
        # Both rollups read the dead letters: the first write keeps them in memory for the second,
        # one scan of the DLQ files instead of two (the rows are few; released once both are written).
        dead = extract.dead_letters(spark, lake_uri).persist(StorageLevel.MEMORY_ONLY)
        try:
            return {
                lake.ERROR_SIGNATURES: load.write(
                    spark, failures.error_signatures(dead), target, lake.ERROR_SIGNATURES
                ),
                lake.RETRIES: load.write(spark, failures.retries_histogram(dead), target, lake.RETRIES),
            }
        finally:
            dead.unpersist()

    def lag_trend() -> dict[str, int]:
        found = transform.lag_trend(extract.group_samples(spark, lake_uri))
        return {lake.LAG_TREND: load.write(spark, found, target, lake.LAG_TREND)}

    def anomalies() -> dict[str, int]:
        hourly = _hourly(spark, lake_uri, target, reuse="throughput" in jobs)
        found = transform.anomalies(hourly, as_of=as_of, threshold=threshold, baseline_days=baseline_days)
        return {lake.ANOMALIES: load.write(spark, found, target, lake.ANOMALIES)}

    work = {
        "throughput": throughput,
        "latency": latency,
        "failures": dead_letters,
        "lag_trend": lag_trend,
        "anomalies": anomalies,
    }
    done = _Lanes(spark, work, on_step, check).run(_lanes(jobs))
    return [done[name] for name in JOBS if name in done]


#: The jobs by lane: each lane runs its jobs in this order, the lanes side by side. Anomalies reads
#: the rollup throughput writes; the others read the lake only. Two lanes, the split measured (see
#: :func:`run_all`): what the second overlaps is the driver's fixed work of one small job at a time,
#: while the throughput job keeps the cores busy.
_LANES = (("throughput", "anomalies"), ("latency", "failures", "lag_trend"))


def _lanes(jobs: Sequence[str]) -> list[list[str]]:
    """The lanes of :data:`_LANES` holding the jobs chosen, in order, empty ones left out."""
    lanes = [[name for name in lane if name in jobs] for lane in _LANES]
    return [lane for lane in lanes if lane]


class _Lanes:
    """Run lanes of jobs in threads of the driver; stop them all at the first error.

    Each lane is a :class:`pyspark.InheritableThread`: in PySpark's pinned-thread mode (the default)
    a Python thread drives a JVM thread of its own, which inherits the caller's local properties
    (job group, tags, scheduler pool) and adds a tag of this run to every Spark job it starts. Spark's
    scheduler takes jobs from several threads at once; cancelling the tag cancels those running.
    ``on_step`` is called in the caller's thread, which waits anyway: never two calls at once, and
    with the caller's thread-bound state (the console's callback writes with its database connection).
    """

    #: How often the caller looks at the lanes while they run (a first error waits at most this long
    #: for the cancel), and cancels again while a stopped lane is still between two Spark jobs.
    POLL_S = 0.1

    def __init__(
        self,
        spark: SparkSession,
        work: dict[str, Callable[[], dict[str, int]]],
        on_step: StepFn | None,
        check: Callable[[], None] | None = None,
    ) -> None:
        self.context = spark.sparkContext
        self.work = work
        self.on_step = on_step
        self.check = check
        self.tag = f"busconsole-rollups-{uuid.uuid4().hex}"
        self.finished: queue.SimpleQueue[JobResult] = queue.SimpleQueue()
        self.done: dict[str, JobResult] = {}
        self.lock = threading.Lock()  # error and stop, set together
        self.stop = threading.Event()
        self.error: BaseException | None = None

    def run(self, lanes: list[list[str]]) -> dict[str, JobResult]:
        threads = [
            InheritableThread(self._lane, args=(lane,), name=f"rollups-{lane[0]}", daemon=True)
            for lane in lanes
        ]
        try:
            for thread in threads:
                thread.start()
            self._wait(threads, report=True)
        except BaseException as exc:  # on_step or check raised, or Ctrl-C: stop the lanes before leaving
            self._fail(exc)
            self._wait(threads, report=False)
        if self.error is not None:
            raise self.error
        return self.done

    def _wait(self, threads: Sequence[threading.Thread], *, report: bool) -> None:
        """Until every lane has ended: report each job that finishes, cancel the run's jobs once stopped."""
        while True:
            alive = any(thread.is_alive() for thread in threads)
            try:  # a lane puts its last result before it ends: one more look once none is alive
                result = self.finished.get(timeout=self.POLL_S) if alive else self.finished.get_nowait()
            except queue.Empty:
                if not alive:
                    return
                result = None
            if self.stop.is_set():
                # again on every round: a lane between two Spark jobs starts the next before it
                # sees the stop, and only the jobs running when the tag is cancelled stop
                self.context.cancelJobsWithTag(self.tag)
            if result is not None:
                self.done[result.job] = result
                if report and self.on_step:
                    self.on_step(result)
            if report and self.check and not self.stop.is_set():
                self.check()

    def _lane(self, lane: list[str]) -> None:
        self.context.addJobTag(self.tag)
        self.context.setInterruptOnCancel(True)
        try:
            for name in lane:
                if self.stop.is_set():
                    return
                started = time.monotonic()
                rows = self.work[name]()
                self.finished.put(JobResult(name, rows, round(time.monotonic() - started, 3)))
        except BaseException as exc:  # noqa: BLE001 - handed to the caller by run()
            self._fail(exc)
        finally:
            self.context.removeJobTag(self.tag)
            self.context.setInterruptOnCancel(False)

    def _fail(self, exc: BaseException) -> None:
        """Keep the first error (a cancelled lane's error is a consequence of it) and stop every lane."""
        with self.lock:
            if self.error is None:
                self.error = exc
            self.stop.set()


def _throughput(spark: SparkSession, lake_uri: str, target: str) -> int:
    """Write the throughput rollup; its rows.

    The entries are grouped on a hash of their stream (:func:`pipeline.transform.minutes_by_id`), and
    so are the totals derived from the minute rows (:func:`pipeline.transform.totals_by_id`); the
    streams' names are joined back onto the groups (:func:`pipeline.transform.with_stream_names`). That
    is used when it proves exact as it is written: no group may be dropped by a join (its stream not
    among those :func:`pipeline.extract.entry_streams` named) and none may fall on an id two streams
    share. Both are counted by the writes themselves (observations), so the checks cost no pass of
    their own. Otherwise, or when the lake is not laid out by stream, the rollup is written again
    grouped on the streams' columns themselves, as it always could be: the same rows, more CPU.
    """
    entries = extract.entries(spark, lake_uri)
    streams = extract.entry_streams(spark, lake_uri, entries)
    if streams is not None:
        names = transform.stream_names(streams).persist(StorageLevel.MEMORY_ONLY)  # both writes join them
        try:
            rows, doubt = _throughput_by_id(spark, entries, names, target)
        finally:
            names.unpersist()
        if doubt is None:
            return rows
        log.warning("throughput: %s; grouping on the stream keys instead", doubt)
    minutes = transform.minute_rows(transform.throughput_minutes(entries))
    return load.write_then_derive(spark, minutes, transform.throughput_totals, target, lake.THROUGHPUT)


def _throughput_by_id(spark: SparkSession, entries: DataFrame, names: DataFrame, target: str) -> tuple[int, str | None]:
    """The throughput rollup grouped on stream ids and named from ``names``; its rows and None, or the
    rows and why they are not to be trusted (the caller then writes the rollup again)."""
    grouped, kept, summed = Observation(), Observation(), Observation()
    by_id = transform.minutes_by_id(entries).observe(grouped, F.count(F.lit(1)).alias("rows"))
    named = transform.with_stream_names(by_id, names).observe(
        kept, F.count(F.lit(1)).alias("rows"), F.max(F.col("shared").cast("int")).alias("shared")
    )
    minutes = transform.minute_rows(named)
    rows = load.write(spark, minutes, target, lake.THROUGHPUT)
    if kept.get["shared"]:
        return rows, "a shared stream id"
    if rows != grouped.get["rows"]:
        return rows, f"a stream left unnamed ({grouped.get['rows'] - rows} of {grouped.get['rows']} groups)"

    def totals(written: DataFrame) -> DataFrame:
        # the totals' streams are the minute rows' own, which the names just covered, one id each
        sets = transform.totals_by_id(written).observe(summed, F.count(F.lit(1)).alias("rows"))
        return transform.totals_rows(transform.with_stream_names(sets, names))

    added = load.append_derived(spark, minutes.schema, totals, target, lake.THROUGHPUT)
    if added != summed.get["rows"]:
        return rows + added, f"a stream left unnamed in the totals ({summed.get['rows'] - added} rows)"
    return rows + added, None


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
    running = time.monotonic()
    try:
        run_all(
            spark, args.lake, args.out, as_of=as_of, threshold=args.z, baseline_days=args.baseline_days,
            jobs=[j.strip() for j in args.jobs.split(",") if j.strip()],
            on_step=lambda result: print(json.dumps(asdict(result)), flush=True),
        )
        ran = time.monotonic()
    except Exception as exc:
        print(json.dumps({"error": _brief(exc)}), flush=True)  # the console's run reads this line
        raise
    finally:
        partitions = spark.conf.get(session.SHUFFLE_PARTITIONS)
        spark.stop()
    # the jobs' wall time: they run side by side, so the sum of their seconds would count overlaps twice
    print(json.dumps({"jobs_s": round(ran - running, 3), "shuffle_partitions": int(partitions),  # type: ignore[arg-type]  # session.build_session always sets it
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
