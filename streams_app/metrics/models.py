"""The metadata mirror and the metric snapshots.

Redis answers "what is there now"; these tables answer "since when" and "how fast":

- the *mirror* (:class:`StreamMirror`, :class:`GroupMirror`, :class:`ConsumerMirror`) holds the last known
  facts of every stream, group and consumer of every connection, kept by a beat task
  (:func:`streams_app.metrics.mirror.mirror_sync`). Rows of vanished things are marked ``deleted_at`` rather than
  forgotten, so their history stays reachable and a key that comes back keeps its row. The streams page
  filters, sorts and pages over it on servers with more streams than a SCAN page can sort.
- the *samples* (:class:`StreamSample`, :class:`GroupSample`, :class:`DlqSample`) are the time series
  behind charts, alerts and ``/metrics``: one ``raw`` row per object per snapshot tick, rolled up into
  ``1m`` and ``1h`` rows and pruned by retention (:func:`streams_app.metrics.rollups.samples_downsample`, :func:`streams_app.metrics.pruning.samples_prune`).
- :class:`SnapshotRun` records each tick's run: the unique ``tick`` is what makes the snapshot idempotent.

Keys and names are arbitrary bytes: they are stored raw (``BinaryField``), found by a SHA-256 hex digest
(a unique index on a blob is not portable) and shown/searched through a display text (non-UTF-8 bytes as
``\\xNN``, cut to :data:`TEXT_MAX` characters so the text index stays within every backend's limits).
"""

from __future__ import annotations

import hashlib
from typing import Any

from django.db import models

__all__ = [
    "ConsumerMirror",
    "DlqSample",
    "GroupMirror",
    "GroupSample",
    "MirrorState",
    "Resolution",
    "SnapshotRun",
    "SnapshotSkip",
    "StreamMirror",
    "StreamSample",
    "RollupMark",
    "name_hash",
]

#: Display texts (keys, group and consumer names) are cut to this many characters.
TEXT_MAX = 1000
#: "18446744073709551615-18446744073709551615", the longest stream ID.
ID_MAX = 41


def name_hash(raw: bytes) -> str:
    """The digest a key or name is looked up by (``key_hash``, ``name_hash``)."""
    return hashlib.sha256(bytes(raw)).hexdigest()


class Resolution(models.TextChoices):
    RAW = "raw", "raw (one per snapshot tick)"
    MINUTE = "1m", "1-minute rollup"
    HOUR = "1h", "1-hour rollup"


class StreamMirror(models.Model):
    """A stream of a connection, as the last mirror sync saw it."""

    connection = models.CharField(max_length=100)
    key = models.BinaryField(editable=False, help_text="The stream key's raw bytes.")
    key_hash = models.CharField(max_length=64, editable=False, help_text="SHA-256 hex of the key.")
    key_text = models.CharField(max_length=TEXT_MAX, db_index=True, help_text="The key as text, for search.")
    length = models.BigIntegerField(default=0)
    first_id = models.CharField(max_length=ID_MAX, null=True, blank=True)
    last_id = models.CharField(max_length=ID_MAX, null=True, blank=True)
    last_entry_ms = models.BigIntegerField(
        null=True, blank=True, help_text="Time part of last_id (sorting by last entry; None when empty)."
    )
    last_generated_id = models.CharField(max_length=ID_MAX, null=True, blank=True)
    entries_added = models.BigIntegerField(null=True, blank=True, help_text="Redis 7+ only.")
    groups_count = models.IntegerField(default=0)
    pending = models.BigIntegerField(default=0, help_text="Pending entries summed over the groups.")
    lag = models.BigIntegerField(
        null=True, blank=True,
        help_text="The largest lag Redis reports among the groups (redis_ops.types.groups_lag): a lower bound of "
        "the stream's lag when lag_unknown_groups > 0. None when no group reports one (none, or all unknown).",
    )
    lag_unknown_groups = models.IntegerField(
        default=0, db_default=0,
        help_text="Groups whose lag Redis cannot tell (docs/architecture.md#lag-redis-cannot-tell): lag is then a lower bound.",
    )
    is_dlq = models.BooleanField(default=False)
    dlq_convention = models.CharField(max_length=64, blank=True)
    dlq_sources = models.JSONField(default=list, blank=True, help_text="Source streams, as text.")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    deleted_at = models.DateTimeField(null=True, blank=True, help_text="Set when the stream vanished.")
    synced_at = models.DateTimeField()
    sync_fingerprint = models.CharField(
        max_length=32, blank=True, default="", db_default="",
        help_text="Digest of the facts the last mirror sync wrote (streams_app.metrics.mirror.stream_fingerprint): "
        "an incremental sync rewrites a stream only when it differs.",
    )

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["connection", "key_hash"], name="streammirror_conn_key_unique"),
        ]
        indexes = [models.Index(fields=["connection", "-length"], name="streammirror_conn_length")]
        verbose_name = "stream (mirror)"
        verbose_name_plural = "streams (mirror)"

    def __str__(self) -> str:
        return f"{self.connection}: {self.key_text}"

    @property
    def key_bytes(self) -> bytes:
        return bytes(self.key)  # PostgreSQL hands back a memoryview


