"""The lake's layout, its Arrow schemas, and crash-safe file writes.

One module says where everything lives, so the exporter (which writes with pyarrow) and the Spark jobs
(which read with Hadoop file systems) cannot drift apart::

    <lake>/entries/connection=<conn>/stream_hex=<key dir>/day=<YYYY-MM-DD>/part-<first id>_<last id>.parquet
    <lake>/metrics/connection=<conn>/day=<YYYY-MM-DD>/part-<first id>_<last id>.parquet
    <lake>/dlq/connection=<conn>/stream_hex=<key dir>/day=<YYYY-MM-01>/part-<first id>_<last id>.parquet
    <lake>/snapshots/<table>/day=<YYYY-MM-DD>/part-<resolution>-<from ms>_<to ms>-<n>.parquet
    <lake>/rollups/<rollup>/part-*.parquet              (written by Spark, replaced on every run)

* Stream keys are arbitrary bytes, so a partition directory holds the key in hex (``stream_hex``), or
  ``sha256-<digest>`` for keys over 100 bytes (a directory name must stay under 255 bytes); the key
  itself is always in the ``stream`` column (binary) with ``stream_text`` next to it.
* Partition directory names never repeat a data column name (``connection`` vs ``conn``, ``day`` vs
  ``date``): readers that discover Hive partitions (Spark, ``pyarrow.dataset``) then never have to
  reconcile a directory value with a column of another type.
* ``day`` is the UTC date of the entry ID's time; a file never spans two days. The dead letters
  (:data:`MONTHLY`) are the exception: their ``day`` is the first day of the entry's month and a file
  never spans two months. DLQs are small, and a directory per DLQ and day made most of the lake's
  files (560 of 890 for 10M entries), each a listing entry, a footer and a slice of a task for the
  failures job. Lakes exported before keep their DLQ files in per-day directories; the directory
  name and its ``day`` partition are the same, so readers and compaction take both alike.
* File names are a function of the ID range they hold, so writing the same range twice replaces the
  file instead of duplicating it; see :func:`Lake.write` for the temp-then-rename step.
"""

from __future__ import annotations

import contextlib
import hashlib
import os
import posixpath
from datetime import UTC, datetime

import pyarrow as pa
import pyarrow.dataset as ds
import pyarrow.fs as pafs
import pyarrow.parquet as pq

ENTRIES = "entries"
METRICS = "metrics"
DLQ = "dlq"
STREAM_SAMPLES = "snapshots/stream_samples"
GROUP_SAMPLES = "snapshots/group_samples"
DLQ_SAMPLES = "snapshots/dlq_samples"
ROLLUPS = "rollups"
# The rollups under <lake>/rollups/, one directory each: named here, beside the rest of the layout, so
# the console can load them without importing the Spark side that writes them (pipeline.load).
THROUGHPUT = "throughput"
LATENCY = "latency"
ERROR_SIGNATURES = "error_signatures"
RETRIES = "retries"
LAG_TREND = "lag_trend"
ANOMALIES = "anomalies"

#: Datasets partitioned by month (``day=<YYYY-MM-01>``) rather than by day.
MONTHLY = frozenset({DLQ})

#: Keys longer than this many bytes get a digest directory instead of their hex.
_HEX_KEY_MAX = 100

TS = pa.timestamp("ms", tz="UTC")
TS_US = pa.timestamp("us", tz="UTC")
FIELD_TYPE = pa.struct([pa.field("name", pa.binary(), nullable=False), pa.field("value", pa.binary(), nullable=False)])

ENTRY_SCHEMA = pa.schema(
    [
        pa.field("conn", pa.string(), nullable=False),
        pa.field("stream", pa.binary(), nullable=False),
        pa.field("stream_text", pa.string(), nullable=False),
        pa.field("entry_id", pa.string(), nullable=False),
        pa.field("ms", pa.int64(), nullable=False),
        pa.field("seq", pa.int64(), nullable=False),
        pa.field("ts", TS, nullable=False),
        pa.field("date", pa.date32(), nullable=False),
        pa.field("event_type", pa.string()),
        pa.field("fields", pa.list_(pa.field("item", FIELD_TYPE, nullable=False)), nullable=False),
        pa.field("payload_size", pa.int64(), nullable=False),
    ]
)
"""One stream entry. ``fields`` keeps every name/value pair in order, duplicates included, as bytes;
``event_type`` is the first of the fields ``type``, ``event_type``, ``event`` present (UTF-8 decoded,
bad bytes replaced); ``payload_size`` is the sum of the lengths of all names and values."""

