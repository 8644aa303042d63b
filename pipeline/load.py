"""Load: each rollup as Parquet under ``<out>/<name>/`` (``<lake>/rollups`` by default).

The rollups' names are part of the layout (:mod:`pipeline.lake`).

A run replaces every rollup (they are recomputed from the whole lake, which only grows), so the
directory of a rollup always holds one run's result. The console reads them with pyarrow
(:mod:`streams_app.lake.rollups`); anything else that reads Parquet can too.
"""

from __future__ import annotations

from collections.abc import Callable

from pyspark.sql import DataFrame, Observation, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.types import StructType

from pipeline import lake


def out_uri(lake_uri: str, out: str | None = None) -> str:
    """Where rollups go: ``out`` when given, else ``<lake>/rollups``, as a Hadoop URI."""
    return lake.hadoop_uri(out) if out else lake.hadoop_uri(lake_uri).rstrip("/") + "/" + lake.ROLLUPS


def write(spark: SparkSession, frame: DataFrame, out: str, name: str) -> int:
    """Replace rollup ``name`` with ``frame``; the number of rows written.

    At most one file per core (``coalesce(defaultParallelism)``): a task writes one file per partition,
    and a rollup computed with many shuffle partitions was as many small files (204 per rollup on a
    cluster with Spark's default 200), each written, listed and read back by the console. ``coalesce``
    merges partitions without a shuffle, and every core still writes; Spark's ``REBALANCE`` hint would
    size the files better but costs a shuffle of the whole rollup (a third more time for the minutes
    of throughput).

    The rows are counted as they are written (an :class:`~pyspark.sql.Observation`, a metric the write
    itself collects), not by reading the rollup back: that second action listed the directory and ran
    two more Spark jobs, about a second per rollup, most of a small job's time.
    """
    return _write(spark, frame, out.rstrip("/") + "/" + name, "overwrite")


def write_then_derive(
    spark: SparkSession, frame: DataFrame, derive: Callable[[DataFrame], DataFrame], out: str, name: str
) -> int:
    """Replace rollup ``name`` with ``frame``, then add ``derive`` of the rows just written; the rows in all.

    For a rollup whose smaller parts are aggregates of its largest (the throughput's hours and totals
    of its minutes): reading the written part back is a scan of compact Parquet, where deriving from
    ``frame`` itself would compute it again. Until the second write ends the directory holds the first
    part only; a run that fails there is reported failed and its rollups are not loaded.
    """
    rows = write(spark, frame, out, name)
    return rows + append_derived(spark, frame.schema, derive, out, name)


def append_derived(
    spark: SparkSession, schema: StructType, derive: Callable[[DataFrame], DataFrame], out: str, name: str
) -> int:
    """Add ``derive`` of rollup ``name``'s rows (read with ``schema``) to it; the rows added. The second
    half of :func:`write_then_derive`, for a caller that checks the first part before deriving."""
    uri = out.rstrip("/") + "/" + name
    return _write(spark, derive(spark.read.schema(schema).parquet(uri)), uri, "append")


def _write(spark: SparkSession, frame: DataFrame, uri: str, mode: str) -> int:
    written = Observation()
    frame = frame.observe(written, F.count(F.lit(1)).alias("rows"))
    frame.coalesce(max(1, spark.sparkContext.defaultParallelism)).write.mode(mode).parquet(uri)
    return int(written.get["rows"])
