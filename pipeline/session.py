"""The SparkSession the jobs run in: local by default, a cluster when ``master`` (``SPARK_MASTER``) says so.

The jobs do not care where they run, and the settings below are right for any master:

* every session computes in UTC (``spark.sql.session.timeZone``): hour buckets and weekdays must
  not move with the machine's time zone;
* Parquet timestamps are written as standard ``TIMESTAMP_MICROS`` (not the legacy INT96), so the
  rollups read back the same in pyarrow;
* partition directory values stay strings (``connection=123`` is a name, not a number);
* adaptive query execution is on, with its coalescing of small shuffle partitions: a stage after a
  shuffle runs as many tasks as its data needs; a rollup is written as at most one file per core,
  not one per shuffle partition (see :func:`pipeline.load.write`);
* the number of shuffle partitions is sized per run from the lake's size and the cores the
  application has (:func:`size_shuffle`), never Spark's constant 200: on a standalone cluster that
  constant made every stage 200 tiny tasks and every rollup 200 files, four times slower than local;
* a local master also gets a driver bound to 127.0.0.1 and no web UI, and a JVM for short runs: the
  JIT's first tier only and the parallel collector (``-XX:TieredStopAtLevel=1 -XX:+UseParallelGC``).
  A run is a fresh JVM doing each job once; the optimizing compiler (C2) and G1's concurrent threads
  then burn about as much CPU as the jobs themselves, on the same cores. Measured on 2 cores over a
  lake of 10M entries (docs/performance.md#figures-behind-the-design): with C2 the compiler threads
  took half of the run's CPU; the throughput job was faster, every other job slower, the whole run a
  little faster. Over a small lake those other jobs are the whole run, so the first tier stays. The
  resident driver (:mod:`pipeline.service`), whose JVM runs the same jobs day after day, is the
  opposite case and keeps both tiers (``resident=True``, :data:`RESIDENT_JVM`). A
  cluster's executors keep the JVM defaults
  (they may run long, and their cores are not the driver's); the throwaway cluster of
  :mod:`pipeline.standalone`, which lives for one run, sets the same flags in its spark-defaults.conf.

An option given by the caller (``conf``, ``spark-submit --conf``, ``run_pipeline --conf``,
``BUSCONSOLE_SPARK_CONF``) always wins, ``spark.sql.shuffle.partitions`` included: then it is not sized.
Under ``spark-submit`` the master and conf come from its command line: ``master=None`` leaves them.
"""

from __future__ import annotations

import logging
import math
import os
import sys
import time
from collections.abc import Mapping

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

from pipeline import lake

BASE_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
    "spark.sql.adaptive.enabled": "true",
    "spark.sql.adaptive.coalescePartitions.enabled": "true",
}
#: The JVM flags of a short run (see the module's doc).
SHORT_RUN_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseParallelGC"
#: The JVM flags of the resident driver (:mod:`pipeline.service`), which runs the same jobs day after
#: day: both JIT tiers, so C2's code pays back from the second run on, and the parallel collector.
#: The compile thresholds are four times the JVM's: a run's per-row code reaches them within its first
#: run anyway, while the planning code each job runs a few hundred times (the analyzer, optimizer and
#: planner rules) crossed the default thresholds a few more methods each run, so the JIT compilers
#: still took a fifth of the fourth run's CPU, compiling code that runs once per query. With the
#: thresholds scaled, that lukewarm code stays interpreted or at the first tier longer and the JIT's
#: share of a later run falls; scaled ten times, the interpreter cost more than the compilers saved
#: (docs/performance.md#figures-behind-the-design).
RESIDENT_JVM = "-XX:+UseParallelGC -XX:CompileThresholdScaling=4"
#: What else a resident session needs: room in the cache of generated classes for every query of a
#: run. A run of the jobs generates 132 classes and Spark keeps 100 by default, so each run evicted
#: and compiled most of them again (114-124 per run, measured), and the JIT started over on the new
#: classes. With room for all, a later run compiles only the few whose code holds the run's ``as_of``
#: (8), and was faster over lakes of 500k and of 10M entries
#: (docs/performance.md#figures-behind-the-design). A static option: it takes effect when the session starts.
RESIDENT_CONF = {"spark.sql.codegen.cache.maxEntries": "1000"}
LOCAL_CONF = {
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.memory": "2g",  # unless SPARK_DRIVER_MEMORY is set (see build_session)
    "spark.driver.extraJavaOptions": SHORT_RUN_JVM,
}
SHUFFLE_PARTITIONS = "spark.sql.shuffle.partitions"
#: Set on a session whose shuffle partitions are ours to size (the caller did not choose them).
AUTO_PARTITIONS = "spark.busconsole.autoShufflePartitions"
#: Shuffle partitions per core: at least MIN_ROUNDS (several tasks per core balance uneven ones, and
#: adaptive execution coalesces what is small), one more per PARTITION_INPUT_BYTES of lake per core,
#: at most MAX_PER_CORE. The lake is compressed Parquet and what reaches a shuffle is far smaller
#: after the map side's partial aggregation, so this is an upper bound adaptive execution reduces.
PARTITION_INPUT_BYTES = 64 * 2**20
MIN_ROUNDS = 4
MAX_PER_CORE = 16
#: Directories to list above which Spark lists a dataset in a Spark job instead of in the driver.
LISTING_THRESHOLD = "spark.sql.sources.parallelPartitionDiscovery.threshold"
SPARK_LISTING_THRESHOLD = "32"  # Spark's default
#: The threshold for a lake on a local file system: listing there costs microseconds per directory,
#: a listing job (tens of tasks) a second or more of a small job's time.
LOCAL_LISTING_THRESHOLD = 1_000_000
#: How long a cluster session waits for its first executor before it counts cores (a standalone
#: master reports 2 cores until executors have registered).
EXECUTOR_WAIT_S = 20.0