class GroupMirror(models.Model):
    """A consumer group of a mirrored stream."""

    # No index of its own: the unique (stream, name_hash) constraint leads with it.
    stream = models.ForeignKey(StreamMirror, on_delete=models.CASCADE, related_name="groups", db_index=False)
    name = models.BinaryField(editable=False)
    name_hash = models.CharField(max_length=64, editable=False)
    name_text = models.CharField(max_length=TEXT_MAX)
    consumers = models.IntegerField(default=0)
    pending = models.BigIntegerField(default=0)
    last_delivered_id = models.CharField(max_length=ID_MAX, blank=True)
    entries_read = models.BigIntegerField(null=True, blank=True)
    lag = models.BigIntegerField(null=True, blank=True, help_text="None when Redis cannot tell (docs/architecture.md#lag-redis-cannot-tell).")
    # Despite the names (kept: they are columns and a series name), the entry pending the longest since its
    # last delivery and that idle time: the maximum over the group's PEL (redis_ops.pending_idle), a lower
    # bound when the bounded search stopped early. Not the lowest pending ID, which a claim makes fresh.
    oldest_pending_id = models.CharField(max_length=ID_MAX, null=True, blank=True)
    oldest_pending_idle_ms = models.BigIntegerField(null=True, blank=True)
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["stream", "name_hash"], name="groupmirror_stream_name_unique")]
        verbose_name = "consumer group (mirror)"
        verbose_name_plural = "consumer groups (mirror)"

    def __str__(self) -> str:
        return self.name_text

    @property
    def name_bytes(self) -> bytes:
        return bytes(self.name)


class ConsumerMirror(models.Model):
    """A consumer of a mirrored group."""

    group = models.ForeignKey(GroupMirror, on_delete=models.CASCADE, related_name="consumer_rows", db_index=False)
    name = models.BinaryField(editable=False)
    name_hash = models.CharField(max_length=64, editable=False)
    name_text = models.CharField(max_length=TEXT_MAX)
    pending = models.BigIntegerField(default=0)
    idle_ms = models.BigIntegerField(default=0)
    inactive_ms = models.BigIntegerField(null=True, blank=True, help_text="Redis 7.2+ only.")
    first_seen = models.DateTimeField()
    last_seen = models.DateTimeField()
    deleted_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["group", "name_hash"], name="consumermirror_group_name_unique")
        ]
        verbose_name = "consumer (mirror)"
        verbose_name_plural = "consumers (mirror)"

    def __str__(self) -> str:
        return self.name_text

    @property
    def name_bytes(self) -> bytes:
        return bytes(self.name)


#: The samples' foreign keys to the mirror are not database constraints. A tick inserts one sample per
#: stream and group (300k rows at 100k streams) by one ``INSERT ... SELECT`` that takes every id from a
#: join to the mirror in the same transaction, so a sample cannot point at a row that is not there; a
#: constraint would check it again, row by row, at commit (a fifth of the tick's database time on
#: PostgreSQL). Nor does deleting a mirror row cascade through the ORM: the tables are keyed time first
#: (:func:`_sample_meta`), so finding an object's rows without a time bound reads the whole table. The one
#: path that deletes mirror rows, retention's forgetting of streams gone for a year
#: (:func:`streams_app.metrics.pruning.samples_prune`), deletes their samples first, by time.
SAMPLE_FK: dict[str, Any] = {"on_delete": models.DO_NOTHING, "db_index": False, "db_constraint": False}


