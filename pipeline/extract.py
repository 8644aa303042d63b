"""Extract: the lake's datasets as DataFrames, with only the columns the jobs use.

Reads go through Hadoop file systems, so the same code reads a local directory, ``hdfs://`` or
``s3a://``. Each dataset is read with its schema from :mod:`pipeline.lake` rather than inferred: a
missing or empty dataset (no DLQ ever, snapshots not running) is then an empty DataFrame of the right
shape instead of an error, and every job runs on any lake. Hive partition directories (``connection``,
``stream_hex``, ``day``) are discovered but not selected: the files hold the same facts as columns.
"""

from __future__ import annotations

from pyspark.sql import DataFrame, SparkSession
from pyspark.sql import functions as F
from pyspark.sql.pandas.types import from_arrow_schema
from pyspark.sql.types import StructType

from pipeline import lake

ENTRY_COLUMNS = ("conn", "stream", "stream_text", "ms", "event_type", "payload_size")
METRIC_COLUMNS = ("conn", "ts", "event", "stream", "group", "type", "count", "duration_ms", "max_ms")
DLQ_COLUMNS = (
    "conn", "dlq", "dlq_text", "entry_id", "ms", "ts", "stream", "stream_text", "error", "retries", "failed_at",
)
GROUP_SAMPLE_COLUMNS = (
    "conn", "stream", "stream_text", "group", "group_text", "at", "resolution", "lag", "pending",
    "oldest_pending_idle_ms",
)


def dataset_uri(lake_uri: str, dataset: str) -> str:
    return lake.hadoop_uri(lake_uri).rstrip("/") + "/" + dataset


def _exists(spark: SparkSession, uri: str) -> bool:
    jvm = spark.sparkContext._jvm
    path = jvm.org.apache.hadoop.fs.Path(uri)  # type: ignore[union-attr]  # a live SparkContext has its JVM view
    fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
    return bool(fs.exists(path))


def input_bytes(spark: SparkSession, lake_uri: str) -> int:
    """The bytes of every dataset the jobs read (what sizes the shuffle: :func:`pipeline.session.size_shuffle`).

    Asked of the Hadoop file system, so a lake on ``hdfs://`` or ``s3a://`` answers the same way
    (on S3 it is a recursive listing, small next to reading the data).
    """
    jvm = spark.sparkContext._jvm
    total = 0
    for dataset in (lake.ENTRIES, lake.METRICS, lake.DLQ, lake.GROUP_SAMPLES):
        path = jvm.org.apache.hadoop.fs.Path(dataset_uri(lake_uri, dataset))  # type: ignore[union-attr]  # a live SparkContext has its JVM view
        fs = path.getFileSystem(spark.sparkContext._jsc.hadoopConfiguration())
        if fs.exists(path):
            total += int(fs.getContentSummary(path).getLength())
    return total


def _schema(dataset: str, columns: tuple[str, ...]) -> StructType:
    """``columns`` of ``dataset``'s schema (:data:`pipeline.lake.SCHEMAS`), as Spark types."""
    full: StructType = from_arrow_schema(lake.SCHEMAS[dataset])
    return StructType([full[name] for name in columns])


def read(spark: SparkSession, lake_uri: str, dataset: str, columns: tuple[str, ...]) -> DataFrame:
    """``columns`` of ``dataset`` (see :data:`pipeline.lake.SCHEMAS`); empty when nothing was exported.

    The empty frame is typed nulls over an empty range, built in the JVM: ``createDataFrame([], schema)``
    is an RDD of Python rows, and running it starts Python workers on every executor (two seconds on
    a cluster, for no rows).
    """
    schema = _schema(dataset, columns)
    uri = dataset_uri(lake_uri, dataset)
    if not _exists(spark, uri):
        return spark.range(0, numPartitions=1).select(
            *(F.lit(None).cast(field.dataType).alias(field.name) for field in schema)
        )
    return spark.read.schema(schema).option("basePath", uri).parquet(uri).select(*columns)


def entries(spark: SparkSession, lake_uri: str) -> DataFrame:
    return read(spark, lake_uri, lake.ENTRIES, ENTRY_COLUMNS)


def entry_streams(spark: SparkSession, lake_uri: str, entries: DataFrame) -> DataFrame | None:
    """The streams of ``entries`` (the frame :func:`entries` gave), one row each: conn, stream,
    stream_text; None when it reads no files, or a file outside a ``stream_hex`` directory.

    Read from one file per stream directory, not from every entry: the exporter writes each stream's
    entries under a directory of its own (:mod:`pipeline.lake`), so its first file names it, and
    reading about one file in 28 of a two-week lake costs a fraction of a pass over all. A file that
    holds another stream's entries than its directory's (put there by hand) can leave a stream out:
    the caller counts what a join with these rows keeps and does not trust them when it drops any.
    """
    first: dict[str, str] = {}
    for path in sorted(entries.inputFiles()):
        at = path.find("/stream_hex=")
        end = path.find("/", at + 1) if at >= 0 else -1
        if end < 0:
            return None
        first.setdefault(path[:end], path)
    if not first:
        return None
    columns = ("conn", "stream", "stream_text")
    uri = dataset_uri(lake_uri, lake.ENTRIES)
    return (
        spark.read.schema(_schema(lake.ENTRIES, columns)).option("basePath", uri).parquet(*first.values())
        .select(*columns)  # not the partition directories' columns the read adds
        .distinct()
    )


def metrics(spark: SparkSession, lake_uri: str) -> DataFrame:
    return read(spark, lake_uri, lake.METRICS, METRIC_COLUMNS)


def dead_letters(spark: SparkSession, lake_uri: str) -> DataFrame:
    return read(spark, lake_uri, lake.DLQ, DLQ_COLUMNS)


def group_samples(spark: SparkSession, lake_uri: str) -> DataFrame:
    return read(spark, lake_uri, lake.GROUP_SAMPLES, GROUP_SAMPLE_COLUMNS)
