"""The data pipeline's records: export checkpoints, runs, and the rollups the reports show.

The lake (Parquet, see :mod:`pipeline.lake`) is the pipeline's truth; these tables hold what the console
needs to answer quickly: how far each stream was exported, and the rollups of the last run, upserted by
their natural keys (:mod:`streams_app.lake.rollups`) so loading the same rollups twice changes nothing.

Keys and names are bytes: stored raw, made unique through a SHA-256 hex digest (a unique index on a
blob is not portable, see :mod:`streams_app.metrics.models`) and shown through a display text.
Rollup times are UTC bucket starts.
"""

from __future__ import annotations

from django.db import models

__all__ = [
    "AnomalyRollup",
    "ErrorSignatureRollup",
    "ExportCheckpoint",
    "LagTrendRollup",
    "LatencyRollup",
    "PipelineRun",
    "RetryRollup",
    "ThroughputRollup",
]

_TEXT = 1000


class ExportCheckpoint(models.Model):
    """How far one stream (or one snapshot table and resolution) has been exported to the lake.

    ``last_id`` is the last exported entry ID (for a table, the last exported time in ms). ``pending``
    lists the lake files a chunk is writing *before* they are written: a run that dies between writing
    them and moving ``last_id`` leaves them listed, and the next run deletes them before it exports the
    chunk again, so no entry ends up in two files (see :mod:`streams_app.lake.export`).
    """

    class Kind(models.TextChoices):
        STREAM = "stream", "stream"
        TABLE = "table", "snapshot table"

    connection = models.CharField(max_length=100, blank=True, help_text="Empty for snapshot tables.")
    kind = models.CharField(max_length=8, choices=Kind.choices, default=Kind.STREAM)
    key = models.BinaryField(editable=False, help_text="The stream key's raw bytes (or the table's name).")
    key_hash = models.CharField(max_length=64, editable=False, help_text="SHA-256 hex of the key.")
    key_text = models.CharField(max_length=_TEXT)
    last_id = models.CharField(max_length=41, blank=True, help_text="Empty: nothing exported yet.")
    exported = models.BigIntegerField(default=0, help_text="Entries (rows) exported so far.")
    pending = models.JSONField(default=list, blank=True, help_text="Lake files of a chunk in flight.")
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["connection", "kind", "key_hash"], name="exportcheckpoint_unique")
        ]

    def __str__(self) -> str:
        return f"{self.connection or '-'} {self.key_text} @ {self.last_id or 'start'}"


class PipelineRun(models.Model):
    """One run of export + Spark jobs + load: what the reports page calls "as of"."""

    class State(models.TextChoices):
        RUNNING = "running", "running"
        DONE = "done", "done"
        FAILED = "failed", "failed"

    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    state = models.CharField(max_length=8, choices=State.choices, default=State.RUNNING)
    as_of = models.DateTimeField(help_text="The run's reference time: hours ending after it are not scored.")
    job = models.ForeignKey("streams_app.Job", null=True, blank=True, on_delete=models.SET_NULL)
    stats = models.JSONField(default=dict, blank=True, help_text="Entries exported, rows per rollup, timings.")
    error = models.TextField(blank=True)

    class Meta:
        ordering = ["-started_at"]

    def __str__(self) -> str:
        return f"pipeline run {self.started_at:%Y-%m-%d %H:%M:%S} ({self.state})"

    @property
    def spark_driver(self) -> str:
        """Where the run's Spark jobs ran, in words ("" for a run that does not say)."""
        return {"resident": "the resident driver", "child": "a child process"}.get(self.stats.get("driver", ""), "")


class _StreamRollup(models.Model):
    """Columns every per-stream rollup has: connection, and the stream as bytes, digest and text."""

    connection = models.CharField(max_length=100)
    stream = models.BinaryField(editable=False)
    stream_hash = models.CharField(max_length=64, editable=False)
    stream_text = models.CharField(max_length=_TEXT)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        abstract = True

    @property
    def stream_bytes(self) -> bytes:
        return bytes(self.stream)


class ThroughputRollup(_StreamRollup):
    """Entries (and payload bytes) added to a stream per minute or hour, in total or of one event type.

    ``scope`` says which: ``stream`` rows count every entry (``event_type`` is empty), ``type`` rows one
    event type each (entries without a type count under the empty type).
    """

    class Scope(models.TextChoices):
        STREAM = "stream", "all types"
        TYPE = "type", "one event type"

    class Resolution(models.TextChoices):
        MINUTE = "minute", "minute"
        HOUR = "hour", "hour"

    scope = models.CharField(max_length=8, choices=Scope.choices)
    event_type = models.CharField(max_length=200, blank=True)
    resolution = models.CharField(max_length=8, choices=Resolution.choices)
    bucket = models.DateTimeField()
    entries = models.BigIntegerField()
    bytes = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["connection", "stream_hash", "scope", "event_type", "resolution", "bucket"],
                name="throughputrollup_unique",
            )
        ]
        indexes = [models.Index(fields=["resolution", "scope", "bucket"], name="throughputrollup_res_bucket")]