def _sample_meta(model: str, fk: str) -> tuple[list, list]:
    """The unique (resolution, at, fk) constraint, keyed time first, and no other index.

    A tick's rows share ``at``, so they go side by side at the index's right edge and a tick writes about
    as many pages as its rows fill, whatever history the table holds (keyed object first, a tick wrote a
    page per object: docs/performance.md#snapshot-ticks-on-tables-with-history). The key serves the
    samples of tick T, retention (a range of ``at``) and the previous tick's join of a snapshot; reads of
    one object over a window go through the window's ticks (:mod:`streams_app.metrics.ticks`)."""
    return [models.UniqueConstraint(fields=["resolution", "at", fk], name=f"{model}_res_at_{fk}_unique")], []


#: The columns that let rollups of rollups average exactly (streams_app.metrics.rollups): a rollup row's
#: mean is its sum over its count, and an hour's sum and count are the sums of its minutes'.
#: ``samples`` is None on raw rows (one sample each): a column without a default is added to the big sample
#: tables without rewriting them (SQLite rewrites a table to add a NOT NULL column).
SAMPLES_HELP = "Rollups only: the raw samples the row stands for (None on a raw row, which is one)."
SUM_HELP = "Rollups only: the sum of the raw values the mean was taken of (None on raw rows)."
COUNT_HELP = "Rollups only: how many raw values were not None (the mean's divisor)."


class StreamSample(models.Model):
    """Length and throughput of a stream at ``at``.

    ``added`` counts entries added since the previous tick (from Redis's ``entries-added`` counter) and
    ``rate_per_s`` divides it by the seconds between the ticks; both are None on a stream's first sample
    or after a gap in the snapshots. Rollups hold the average length and rate and the sum of ``added``.
    """

    stream = models.ForeignKey(StreamMirror, related_name="samples", **SAMPLE_FK)
    at = models.DateTimeField()
    resolution = models.CharField(max_length=3, choices=Resolution.choices, default=Resolution.RAW)
    length = models.BigIntegerField()
    added = models.BigIntegerField(null=True, blank=True)
    rate_per_s = models.FloatField(null=True, blank=True)
    entries_added = models.BigIntegerField(
        null=True, blank=True, help_text="Redis's counter at this tick (raw rows only): the next tick's base."
    )
    samples = models.IntegerField(null=True, blank=True, help_text=SAMPLES_HELP)
    length_sum = models.BigIntegerField(null=True, blank=True, help_text=SUM_HELP)
    rate_sum = models.FloatField(null=True, blank=True, help_text=SUM_HELP)
    rate_samples = models.IntegerField(null=True, blank=True, help_text=COUNT_HELP)

    class Meta:
        constraints, indexes = _sample_meta("streamsample", "stream")

    def __str__(self) -> str:
        return f"{self.stream_id} {self.resolution} {self.at:%Y-%m-%d %H:%M:%S}"


class GroupSample(models.Model):
    """Lag, pending count and the longest pending idle time of a group at ``at``.

    ``oldest_pending_idle_ms`` is the longest idle time among the group's pending entries (the maximum
    over the PEL, see :mod:`streams_app.redis_ops.pending_idle`; the column keeps its first name). Rollups
    hold averages of lag and pending and the maximum of the idle time (the worst moment counts).
    """

    group = models.ForeignKey(GroupMirror, related_name="samples", **SAMPLE_FK)
    at = models.DateTimeField()
    resolution = models.CharField(max_length=3, choices=Resolution.choices, default=Resolution.RAW)
    lag = models.BigIntegerField(null=True, blank=True)
    pending = models.BigIntegerField()
    oldest_pending_idle_ms = models.BigIntegerField(null=True, blank=True)
    samples = models.IntegerField(null=True, blank=True, help_text=SAMPLES_HELP)
    lag_sum = models.BigIntegerField(null=True, blank=True, help_text=SUM_HELP)
    lag_samples = models.IntegerField(null=True, blank=True, help_text=COUNT_HELP)
    pending_sum = models.BigIntegerField(null=True, blank=True, help_text=SUM_HELP)

    class Meta:
        constraints, indexes = _sample_meta("groupsample", "group")

    def __str__(self) -> str:
        return f"{self.group_id} {self.resolution} {self.at:%Y-%m-%d %H:%M:%S}"


class DlqSample(models.Model):
    """Depth (length) of a dead-letter queue at ``at``; rollups hold the average."""

    stream = models.ForeignKey(StreamMirror, related_name="dlq_samples", **SAMPLE_FK)
    at = models.DateTimeField()
    resolution = models.CharField(max_length=3, choices=Resolution.choices, default=Resolution.RAW)
    depth = models.BigIntegerField()
    samples = models.IntegerField(null=True, blank=True, help_text=SAMPLES_HELP)
    depth_sum = models.BigIntegerField(null=True, blank=True, help_text=SUM_HELP)

    class Meta:
        constraints, indexes = _sample_meta("dlqsample", "stream")

    def __str__(self) -> str:
        return f"{self.stream_id} {self.resolution} {self.at:%Y-%m-%d %H:%M:%S}"


