"""Transform: throughput, handler latency, lag trend and anomaly rollups, as pure DataFrame functions.

Every function takes the DataFrames :mod:`pipeline.extract` returns and gives back a rollup; nothing
here reads or writes storage, so the tests feed them the lake the exporter wrote and compare with a
plain-Python computation over the same entries. All times are UTC (the session's time zone).
"""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

from pyspark.sql import Column, DataFrame, Window
from pyspark.sql import functions as F

MINUTE = "minute"
HOUR = "hour"
SCOPE_STREAM = "stream"
SCOPE_TYPE = "type"
PERCENTILES = (50, 95, 99)

ANOMALY_THRESHOLD = 3.0
BASELINE_DAYS = 14
MIN_BASELINE_POINTS = 3
SCORE_DAYS = 28

_STREAM = ["conn", "stream", "stream_text"]
_MINUTE_MS = 60_000


# ------------------------------------------------------------------------------------------ throughput


def throughput_minutes(entries: DataFrame) -> DataFrame:
    """Entries and payload bytes per stream, event type and minute: the one pass over every entry.

    Entries without an event type count under the empty type. The minute is a number, the entry ID's
    milliseconds divided by 60,000 (UTC minutes since the epoch), not a truncated timestamp: an integer
    division instead of a time-zone-aware truncation per entry, and a long as the grouping key;
    :func:`minute_rows` turns it into a timestamp once per output row. Every grouping key is a column,
    never an aggregate like ``first(stream_text)``: a string in the aggregation buffer turns Spark's
    hash aggregation into a sort-based one, twice the CPU.
    """
    return (
        entries.select(
            *_STREAM,
            F.coalesce(F.col("event_type"), F.lit("")).alias("event_type"),
            F.expr(f"ms div {_MINUTE_MS}").alias("minute"),
            "payload_size",
        )
        .groupBy(*_STREAM, "event_type", "minute")
        .agg(F.count(F.lit(1)).alias("entries"), F.sum("payload_size").alias("bytes"))
    )


def stream_id(conn: Column, stream: Column) -> Column:
    """A stream's 64-bit grouping key: ``xxhash64`` of its connection and its key's bytes.

    Two streams may share one (a hash): :func:`stream_names` marks such an id ``shared``, and
    :func:`pipeline.main` then groups on the streams' columns themselves.
    """
    return F.xxhash64(conn, stream)


def minutes_by_id(entries: DataFrame) -> DataFrame:
    """:func:`throughput_minutes` grouped on :func:`stream_id` instead of the stream's three columns:
    sid, event_type, minute, entries, bytes.

    The hash aggregation compares every entry's grouping key with the one it finds in its map; a long
    in place of the connection, the binary key and its text (a key of some 100 bytes) made the pass
    over 10M entries a fifth cheaper, and lets Spark's fast first-level map take the groups (it takes
    no binary keys). Measured in docs/performance.md#figures-behind-the-design.
    """
    return (
        entries.select(
            stream_id(F.col("conn"), F.col("stream")).alias("sid"),
            F.coalesce(F.col("event_type"), F.lit("")).alias("event_type"),
            F.expr(f"ms div {_MINUTE_MS}").alias("minute"),
            "payload_size",
        )
        .groupBy("sid", "event_type", "minute")
        .agg(F.count(F.lit(1)).alias("entries"), F.sum("payload_size").alias("bytes"))
    )


def stream_names(streams: DataFrame) -> DataFrame:
    """One row per :func:`stream_id` of ``streams`` (conn, stream, stream_text; repeats allowed): sid,
    conn, stream, stream_text, and ``shared``, true when more than one stream (or one stream under
    two texts) has that id. The named stream of a shared id is the least of them."""
    name = F.struct(*_STREAM)
    return (
        streams.select(stream_id(F.col("conn"), F.col("stream")).alias("sid"), name.alias("name"))
        .groupBy("sid")
        .agg(F.min("name").alias("first"), F.max("name").alias("last"))
        .select("sid", *(F.col(f"first.{c}").alias(c) for c in _STREAM), (F.col("first") != F.col("last")).alias("shared"))
    )


def with_stream_names(frame: DataFrame, names: DataFrame) -> DataFrame:
    """``frame`` (a ``sid`` column and others) with the stream's conn, stream, stream_text and
    ``shared`` from ``names`` (:func:`stream_names`) in place of its ``sid``.

    ``names`` has a row per stream, so it is broadcast: a hash lookup per row of ``frame``, no
    shuffle. An inner join: a row whose stream ``names`` lacks is dropped, which the caller detects
    by counting both sides.
    """
    rest = [name for name in frame.columns if name != "sid"]
    return frame.join(F.broadcast(names), "sid").select(*_STREAM, *rest, "shared")