def _submitted_conf() -> SparkConf | None:
    """spark-submit's conf (its JVM is up already), or None when not under spark-submit."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return None
    SparkContext._ensure_initialized()
    return SparkConf()


def build_session(
    master: str | None = None,
    *,
    app_name: str = "busconsole-pipeline",
    conf: Mapping[str, str] | None = None,
    resident: bool = False,
) -> SparkSession:
    """A new or the running SparkSession with :data:`BASE_CONF` (and :data:`LOCAL_CONF` for ``local``).

    ``resident`` is for a driver that stays up between runs (:mod:`pipeline.service`): it gets
    :data:`RESIDENT_CONF`, and a local one :data:`RESIDENT_JVM` instead of :data:`SHORT_RUN_JVM`. The
    driver's memory and JVM flags are fixed when its JVM starts, so they only take effect in the first
    session of a process.
    """
    builder = SparkSession.builder.appName(app_name)
    settings: dict[str, str] = dict(BASE_CONF)
    submitted = _submitted_conf() if not master else None
    if master:
        builder = builder.master(master)
        if master.startswith("local"):
            settings.update(LOCAL_CONF)
            if resident:
                settings["spark.driver.extraJavaOptions"] = RESIDENT_JVM
            # The JVM looks up the host's address before reading any conf: keep a local session on
            # the loopback interface from the start (and quiet its "resolves to a loopback" warning).
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            if os.environ.get("SPARK_DRIVER_MEMORY"):
                settings.pop("spark.driver.memory")  # spark-submit reads the variable itself
    if resident:
        settings.update(RESIDENT_CONF)
    if submitted is not None:
        # spark-submit fixed its conf already: only what it was not given is added
        settings = {k: v for k, v in settings.items() if not submitted.contains(k)}
    settings.update(conf or {})
    chosen = SHUFFLE_PARTITIONS in settings or (submitted is not None and submitted.contains(SHUFFLE_PARTITIONS))
    for key, value in settings.items():
        builder = builder.config(key, value)
    # PySpark starts the JVM from the python that runs it; make the workers (if any) match.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = builder.getOrCreate()
    session.conf.set(AUTO_PARTITIONS, "false" if chosen else "true")
    session.sparkContext.setLogLevel("WARN")
    # py4j logs every connection at INFO, and does so again while the interpreter shuts down
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return session


def shuffle_partitions(cores: int, input_bytes: int) -> int:
    """Shuffle partitions for ``input_bytes`` of lake on ``cores``: a multiple of the cores.

    :data:`MIN_ROUNDS` rounds of tasks per core for a small lake, more (up to :data:`MAX_PER_CORE`)
    as it grows, so a partition holds about :data:`PARTITION_INPUT_BYTES` of input.
    """
    cores = max(1, cores)
    rounds = math.ceil(max(0, input_bytes) / (cores * PARTITION_INPUT_BYTES))
    return cores * min(MAX_PER_CORE, max(MIN_ROUNDS, rounds))


def cores(spark: SparkSession, *, wait_s: float = EXECUTOR_WAIT_S) -> int:
    """The cores the application computes with (``defaultParallelism``), once it has an executor.

    A local master has its cores from the start; a cluster's executors register after the session
    is up, so this waits (at most ``wait_s``) for the first. ``spark.default.parallelism``, when set,
    is the answer Spark gives and so this one.
    """
    context = spark.sparkContext
    if not context.master.startswith("local"):  # type: ignore[union-attr]  # a running SparkContext has its master
        tracker = context._jsc.sc().statusTracker()
        deadline = time.monotonic() + wait_s
        while len(tracker.getExecutorInfos()) < 2 and time.monotonic() < deadline:  # the driver is one
            time.sleep(0.2)
    return int(context.defaultParallelism)


def size_listing(spark: SparkSession, lake_uri: str) -> bool:
    """List a lake on the local file system in the driver; True when the session was changed.

    The lake has a directory per stream and day, hundreds of them, more than the 32 above which Spark
    lists in parallel in a job of its own. Against HDFS or an object store that job pays (each listing
    is a round trip); against a local disk it costs far more than the listing. Left alone when the
    caller set the threshold (it is not Spark's default).
    """
    if not lake.hadoop_uri(lake_uri).startswith("file:") or spark.conf.get(LISTING_THRESHOLD) != SPARK_LISTING_THRESHOLD:
        return False
    spark.conf.set(LISTING_THRESHOLD, str(LOCAL_LISTING_THRESHOLD))
    return True


def size_shuffle(spark: SparkSession, input_bytes: int) -> int | None:
    """Set the session's shuffle partitions for a run over ``input_bytes``; the number, or None.

    None (nothing changed) when the caller chose ``spark.sql.shuffle.partitions`` itself or the
    session was not built by :func:`build_session` (a notebook's keeps its own settings).
    """
    if spark.conf.get(AUTO_PARTITIONS, "false") != "true":
        return None
    partitions = shuffle_partitions(cores(spark), input_bytes)
    spark.conf.set(SHUFFLE_PARTITIONS, str(partitions))
    return partitions