class SnapshotRun(models.Model):
    """One snapshot tick: when it ran, how long it took, what it covered, which connections failed.

    ``tick`` is the interval-aligned time the samples are stamped with; its uniqueness is what lets two
    overlapping runs for the same tick write one snapshot.
    """

    tick = models.DateTimeField(unique=True)
    started_at = models.DateTimeField()
    finished_at = models.DateTimeField(null=True, blank=True)
    duration_ms = models.IntegerField(default=0, help_text="The whole run: Redis reads and database writes.")
    redis_ms = models.IntegerField(default=0, help_text="The Redis reads alone.")
    streams = models.IntegerField(default=0)
    groups = models.IntegerField(default=0)
    errors = models.JSONField(default=list, blank=True, help_text='[{"conn": name, "error": text}]')
    families = models.JSONField(  # nullable: added in place, without rebuilding the table on SQLite
        null=True, blank=True,
        help_text='Per connection snapshotted by family: {"conn": {"mode", "pass_keys", "keys_total", "members", ...}}.',
    )

    class Meta:
        ordering = ["-tick"]

    def __str__(self) -> str:
        return f"snapshot {self.tick:%Y-%m-%d %H:%M:%S} ({self.streams} streams, {len(self.errors)} errors)"


class SnapshotSkip(models.Model):
    """Ticks for which no snapshot was recorded, found by the next run that was (a gap between two ticks).

    One row per gap: ``tick`` is the first tick missed and ``ticks`` how many in a row. A tick is missed
    when the run before it still held the lock (it took longer than the interval), when no worker took
    the beat's message within the interval, or when no worker or beat was running at all.
    """

    tick = models.DateTimeField(unique=True)
    ticks = models.IntegerField()
    interval_s = models.IntegerField()
    found_at = models.DateTimeField(help_text="When the next recorded run noticed the gap.")

    class Meta:
        ordering = ["-tick"]

    def __str__(self) -> str:
        return f"{self.ticks} ticks missed from {self.tick:%Y-%m-%d %H:%M:%S}"


class MirrorState(models.Model):
    """The last mirror sync of a connection, and the last full one (the incremental passes compare against)."""

    connection = models.CharField(max_length=100, unique=True)
    synced_at = models.DateTimeField()
    full_synced_at = models.DateTimeField(null=True, blank=True)
    full = models.BooleanField(default=False, help_text="Whether the last sync was a full pass.")
    duration_ms = models.IntegerField(default=0)
    redis_ms = models.IntegerField(default=0)
    streams = models.IntegerField(default=0, help_text="Streams in Redis at the last sync.")
    streams_written = models.IntegerField(default=0, help_text="Streams the last sync found changed and rewrote.")
    partial = models.TextField(blank=True, help_text="Primaries the last sync could not read (their streams kept).")
    pass_cursor = models.BigIntegerField(
        null=True, blank=True,
        help_text="Where the full pass in progress, done in parts across ticks, resumes its SCAN (None: none in progress).",
    )
    pass_started_at = models.DateTimeField(
        null=True, blank=True, help_text="When the full pass in progress started: rows not seen since are vanished."
    )
    pass_streams = models.IntegerField(default=0, help_text="Streams the full pass in progress has written so far.")
    pass_keys_about = models.BigIntegerField(
        null=True, blank=True, help_text="Keys in Redis (DBSIZE) when the pass started: what it has to go through, about."
    )

    def __str__(self) -> str:
        return f"mirror of {self.connection} synced {self.synced_at:%Y-%m-%d %H:%M:%S}"


class RollupMark(models.Model):
    """How far the rollups of one sample table into one resolution have come: the watermark a run that
    stopped part-way resumes from (streams_app.metrics.rollups).

    Every source row before ``bucket`` is rolled up; of the bucket starting at ``bucket`` the objects with
    an id up to ``after`` are (0: none yet). It is written in the same transaction as the rows it covers.
    """

    table = models.CharField(max_length=16)
    resolution = models.CharField(max_length=3, choices=Resolution.choices)
    bucket = models.DateTimeField()
    after = models.BigIntegerField(default=0)

    class Meta:
        constraints = [models.UniqueConstraint(fields=["table", "resolution"], name="rollupmark_table_res_unique")]

    def __str__(self) -> str:
        return f"{self.table} {self.resolution} rolled up to {self.bucket:%Y-%m-%d %H:%M} (ids up to {self.after})"


