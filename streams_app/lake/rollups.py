"""Load the Spark rollups (Parquet under ``<lake>/rollups``) into the console's tables, idempotently.

Each rollup is upserted by its natural key (``INSERT ... ON CONFLICT (key) DO UPDATE``, which SQLite and
PostgreSQL both speak), then the rows this load did not touch are deleted: after a load the table is
exactly the rollup, however often the same rollup is loaded, and a row's id stays the same from one
run to the next. One rollup is one transaction, so a page never shows half a rollup. The statement is
run with ``executemany`` on values prepared by the model's own fields: building a model instance per
row made loading tens of thousands of rows take longer than the Spark jobs.

Per-minute throughput is kept in the lake; only its last ``BUSCONSOLE_PIPELINE_MINUTE_HOURS`` hours
(before the newest minute) come into the database, where a page may want them. Everything else is
small: hours, groups, signatures.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, timedelta
from typing import Any

import pyarrow as pa
import pyarrow.compute as pc
from django.conf import settings
from django.db import connection, models, transaction
from django.utils import timezone

from pipeline import lake as lake_layout
from pipeline.signatures import search_text
from streams_app.lake.models import (
    AnomalyRollup,
    ErrorSignatureRollup,
    LagTrendRollup,
    LatencyRollup,
    RetryRollup,
    ThroughputRollup,
)
from streams_app.metrics.bulk import column_of, field_column
from streams_app.metrics.models import name_hash

BATCH = 1000
_TEXT = 1000


def _stream(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "connection": row["conn"],
        "stream": row["stream"],
        "stream_hash": name_hash(row["stream"]),
        "stream_text": (row["stream_text"] or "")[:_TEXT],
    }


def _throughput(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **_stream(row),
        "scope": row["scope"],
        "event_type": row["event_type"][:200],
        "resolution": row["resolution"],
        "bucket": row["bucket"],
        "entries": row["entries"],
        "bytes": row["bytes"] or 0,
    }


def _latency(row: dict[str, Any]) -> dict[str, Any]:
    return {
        "connection": row["conn"],
        "stream": row["stream"][:_TEXT],
        "group": row["group"][:_TEXT],
        "event_type": row["event_type"][:200],
        **{name: row[name] for name in ("hour", "runs", "failed", "mean_ms", "p50_ms", "p95_ms", "p99_ms", "max_ms")},
    }


def _signature(row: dict[str, Any]) -> dict[str, Any]:
    return {
        **_stream(row),
        "dlq": row["dlq"],
        "dlq_hash": name_hash(row["dlq"]),
        "dlq_text": row["dlq_text"][:_TEXT],
        "signature": row["signature"],
        "search": search_text(row["signature"]),
        **{name: row[name] for name in ("count", "first_seen", "last_seen", "example_entry_id", "rank")},
        "example_error": row["example_error"] or "",
    }


def _retries(row: dict[str, Any]) -> dict[str, Any]:
    return {**_stream(row), "retries": row["retries"], "count": row["count"]}


def _lag(row: dict[str, Any]) -> dict[str, Any]:
    names = ("hour", "samples", "mean_lag", "max_lag", "last_lag", "lag_change", "max_pending", "max_idle_ms")
    return {
        **_stream(row),
        "group": row["group"],
        "group_hash": name_hash(row["group"]),
        "group_text": row["group_text"][:_TEXT],
        **{name: row[name] for name in names},
    }


def _anomaly(row: dict[str, Any]) -> dict[str, Any]:
    names = ("hour", "entries", "baseline_mean", "baseline_std", "baseline_points", "z", "threshold", "direction")
    return {**_stream(row), **{name: row[name] for name in names}}


def _recent_minutes(table: pa.Table) -> pa.Table:
    """Hourly rows, and minute rows of the last ``BUSCONSOLE_PIPELINE_MINUTE_HOURS`` hours of data."""
    minute = pc.equal(table["resolution"], "minute")
    buckets = table["bucket"].filter(minute)
    if len(buckets) == 0:
        return table
    hours = settings.BUSCONSOLE_PIPELINE_MINUTE_HOURS
    since = pc.max(buckets).as_py() - timedelta(hours=hours)
    keep = pc.or_(pc.invert(minute), pc.greater(table["bucket"], pa.scalar(since, table["bucket"].type)))
    return table.filter(keep)


@dataclass(frozen=True, slots=True)
class _Spec:
    name: str
    model: type[models.Model]
    unique: tuple[str, ...]
    build: Callable[[dict[str, Any]], dict[str, Any]]
    prepare: Callable[[pa.Table], pa.Table] | None = None


SPECS = (
    _Spec(lake_layout.THROUGHPUT, ThroughputRollup,
          ("connection", "stream_hash", "scope", "event_type", "resolution", "bucket"), _throughput, _recent_minutes),
    _Spec(lake_layout.LATENCY, LatencyRollup, ("connection", "stream", "group", "event_type", "hour"), _latency),
    _Spec(lake_layout.ERROR_SIGNATURES, ErrorSignatureRollup, ("connection", "stream_hash", "dlq_hash", "signature"),
          _signature),
    _Spec(lake_layout.RETRIES, RetryRollup, ("connection", "stream_hash", "retries"), _retries),
    _Spec(lake_layout.LAG_TREND, LagTrendRollup, ("connection", "stream_hash", "group_hash", "hour"), _lag),
    _Spec(lake_layout.ANOMALIES, AnomalyRollup, ("connection", "stream_hash", "hour"), _anomaly),
)


def rollups_uri(lake_uri: str | None = None) -> str:
    return (lake_uri or settings.BUSCONSOLE_LAKE).rstrip("/") + "/" + lake_layout.ROLLUPS


def rollups_load(*, lake_uri: str | None = None, source: str | None = None) -> dict[str, int]:
    """Upsert every rollup found under ``source`` (default ``<lake>/rollups``); rows loaded per rollup.

    A rollup directory that does not exist (its job was not run) leaves its table alone.
    """
    rollups = lake_layout.Lake(source or rollups_uri(lake_uri))
    counts: dict[str, int] = {}
    for spec in SPECS:
        if not rollups.files(spec.name):
            continue
        table = rollups.read(spec.name)
        assert table is not None
        counts[spec.name] = _load_one(spec, spec.prepare(table) if spec.prepare else table)
    return counts


def _naive_times(table: pa.Table) -> tuple[pa.Table, list[str]]:
    """Time-zoned timestamp columns as naive UTC, and their names.

    pyarrow looks the zone up for every value it turns into a datetime (a failed ``import pytz``
    each time): on 100k rows that alone took seconds. The loop adds the zone back.
    """
    zoned = [f.name for f in table.schema if pa.types.is_timestamp(f.type) and f.type.tz is not None]
    for name in zoned:
        index = table.schema.get_field_index(name)
        table = table.set_column(index, name, table[name].cast(pa.timestamp(table.schema.field(name).type.unit)))
    return table, zoned


def _load_one(spec: _Spec, table: pa.Table) -> int:
    started = timezone.now()
    meta = spec.model._meta
    fields = [f for f in meta.concrete_fields if not f.primary_key]
    unique = [column_of(spec.model, name) for name in spec.unique]
    columns = [field_column(f) for f in fields]
    quote = connection.ops.quote_name
    sql = (
        f"INSERT INTO {quote(meta.db_table)} ({', '.join(map(quote, columns))}) "
        f"VALUES ({', '.join(['%s'] * len(columns))}) "
        f"ON CONFLICT ({', '.join(map(quote, unique))}) DO UPDATE SET "
        + ", ".join(f"{quote(c)} = EXCLUDED.{quote(c)}" for c in columns if c not in unique)
    )
    # Only times need the backend's adaptation (SQLite stores text); numbers, text and bytes go as they are.
    prepare = [(f, isinstance(f, models.DateTimeField)) for f in fields]
    table, zoned = _naive_times(table)
    loaded = 0
    with transaction.atomic(), connection.cursor() as cursor:
        for batch in table.to_batches(max_chunksize=BATCH):
            rows = []
            for row in batch.to_pylist():
                for name in zoned:
                    if row[name] is not None:
                        row[name] = row[name].replace(tzinfo=UTC)
                values = spec.build(row)
                values["updated_at"] = started
                rows.append([
                    f.get_db_prep_save(values[f.attname], connection) if adapt else values[f.attname]
                    for f, adapt in prepare
                ])
            cursor.executemany(sql, rows)
            loaded += len(rows)
        # rows of an earlier load that this rollup no longer has
        spec.model._default_manager.filter(updated_at__lt=started).delete()  # objects: these models have no other manager
    return loaded
