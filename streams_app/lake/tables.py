"""Export the metric snapshot tables to the lake (the streams are :mod:`streams_app.lake.export`'s).

``StreamSample``, ``GroupSample`` and ``DlqSample`` rows go to ``<lake>/snapshots/<table>/`` by time: per
table and resolution a checkpoint holds the ``at`` (ms) exported up to, and a run exports the rows whose
``at`` is past it and old enough not to change any more (:data:`SETTLE_S`): raw rows are written once
per tick, 1-minute and 1-hour rows are rewritten while their minute or hour is open. Rows are read in
keyset pages of (at, id), so memory stays bounded; the files of a range are listed in the checkpoint's
``pending`` before they are written, and a run that dies before the checkpoint moves has them deleted
by the next one, as for streams.

A group sample's ``oldest_pending_idle_ms`` is the longest idle time among the group's pending entries
(the maximum over its PEL, see :mod:`streams_app.redis_ops.pending_idle`): the column keeps the name it
had when it was the lowest pending ID's idle time, so the lake's files stay one schema.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pyarrow as pa
from django.db.models import Model, Q

from pipeline import convert, lake
from streams_app.lake.checkpoints import ExportStats, WrittenFn, checkpoint_clear_pending, checkpoint_get
from streams_app.lake.models import ExportCheckpoint
from streams_app.metrics.models import DlqSample, GroupSample, StreamSample

SETTLE_S = {"raw": 60, "1m": 180, "1h": 3900}
SAMPLE_BATCH = 50_000

Shape = Callable[[list[dict[str, Any]]], dict[str, list[Any]]]


def _stream_sample_rows(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {
        "stream": [bytes(r["stream__key"]) for r in rows],
        "stream_text": [r["stream__key_text"] for r in rows],
        "conn": [r["stream__connection"] for r in rows],
        "length": [r["length"] for r in rows],
        "added": [r["added"] for r in rows],
        "rate_per_s": [r["rate_per_s"] for r in rows],
    }


def _group_sample_rows(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {
        "stream": [bytes(r["group__stream__key"]) for r in rows],
        "stream_text": [r["group__stream__key_text"] for r in rows],
        "conn": [r["group__stream__connection"] for r in rows],
        "group": [bytes(r["group__name"]) for r in rows],
        "group_text": [r["group__name_text"] for r in rows],
        "lag": [r["lag"] for r in rows],
        "pending": [r["pending"] for r in rows],
        "oldest_pending_idle_ms": [r["oldest_pending_idle_ms"] for r in rows],  # longest pending idle
    }


def _dlq_sample_rows(rows: list[dict[str, Any]]) -> dict[str, list[Any]]:
    return {
        "stream": [bytes(r["stream__key"]) for r in rows],
        "stream_text": [r["stream__key_text"] for r in rows],
        "conn": [r["stream__connection"] for r in rows],
        "depth": [r["depth"] for r in rows],
    }


_STREAM_COLS = ("stream__key", "stream__key_text", "stream__connection")
_TABLES: tuple[tuple[str, type[Model], tuple[str, ...], Shape], ...] = (
    (lake.STREAM_SAMPLES, StreamSample, (*_STREAM_COLS, "length", "added", "rate_per_s"), _stream_sample_rows),
    (
        lake.GROUP_SAMPLES,
        GroupSample,
        (
            "group__stream__key", "group__stream__key_text", "group__stream__connection", "group__name",
            "group__name_text", "lag", "pending", "oldest_pending_idle_ms",
        ),
        _group_sample_rows,
    ),
    (lake.DLQ_SAMPLES, DlqSample, (*_STREAM_COLS, "depth"), _dlq_sample_rows),
)


def export_tables(
    target: lake.Lake, *, now: datetime, since_ms: int = 0, stats: ExportStats, on_written: WrittenFn | None = None
) -> None:
    """Export the snapshot rows whose ``at`` is past their checkpoint and settled (:data:`SETTLE_S`)."""
    now_ms = lake.utc_ms(now)
    for dataset, model, columns, shape in _TABLES:
        for resolution, settle in SETTLE_S.items():
            name = f"{dataset}:{resolution}".encode()
            checkpoint = checkpoint_get("", ExportCheckpoint.Kind.TABLE, name)
            checkpoint_clear_pending(target, checkpoint)
            from_ms = max(int(checkpoint.last_id or 0), since_ms)
            to_ms = now_ms - settle * 1000
            if to_ms <= from_ms:
                continue
            written = _export_table_range(
                target, checkpoint, dataset, model, columns, shape, resolution, from_ms, to_ms, stats
            )
            if on_written and written:
                on_written(written)
            checkpoint.last_id = str(to_ms)
            checkpoint.pending = []
            checkpoint.save(update_fields=["last_id", "exported", "pending", "updated_at"])


def _export_table_range(
    target: lake.Lake,
    checkpoint: ExportCheckpoint,
    dataset: str,
    model: type[Model],
    columns: tuple[str, ...],
    shape: Shape,
    resolution: str,
    from_ms: int,
    to_ms: int,
    stats: ExportStats,
) -> list[str]:
    schema = lake.SCHEMAS[dataset]
    low, high = _aware(from_ms), _aware(to_ms)
    base = model._default_manager.filter(resolution=resolution, at__gt=low, at__lte=high).order_by("at", "pk")
    after: tuple[datetime, int] | None = None
    written: list[str] = []
    number = 0
    while True:
        page = base if after is None else base.filter(Q(at__gt=after[0]) | Q(at=after[0], pk__gt=after[1]))
        rows = list(page.values("pk", "at", *columns)[:SAMPLE_BATCH])
        if not rows:
            return written
        after = (rows[-1]["at"], rows[-1]["pk"])
        cols = shape(rows)
        ats = [lake.utc_ms(r["at"]) for r in rows]
        cols.update(
            id=[r["pk"] for r in rows],
            at=pa.array([r["at"] for r in rows], lake.TS_US),
            date=pa.array([ms // 86_400_000 for ms in ats], pa.int32()).view(pa.date32()),
            resolution=[resolution] * len(rows),
        )
        table = pa.table([cols[name] for name in schema.names], schema=schema)
        for day, part in convert.split_by_day(table):
            number += 1
            path = lake.sample_file(dataset, day, resolution, from_ms, to_ms, number)
            checkpoint.pending = [*written, path]
            checkpoint.save(update_fields=["pending", "updated_at"])
            target.write(part, path)
            written.append(path)
            stats.files += 1
        checkpoint.exported += len(rows)
        stats.samples += len(rows)


def _aware(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, tz=UTC)