class FamilySample(models.Model):
    """One stream family's figures on one connection, as of the family pass that finished at ``at``.

    A family is a glob over stream keys (:mod:`eventbus.families`: configured, detected from the key's
    shape, or a key alone). At a million short-lived keys there is no per-stream sample of every member:
    the family row is what the overview, the streams page, ``/metrics`` and alerts read, and the few members
    that matter keep their own per-stream rows (docs/operations.md#stream-families).

    ``complete`` is False when the pass that made the row stopped at its budget before it saw every key
    (``looked_at`` of ``keys_total``): its figures are then a lower bound. ``busiest`` is
    ``[{"key": display text, "length": XLEN}, ...]``, the longest first.
    """

    connection = models.CharField(max_length=100)
    family = models.TextField(help_text="The family's glob, as display text.")
    family_hash = models.CharField(max_length=64, help_text="name_hash of the glob's bytes: the lookup key.")
    kind = models.CharField(max_length=10, help_text="configured, detected or key (eventbus.families.Family.kind).")
    at = models.DateTimeField(help_text="The snapshot tick at which the pass that made these figures finished.")
    keys = models.BigIntegerField()
    entries = models.BigIntegerField(help_text="The sum of XLEN over the family's streams.")
    entries_added = models.BigIntegerField(null=True, blank=True, help_text="The sum of Redis's entries-added counters.")
    rate_per_s = models.FloatField(null=True, blank=True, help_text="Entries added per second since the previous row.")
    groups = models.BigIntegerField(default=0)
    pending = models.BigIntegerField(default=0)
    dlq_keys = models.IntegerField(default=0)
    dlq_depth = models.BigIntegerField(default=0)
    oldest_id = models.CharField(max_length=41, blank=True, default="")
    newest_id = models.CharField(max_length=41, blank=True, default="")
    busiest = models.JSONField(default=list, blank=True)
    complete = models.BooleanField(default=True)
    looked_at = models.BigIntegerField(default=0)
    keys_total = models.BigIntegerField(null=True, blank=True, help_text="DBSIZE when the pass began (None: refused).")

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["connection", "family_hash", "at"], name="familysample_conn_fam_at_unique")
        ]
        indexes = [models.Index(fields=["connection", "at"], name="familysample_conn_at")]

    def __str__(self) -> str:
        return f"{self.connection} {self.family} {self.at:%Y-%m-%d %H:%M:%S} ({self.keys} keys)"


class FamilyPassState(models.Model):
    """The rolling family pass of one connection in family mode (docs/operations.md#stream-families).

    Each snapshot tick goes on with the pass's ``SCAN`` from ``cursor`` for a bounded number of keys and
    adds what it read to ``tally`` (the partial family figures, JSON: pattern hex -> sums); keys SCAN
    returned beyond the tick's allowance wait in ``carry`` (hex) for the next tick. ``cursor`` is None
    when no pass is under way. ``members`` is the set of members that keep per-stream rows (hex keys),
    from the last completed pass and the current one so far.
    """

    connection = models.CharField(max_length=100, unique=True)
    cursor = models.BigIntegerField(null=True, blank=True)
    started_at = models.DateTimeField(null=True, blank=True, help_text="The tick the pass under way began at.")
    keys_total = models.BigIntegerField(null=True, blank=True, help_text="DBSIZE when the pass began.")
    looked_at = models.BigIntegerField(default=0)
    streams = models.BigIntegerField(default=0, help_text="Stream keys the pass under way has read.")
    tally = models.JSONField(default=dict, blank=True)
    carry = models.JSONField(default=list, blank=True)
    candidates = models.JSONField(default=list, blank=True, help_text="Members found by the pass under way.")
    members = models.JSONField(default=list, blank=True, help_text="Members of the last completed pass.")
    left_out = models.BigIntegerField(default=0, help_text="Members the cap left out of the pass under way.")
    members_left_out = models.BigIntegerField(
        default=0, help_text="Members that matter the cap left out of the last completed pass."
    )
    missed = models.TextField(blank=True, default="")
    completed_at = models.DateTimeField(null=True, blank=True, help_text="The tick the last pass completed at.")
    passes = models.IntegerField(default=0)

    def __str__(self) -> str:
        return f"family pass of {self.connection} ({self.streams} streams so far)"