class LatencyRollup(models.Model):
    """Handler time per stream, group and event type per hour, from ``eventbus:metrics``.

    ``runs`` handler calls (processed and failed), ``failed`` of them failing; percentiles are
    nearest-rank over the runs, each ``processed`` metric entry standing for ``count`` runs of its mean
    time (see :func:`pipeline.transform.latency`).
    """

    connection = models.CharField(max_length=100)
    stream = models.CharField(max_length=_TEXT)
    group = models.CharField(max_length=_TEXT)
    event_type = models.CharField(max_length=200, blank=True)
    hour = models.DateTimeField()
    runs = models.BigIntegerField()
    failed = models.BigIntegerField()
    mean_ms = models.FloatField()
    p50_ms = models.FloatField()
    p95_ms = models.FloatField()
    p99_ms = models.FloatField()
    max_ms = models.FloatField()
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["connection", "stream", "group", "event_type", "hour"], name="latencyrollup_unique"
            )
        ]
        indexes = [models.Index(fields=["hour"], name="latencyrollup_hour")]


class ErrorSignatureRollup(_StreamRollup):
    """Dead letters of a stream (in one DLQ) sharing a normalized error signature.

    ``signature`` is the error with numbers, IDs and quoted values replaced by placeholders
    (:func:`pipeline.signatures.normalize_error`); ``search`` is its longest literal part, which occurs
    in every matching raw error, so the DLQ page's error filter finds the entries. ``rank`` is 1 for the
    stream's most frequent signature.
    """

    dlq = models.BinaryField(editable=False)
    dlq_hash = models.CharField(max_length=64, editable=False)
    dlq_text = models.CharField(max_length=_TEXT)
    signature = models.CharField(max_length=400)
    search = models.CharField(max_length=200, blank=True)
    count = models.BigIntegerField()
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    example_error = models.TextField(blank=True)
    example_entry_id = models.CharField(max_length=41)
    rank = models.IntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["connection", "stream_hash", "dlq_hash", "signature"], name="errorsignaturerollup_unique"
            )
        ]
        indexes = [models.Index(fields=["rank"], name="errorsignaturerollup_rank")]

    @property
    def dlq_bytes(self) -> bytes:
        return bytes(self.dlq)


class RetryRollup(_StreamRollup):
    """How many dead letters of a stream gave up after ``retries`` retries (-1: the entry does not say)."""

    retries = models.IntegerField()
    count = models.BigIntegerField()

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["connection", "stream_hash", "retries"], name="retryrollup_unique")
        ]


class LagTrendRollup(_StreamRollup):
    """A consumer group's lag over one hour, from the metric snapshots (finest resolution available)."""

    group = models.BinaryField(editable=False)
    group_hash = models.CharField(max_length=64, editable=False)
    group_text = models.CharField(max_length=_TEXT)
    hour = models.DateTimeField()
    samples = models.IntegerField()
    mean_lag = models.FloatField(null=True, blank=True)
    max_lag = models.BigIntegerField(null=True, blank=True)
    last_lag = models.BigIntegerField(null=True, blank=True)
    lag_change = models.BigIntegerField(
        null=True, blank=True, help_text="Last known lag of the hour minus its first known lag."
    )
    max_pending = models.BigIntegerField(null=True, blank=True)
    max_idle_ms = models.BigIntegerField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(
                fields=["connection", "stream_hash", "group_hash", "hour"], name="lagtrendrollup_unique"
            )
        ]
        indexes = [models.Index(fields=["hour"], name="lagtrendrollup_hour")]


class AnomalyRollup(_StreamRollup):
    """An hour whose throughput was far from the same hour of day on the preceding days.

    ``z = (entries - baseline_mean) / max(baseline_std, 1)``; flagged when ``|z| >= threshold`` (see
    :func:`pipeline.transform.anomalies`).
    """

    hour = models.DateTimeField()
    entries = models.BigIntegerField()
    baseline_mean = models.FloatField()
    baseline_std = models.FloatField()
    baseline_points = models.IntegerField()
    z = models.FloatField()
    threshold = models.FloatField()
    direction = models.CharField(max_length=8, help_text="'spike' or 'drop'.")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["connection", "stream_hash", "hour"], name="anomalyrollup_unique")
        ]
        indexes = [models.Index(fields=["hour"], name="anomalyrollup_hour")]