def _shaped(frame: DataFrame, scope: str, resolution: str) -> DataFrame:
    """``frame`` (stream columns, event_type unless ``scope`` is the stream's, bucket, entries, bytes) as
    throughput rows: conn, stream, stream_text, scope, event_type, resolution, bucket, entries, bytes."""
    event_type = F.col("event_type") if scope == SCOPE_TYPE else F.lit("").alias("event_type")
    return frame.select(*_STREAM, F.lit(scope).alias("scope"), event_type, F.lit(resolution).alias("resolution"),
                        "bucket", "entries", "bytes")


def minute_rows(minutes: DataFrame) -> DataFrame:
    """The per-minute, per-event-type rows of the throughput rollup (``scope='type'``,
    ``resolution='minute'``), from :func:`throughput_minutes`: most of the rollup's rows."""
    return _shaped(minutes.withColumn("bucket", F.timestamp_seconds(F.col("minute") * 60)), SCOPE_TYPE, MINUTE)


def throughput_totals(rows: DataFrame) -> DataFrame:
    """The rest of the throughput rollup from its :func:`minute_rows`: per-minute totals of every type
    (``scope='stream'``, ``event_type=''``), and per-hour rows per type and in total.

    The throughput job writes the minute rows first and computes these from the rows it wrote
    (:func:`pipeline.load.write_then_derive`). Computed from the entries' aggregation instead, as one
    union, Spark shares the shuffle of the partial counts but runs the final merge of the per-minute
    counts (millions of rows with binary keys) once per part: measured at 10M entries on 2 cores, that
    union cost over half of the job's time, reading the written minutes back a fraction of it
    (docs/performance.md#figures-behind-the-design). Grouping sets over the entries were measured too
    (``Expand`` copies every entry once per set, a seventh more CPU).

    The three parts are one aggregation with three grouping sets over the minute rows: one scan of
    them, one shuffle, one plan. As a union of three aggregations (the hours per type, then their
    totals, and the minute totals) Spark scanned the minute rows once per aggregation it could not
    share, decoding their binary keys each time.
    """
    return totals_rows(_total_sets(rows, _STREAM))


def totals_by_id(rows: DataFrame) -> DataFrame:
    """:func:`throughput_totals` before its rows are shaped, grouped on :func:`stream_id` (a ``sid``
    column) instead of the stream's three columns: a quarter less CPU over the 2M minute rows of 10M
    entries, where ``Expand`` hands the aggregation every row three times. Name the streams with
    :func:`with_stream_names`, then shape the rows with :func:`totals_rows`."""
    return _total_sets(rows.withColumn("sid", stream_id(F.col("conn"), F.col("stream"))), ["sid"])


def _total_sets(rows: DataFrame, keys: list[str]) -> DataFrame:
    # the hour by integer arithmetic on the seconds: no session time zone can move it
    hour = F.expr("timestamp_seconds(unix_seconds(bucket) div 3600 * 3600)").alias("hour")
    return (
        rows.select(*keys, "event_type", "bucket", hour, "entries", "bytes")
        .groupingSets(
            [[*keys, "bucket"], [*keys, "event_type", "hour"], [*keys, "hour"]],
            *keys, "event_type", "bucket", "hour",
        )
        .agg(
            F.sum("entries").alias("entries"),
            F.sum("bytes").alias("bytes"),
            # 1 where the set leaves the column out: every type (scope 'stream'), or the hour's rows
            F.grouping("event_type").alias("every_type"),
            F.grouping("bucket").alias("hourly"),
        )
    )


def totals_rows(sets: DataFrame) -> DataFrame:
    """The grouping sets of :func:`throughput_totals` (with the stream's three columns) as throughput rows."""
    every_type = F.col("every_type") == 1
    hourly = F.col("hourly") == 1
    return sets.select(
        *_STREAM,
        F.when(every_type, F.lit(SCOPE_STREAM)).otherwise(F.lit(SCOPE_TYPE)).alias("scope"),
        F.when(every_type, F.lit("")).otherwise(F.col("event_type")).alias("event_type"),
        F.when(hourly, F.lit(HOUR)).otherwise(F.lit(MINUTE)).alias("resolution"),
        F.when(hourly, F.col("hour")).otherwise(F.col("bucket")).alias("bucket"),
        "entries",
        "bytes",
    )


