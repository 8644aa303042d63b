"""Failure analytics: dead letters grouped by a normalized error signature, and a retries histogram.

The signature rules are stated in plain Python in :mod:`pipeline.signatures`
(:func:`~pipeline.signatures.normalize_error`); :func:`signature_column` applies the very same regular
expressions in Spark (Java regex), so the rollup runs without a Python UDF and the Python function can
be the readable specification the tests check both against.
"""

from __future__ import annotations

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

from pipeline.signatures import CLASS_PATTERN, NO_ERROR, SIGNATURE_MAX, STEPS


def signature_column(error: Column) -> Column:
    """:func:`pipeline.signatures.normalize_error` as a Spark expression over the column ``error``."""
    head = F.regexp_extract(error, CLASS_PATTERN, 0)
    message = F.when(head != "", error.substr(F.length(head) + 2, F.lit(1 << 30))).otherwise(error)
    for pattern, replacement in STEPS:
        message = F.regexp_replace(message, pattern, replacement)
    message = F.trim(message)
    signature = (
        F.when(head != "", F.when(message != "", F.concat(head, F.lit(": "), message)).otherwise(head))
        .otherwise(F.when(message != "", message).otherwise(F.lit(NO_ERROR)))
    )
    blank = error.isNull() | (F.regexp_replace(error, r"[ \t\r\n\f\x0b]", "") == "")
    return F.when(blank, F.lit(NO_ERROR)).otherwise(F.substring(signature, 1, SIGNATURE_MAX))


def error_signatures(dead: DataFrame) -> DataFrame:
    """Dead letters per stream, DLQ and signature: count, first and last seen, an example, a rank.

    The stream is where the entry came from (the DLQ key when no convention says); the time is when it
    failed (the DLQ entry ID's time when unknown). ``rank`` orders a stream's signatures by count
    (ties by signature), so "top signatures per stream" is ``rank <= n``. The example is the latest
    entry's raw error and DLQ entry ID.
    """
    when = F.coalesce(F.col("failed_at"), F.col("ts"))
    rows = dead.select(
        "conn",
        F.coalesce(F.col("stream"), F.col("dlq")).alias("stream"),
        F.coalesce(F.col("stream_text"), F.col("dlq_text")).alias("stream_text"),
        "dlq",
        "dlq_text",
        signature_column(F.col("error")).alias("signature"),
        F.coalesce(F.col("error"), F.lit("")).alias("error"),
        "entry_id",
        when.alias("when"),
        F.struct(when.alias("t"), F.col("ms"), F.col("entry_id")).alias("order"),
    )
    grouped = rows.groupBy("conn", "stream", "stream_text", "dlq", "dlq_text", "signature").agg(
        F.count(F.lit(1)).alias("count"),
        F.min("when").alias("first_seen"),
        F.max("when").alias("last_seen"),
        F.max_by("error", "order").alias("example_error"),
        F.max_by("entry_id", "order").alias("example_entry_id"),
    )
    ranking = Window.partitionBy("conn", "stream").orderBy(F.col("count").desc(), F.col("signature"))
    return grouped.withColumn("rank", F.row_number().over(ranking))


def retries_histogram(dead: DataFrame) -> DataFrame:
    """Dead letters per stream by how many retries they had (-1: the entry does not say)."""
    return (
        dead.select(
            "conn",
            F.coalesce(F.col("stream"), F.col("dlq")).alias("stream"),
            F.coalesce(F.col("stream_text"), F.col("dlq_text")).alias("stream_text"),
            F.coalesce(F.col("retries"), F.lit(-1)).cast("int").alias("retries"),
        )
        .groupBy("conn", "stream", "stream_text", "retries")
        .agg(F.count(F.lit(1)).alias("count"))
    )