METRIC_SCHEMA = pa.schema(
    [
        pa.field("conn", pa.string(), nullable=False),
        pa.field("entry_id", pa.string(), nullable=False),
        pa.field("ms", pa.int64(), nullable=False),
        pa.field("ts", TS, nullable=False),
        pa.field("date", pa.date32(), nullable=False),
        pa.field("event", pa.string()),
        pa.field("stream", pa.string()),
        pa.field("group", pa.string()),
        pa.field("type", pa.string()),
        pa.field("count", pa.int64()),
        pa.field("duration_ms", pa.float64()),
        pa.field("max_ms", pa.float64()),
        pa.field("consumer", pa.string()),
        pa.field("reported_ms", pa.int64()),
        pa.field("ref_entry_id", pa.string()),
        pa.field("event_id", pa.string()),
        pa.field("error", pa.string()),
    ]
)
"""One ``eventbus:metrics`` entry with typed columns (see :mod:`eventbus.metrics`): ``count`` events
of kind ``event`` taking ``duration_ms`` in total; ``reported_ms`` is the worker's ``ts`` field and
``ref_entry_id`` its ``entry_id`` field (the event entry a per-event metric is about). A value that
does not parse as its type is null."""

DLQ_SCHEMA = pa.schema(
    [
        pa.field("conn", pa.string(), nullable=False),
        pa.field("dlq", pa.binary(), nullable=False),
        pa.field("dlq_text", pa.string(), nullable=False),
        pa.field("entry_id", pa.string(), nullable=False),
        pa.field("ms", pa.int64(), nullable=False),
        pa.field("ts", TS, nullable=False),
        pa.field("date", pa.date32(), nullable=False),
        pa.field("convention", pa.string(), nullable=False),
        pa.field("stream", pa.binary()),
        pa.field("stream_text", pa.string()),
        pa.field("original_id", pa.string()),
        pa.field("group", pa.string()),
        pa.field("error", pa.string()),
        pa.field("retries", pa.int64()),
        pa.field("failed_ms", pa.int64()),
        pa.field("failed_at", TS),
    ]
)
"""One dead-letter entry as the console's conventions read it (``streams_app.redis_ops.conventions``):
whatever the bus that wrote it, ``stream`` is where it came from, ``error`` why it failed,
``retries`` how often it was retried and ``failed_at`` when it gave up (the DLQ entry ID's time when
the entry does not say)."""

_SAMPLE_HEAD = [
    pa.field("id", pa.int64(), nullable=False),
    pa.field("conn", pa.string(), nullable=False),
    pa.field("stream", pa.binary(), nullable=False),
    pa.field("stream_text", pa.string(), nullable=False),
]
_SAMPLE_TIME = [
    pa.field("at", TS_US, nullable=False),
    pa.field("date", pa.date32(), nullable=False),
    pa.field("resolution", pa.string(), nullable=False),
]
STREAM_SAMPLE_SCHEMA = pa.schema(
    [
        *_SAMPLE_HEAD,
        *_SAMPLE_TIME,
        pa.field("length", pa.int64()),
        pa.field("added", pa.int64()),
        pa.field("rate_per_s", pa.float64()),
    ]
)
GROUP_SAMPLE_SCHEMA = pa.schema(
    [
        *_SAMPLE_HEAD,
        pa.field("group", pa.binary(), nullable=False),
        pa.field("group_text", pa.string(), nullable=False),
        *_SAMPLE_TIME,
        pa.field("lag", pa.int64()),
        pa.field("pending", pa.int64()),
        # The longest idle time among the group's pending entries (max over the PEL); the name is the
        # column's first, kept so every file of the lake has one schema.
        pa.field("oldest_pending_idle_ms", pa.int64()),
    ]
)
DLQ_SAMPLE_SCHEMA = pa.schema([*_SAMPLE_HEAD, *_SAMPLE_TIME, pa.field("depth", pa.int64())])

SCHEMAS: dict[str, pa.Schema] = {
    ENTRIES: ENTRY_SCHEMA,
    METRICS: METRIC_SCHEMA,
    DLQ: DLQ_SCHEMA,
    STREAM_SAMPLES: STREAM_SAMPLE_SCHEMA,
    GROUP_SAMPLES: GROUP_SAMPLE_SCHEMA,
    DLQ_SAMPLES: DLQ_SAMPLE_SCHEMA,
}

#: Columns with few distinct values, dictionary-encoded in Parquet; the others (payloads, IDs) are
#: mostly unique, where a dictionary costs time and saves nothing.
DICTIONARY_COLUMNS = [
    "conn", "stream", "stream_text", "event_type", "fields.list.element.name", "event", "group", "type",
    "consumer", "dlq", "dlq_text", "convention", "resolution", "group_text",
]


#: Columns written without min/max statistics: every name and value of every entry's fields. No reader
#: filters on a payload's bounds, and computing them took a quarter of the Parquet write (0.65 against
#: 0.50 microseconds an entry, on the bench's entries).
NO_STATISTICS = frozenset({"fields"})


def parquet_options(names: list[str]) -> dict:
    """The ``pq.write_table`` options of a lake file with columns ``names`` (the exporter's and compaction's)."""
    return {
        "compression": "snappy",
        "use_dictionary": [c for c in DICTIONARY_COLUMNS if c.split(".", 1)[0] in names],
        "write_statistics": [c for c in names if c not in NO_STATISTICS],
        "row_group_size": 256 * 1024,
    }