def throughput(minutes: DataFrame) -> DataFrame:
    """Per-minute and per-hour counts, per event type (``scope='type'``) and in total (``scope='stream'``,
    ``event_type=''``), from :func:`throughput_minutes`, as one DataFrame. Columns: conn, stream,
    stream_text, scope, event_type, resolution, bucket, entries, bytes."""
    rows = minute_rows(minutes)
    return rows.unionByName(throughput_totals(rows))


# -------------------------------------------------------------------------------------------- latency


def _nearest_rank(p: int) -> Column:
    """The p-th percentile, nearest-rank: the smallest value whose cumulative count reaches ceil(p*N/100).

    The rank is integer arithmetic, ``(N * p + 99) div 100``, so no floating-point rounding moves it.
    """
    rank = F.expr(f"(n_total * {p} + 99) div 100")
    return F.min(F.when(F.col("cum") >= rank, F.col("value"))).alias(f"p{p}_ms")


def latency(metrics: DataFrame) -> DataFrame:
    """Handler time per stream, consumer group, event type and hour, from ``eventbus:metrics``.

    A handler *run* is a ``processed`` or ``failed`` metric; the bus aggregates ``processed`` per
    interval, so one such entry stands for ``count`` runs each taking its mean, ``duration_ms / count``
    (the only per-run figure the bus keeps). Over those runs: ``runs`` (N), ``failed``, ``mean_ms``
    (total time / N), ``max_ms`` (largest ``max_ms``) and p50/p95/p99 by nearest rank
    (:func:`_nearest_rank`). The hour is that of the metric entry's ID (when Redis stored it).
    """
    key = ["conn", "stream", "group", "event_type", "hour"]
    runs = metrics.filter(
        F.col("event").isin("processed", "failed") & (F.col("count") > 0) & F.col("duration_ms").isNotNull()
    ).select(
        "conn",
        F.coalesce(F.col("stream"), F.lit("")).alias("stream"),
        F.coalesce(F.col("group"), F.lit("")).alias("group"),
        F.coalesce(F.col("type"), F.lit("")).alias("event_type"),
        F.date_trunc("hour", F.col("ts")).alias("hour"),
        F.col("count").alias("n"),
        (F.col("duration_ms") / F.col("count")).alias("value"),
        "duration_ms",
        F.when(F.col("event") == "failed", F.col("count")).otherwise(F.lit(0)).alias("failed"),
        F.coalesce(F.col("max_ms"), F.col("duration_ms") / F.col("count")).alias("max_ms"),
    )
    # Both sums over one window spec (the same partitioning and order, two frames): Spark computes them
    # in one Window operator, one pass over each sorted partition; the total over a spec without the
    # order was a second operator buffering every partition again.
    # The hour first: the window sorts its rows by the partition columns, then the value, and compares
    # rows by an 8-byte prefix of the first column before the rest. The connection (one value on most
    # buses) first made every comparison go on to the strings; the hour settles most of them at the
    # prefix (a fifth of the job's CPU at 411k metrics). The partition is the same set of columns.
    by_value = Window.partitionBy("hour", "stream", "group", "event_type", "conn").orderBy("value")
    ranked = runs.withColumn(
        "cum", F.sum("n").over(by_value.rowsBetween(Window.unboundedPreceding, Window.currentRow))
    ).withColumn("n_total", F.sum("n").over(by_value.rowsBetween(Window.unboundedPreceding, Window.unboundedFollowing)))
    return ranked.groupBy(*key).agg(
        F.first("n_total").alias("runs"),
        F.sum("failed").alias("failed"),
        (F.sum("duration_ms") / F.first("n_total")).alias("mean_ms"),
        *(_nearest_rank(p) for p in PERCENTILES),
        F.max("max_ms").alias("max_ms"),
    )


# ------------------------------------------------------------------------------------------ lag trend


def lag_trend(samples: DataFrame) -> DataFrame:
    """A consumer group's lag per hour, from the snapshot samples.

    The snapshots keep raw samples for a while and 1-minute and 1-hour rollups for longer, so an hour
    may be covered by several resolutions: each hour uses only its finest one (raw, then 1m, then 1h),
    never a mix that would count the same moment twice. Per hour: ``samples``, ``mean_lag``,
    ``max_lag``, ``last_lag`` and ``lag_change`` (last known lag minus first known lag, over samples that
    know it: Redis reports no lag after some SETIDs), ``max_pending`` and ``max_idle_ms`` (the largest of the
    samples' longest pending idle time: how long the longest-waiting entry had waited).
    """
    key = ["conn", "stream", "stream_text", "group", "group_text", "hour"]
    fineness = F.when(F.col("resolution") == "raw", 0).when(F.col("resolution") == "1m", 1).otherwise(2)
    hourly = samples.withColumn("hour", F.date_trunc("hour", F.col("at"))).withColumn("fineness", fineness)
    finest = hourly.withColumn("best", F.min("fineness").over(Window.partitionBy(*key))).filter(
        F.col("fineness") == F.col("best")
    )
    known_at = F.when(F.col("lag").isNotNull(), F.col("at"))
    first_lag = F.min_by("lag", known_at)
    last_lag = F.max_by("lag", known_at)
    return finest.groupBy(*key).agg(
        F.count(F.lit(1)).cast("int").alias("samples"),
        F.avg("lag").alias("mean_lag"),
        F.max("lag").alias("max_lag"),
        last_lag.alias("last_lag"),
        (last_lag - first_lag).alias("lag_change"),
        F.max("pending").alias("max_pending"),
        F.max("oldest_pending_idle_ms").alias("max_idle_ms"),
    )


# ------------------------------------------------------------------------------------------- anomalies


def anomalies(
    hourly: DataFrame,
    *,
    as_of: datetime,
    threshold: float = ANOMALY_THRESHOLD,
    baseline_days: int = BASELINE_DAYS,
    min_points: int = MIN_BASELINE_POINTS,
    score_days: int = SCORE_DAYS,
) -> DataFrame:
    """Hours whose throughput was far from the same hour of day on the preceding days.

    ``hourly`` holds per-stream hourly counts (conn, stream, stream_text, bucket, entries): the
    ``scope='stream'``, ``resolution='hour'`` rows of :func:`throughput`. The hours scored are those of
    the ``score_days`` days up to the last hour that ended by ``as_of``, hours without entries counting 0
    (a stream that stops is an anomaly too) from a stream's first entry on; so the work is bounded by
    the window, not by the age of the lake. The baseline of an hour is the same hour of day on the
    ``baseline_days`` days before it; with ``mean`` and sample standard deviation ``s`` of those
    counts::

        z = (entries - mean) / max(s, 1)

    (the floor of one entry keeps a flat baseline from turning a difference of one entry into an
    infinite score). An hour is flagged when its baseline has at least ``min_points`` days and
    ``|z| >= threshold``: a ``spike`` above, a ``drop`` below.
    """
    as_of = as_of.astimezone(UTC) if as_of.tzinfo else as_of.replace(tzinfo=UTC)
    # the start of the last hour that has ended: bucket + 1 h <= as_of
    last = (as_of - timedelta(hours=1)).replace(minute=0, second=0, microsecond=0)
    scored_from = last - timedelta(days=score_days) + timedelta(hours=1)
    grid_from = scored_from - timedelta(days=baseline_days)
    last_start = F.lit(last)
    counts = hourly.select(*_STREAM, "bucket", "entries").filter(
        (F.col("bucket") <= last_start) & (F.col("bucket") >= F.lit(grid_from))
    )
    spans = counts.groupBy(*_STREAM).agg(F.min("bucket").alias("first"))
    grid = spans.select(
        *_STREAM, F.explode(F.sequence(F.col("first"), last_start, F.expr("interval 1 hour"))).alias("bucket")
    )
    dense = grid.join(counts, on=[*_STREAM, "bucket"], how="left").withColumn(
        "entries", F.coalesce(F.col("entries"), F.lit(0)).cast("long")
    )
    seconds = F.col("bucket").cast("long")
    baseline = (
        Window.partitionBy("conn", "stream", F.hour("bucket"))
        .orderBy(seconds)
        .rangeBetween(-baseline_days * 86400, -1)
    )
    scored = (
        dense.withColumn("baseline_mean", F.avg("entries").over(baseline))
        .withColumn("baseline_std", F.coalesce(F.stddev_samp("entries").over(baseline), F.lit(0.0)))
        .withColumn("baseline_points", F.count("entries").over(baseline).cast("int"))
        .withColumn("z", (F.col("entries") - F.col("baseline_mean")) / F.greatest(F.col("baseline_std"), F.lit(1.0)))
    )
    flagged = scored.filter(
        (F.col("bucket") >= F.lit(scored_from))
        & (F.col("baseline_points") >= min_points)
        & (F.abs(F.col("z")) >= threshold)
    )
    return flagged.select(
        *_STREAM,
        F.col("bucket").alias("hour"),
        "entries",
        "baseline_mean",
        "baseline_std",
        "baseline_points",
        "z",
        F.lit(float(threshold)).alias("threshold"),
        F.when(F.col("z") > 0, "spike").otherwise("drop").alias("direction"),
    )