def key_dir(key: bytes) -> str:
    """The partition directory value of a stream key: its hex, or a digest for long keys."""
    if len(key) <= _HEX_KEY_MAX:
        return key.hex()
    return "sha256-" + hashlib.sha256(key).hexdigest()


def entry_file(dataset: str, conn: str, key: bytes | None, day: str, first_id: str, last_id: str) -> str:
    """The lake-relative path of the file holding entries ``first_id``..``last_id`` of one day."""
    parts = [dataset, f"connection={conn}"]
    if key is not None:
        parts.append(f"stream_hex={key_dir(key)}")
    parts += [f"day={day}", f"part-{first_id}_{last_id}.parquet"]
    return posixpath.join(*parts)


def sample_file(dataset: str, day: str, resolution: str, from_ms: int, to_ms: int, number: int) -> str:
    return posixpath.join(dataset, f"day={day}", f"part-{resolution}-{from_ms}_{to_ms}-{number:05d}.parquet")


def hadoop_uri(uri: str) -> str:
    """The lake URI as Spark's Hadoop file systems spell it.

    A bare path becomes absolute (a Spark driver and its executors need not share a working
    directory) and ``s3://`` becomes ``s3a://``, Hadoop's S3 connector; pyarrow (the exporter) spells
    it ``s3://``. Anything else (``hdfs://``, ``gs://``, ``abfs://``, ``file://``) passes unchanged, but
    for a query: pyarrow takes its S3 options from the URI (``s3://bucket/lake?endpoint_override=...``,
    since it reads no endpoint from the environment), Spark from ``spark.hadoop.fs.s3a.*`` options,
    and a Hadoop path has no query.
    """
    if "://" not in uri:
        return "file://" + os.path.abspath(uri)
    uri = uri.split("?", 1)[0]
    if uri.startswith("s3://"):
        return "s3a://" + uri[len("s3://") :]
    return uri


class Lake:
    """The lake at ``uri`` (a local path or any URI pyarrow knows: ``s3://``, ``gs://``, ``hdfs://``)."""

    def __init__(self, uri: str) -> None:
        self.uri = uri
        if "://" in uri and not uri.startswith("file://"):
            self.fs, self.root = pafs.FileSystem.from_uri(uri)
        else:
            path = uri[len("file://") :] if uri.startswith("file://") else uri
            self.fs, self.root = pafs.LocalFileSystem(), os.path.abspath(path)
        self.local = isinstance(self.fs, pafs.LocalFileSystem)

    def path(self, relative: str) -> str:
        return posixpath.join(self.root, relative)

    def write(self, table: pa.Table, relative: str) -> None:
        """Write ``table`` to ``relative`` so a reader never sees a half-written file.

        Locally the file is written under a dot-name next to its target and renamed over it (atomic on
        POSIX; readers skip dot-files); an object store's PUT is atomic already, so there the file is
        written in place. Either way the same name written twice holds the second write.
        """
        final = self.path(relative)
        directory = posixpath.dirname(final)
        self.fs.create_dir(directory, recursive=True)
        target = posixpath.join(directory, ".tmp-" + posixpath.basename(final)) if self.local else final
        pq.write_table(table, target, filesystem=self.fs, **parquet_options(table.schema.names))
        if self.local:
            self.fs.move(target, final)

    def delete(self, relative: str) -> None:
        """Remove a file and its temp sibling, if there; missing files are fine."""
        final = self.path(relative)
        candidates = [final]
        if self.local:
            candidates.append(posixpath.join(posixpath.dirname(final), ".tmp-" + posixpath.basename(final)))
        for path in candidates:
            with contextlib.suppress(FileNotFoundError):
                self.fs.delete_file(path)

    def files(self, relative: str) -> list[str]:
        """Visible Parquet files under ``relative`` (lake-relative paths), sorted; [] if none."""
        base = self.path(relative)
        info = self.fs.get_file_info(base)
        if info.type == pafs.FileType.NotFound:
            return []
        selector = pafs.FileSelector(base, recursive=True)
        out = []
        for item in self.fs.get_file_info(selector):
            name = posixpath.basename(item.path)
            if item.type == pafs.FileType.File and name.endswith(".parquet") and not name.startswith((".", "_")):
                out.append(posixpath.relpath(item.path, self.root))
        return sorted(out)

    def read(self, relative: str, columns: list[str] | None = None) -> pa.Table | None:
        """All visible Parquet files under ``relative`` as one table (no partition columns); None if none.

        For the rollups, which are small; the big datasets are Spark's to read.
        """
        files = [self.path(f) for f in self.files(relative)]
        if not files:
            return None
        dataset = ds.dataset(files, format="parquet", filesystem=self.fs)
        return dataset.to_table(columns=columns)


def utc_ms(moment: datetime) -> int:
    """Milliseconds since the epoch of an aware datetime (naive means UTC)."""
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    return int(moment.timestamp() * 1000)
