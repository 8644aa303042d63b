"""Rolling raw samples up into 1-minute and 1-hour rows (:func:`samples_downsample`).

Averages of length, rate, lag, pending and depth; the maximum of the longest pending idle time; the sum
of entries added. The work is done in bounded steps within a time budget, a rollup bucket per query;
what the budget leaves is done by the next run (every minute). Retention deletes raw rows only once
both rollups cover them (:mod:`.pruning`, through :func:`rolled_until`).
"""

from __future__ import annotations

import math
import time
from collections.abc import Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections, router, transaction
from django.db.models import Max, Min

from streams_app.metrics.bulk import column_of, insert_select, insert_select_run, temp_table_drop
from streams_app.metrics.models import DlqSample, GroupSample, Resolution, StreamSample

#: Rollup buckets (per resolution and table) one call of :func:`samples_downsample` may compute.
MAX_BUCKETS: dict[str, int] = {Resolution.MINUTE: 240, Resolution.HOUR: 6}
BUCKET_SIZE: dict[str, timedelta] = {Resolution.MINUTE: timedelta(minutes=1), Resolution.HOUR: timedelta(hours=1)}
#: The temporary table a rollup bucket is aggregated into on SQLite (:func:`_bucket_write`).
ROLLUP_STAGED = "busconsole_rollup"


#: Per table: the foreign key, and how each rolled-up column is rolled up: ``mean`` (of a count: kept as
#: a whole number, rounded half up), ``fmean`` (of a float), ``sum`` or ``max``.
#: The sample tables: what the rollups, the pruning and the series read.
SampleModel = type[StreamSample] | type[GroupSample] | type[DlqSample]

ROLLUPS: dict[SampleModel, tuple[str, dict[str, str]]] = {
    StreamSample: ("stream", {"length": "mean", "rate_per_s": "fmean", "added": "sum"}),
    GroupSample: ("group", {"lag": "mean", "pending": "mean", "oldest_pending_idle_ms": "max"}),
    DlqSample: ("stream", {"depth": "mean"}),
}


#: The rows each resolution is rolled up from: minutes from the raw samples, hours from the minutes.
_SOURCE: dict[str, str] = {Resolution.MINUTE: Resolution.RAW, Resolution.HOUR: Resolution.MINUTE}


TABLE_NAMES: dict[SampleModel, str] = {StreamSample: "stream", GroupSample: "group", DlqSample: "dlq"}


def _floor(at: datetime, size: timedelta) -> datetime:
    step = size.total_seconds()
    return datetime.fromtimestamp(math.floor(at.timestamp() / step) * step, tz=UTC)


def rollup_grace() -> timedelta:
    """How long after a bucket ends it is rolled up: late snapshot commits land before that."""
    return timedelta(seconds=max(60, 3 * settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S))


def rolled_until(model: SampleModel, resolution: str) -> datetime | None:
    """End of the newest rollup bucket: raw rows before it are covered by this resolution."""
    last = model.objects.filter(resolution=resolution).aggregate(m=Max("at"))["m"]
    return last + BUCKET_SIZE[resolution] if last else None


def rollups_until() -> datetime | None:
    """Where the 1-minute rollups of every sample table end: the earliest of the tables' ends, a table
    never rolled up counting from its oldest raw sample (None: no raw sample at all). One lookup per
    table on the (resolution, at) index, two for a table never rolled up."""
    ends = []
    for model in ROLLUPS:
        end = rolled_until(model, Resolution.MINUTE)
        if end is None:
            end = model.objects.filter(resolution=Resolution.RAW).aggregate(m=Min("at"))["m"]
        if end is not None:
            ends.append(end)
    return min(ends, default=None)


def _aggregate(db: Any, how: str, column: str) -> str:
    """The SQL aggregate of ``column`` for a rollup (``how`` as in :data:`ROLLUPS`).

    A mean of counts is stored rounded half up, ``floor(mean + 0.5)``: PostgreSQL's ``AVG`` of integers is
    an exact numeric, and ``FLOOR`` of it is exact too; SQLite's ``AVG`` is a double and ``FLOOR`` is there
    only when SQLite was built with its math functions, so the floor is written with ``CAST`` (which
    truncates towards zero) and a correction for negative values.
    """
    if how == "sum":
        return f"SUM({column})"
    if how == "max":
        return f"MAX({column})"
    if how == "fmean":
        return f"AVG({column})"
    if db.vendor == "postgresql":
        return f"CAST(FLOOR(AVG({column}) + 0.5) AS BIGINT)"
    half = f"(AVG({column}) + 0.5)"
    return f"(CAST({half} AS INTEGER) - ({half} < CAST({half} AS INTEGER)))"


def _rollup_select(db: Any, model: SampleModel) -> tuple[list[str], str]:
    """The fields and the ``SELECT`` of one rollup bucket of ``model``: its rows of one resolution between
    two times, grouped by object. Parameters: the bucket's start and resolution (of the rows it makes),
    then the source's resolution and the bucket's start and end."""
    fk, columns = ROLLUPS[model]
    meta = model._meta
    qn = db.ops.quote_name
    fk_column, at, resolution = (qn(column_of(model, f)) for f in (fk, "at", "resolution"))
    aggregates = ", ".join(_aggregate(db, how, qn(column_of(model, c))) for c, how in columns.items())
    return [fk, "at", "resolution", *columns], (
        f"SELECT {fk_column}, %s, %s, {aggregates} FROM {qn(meta.db_table)} "
        f"WHERE {resolution} = %s AND {at} >= %s AND {at} < %s GROUP BY {fk_column}"
    )


def _bucket_write(db: Any, model: SampleModel, params: Sequence[Any]) -> int:
    """Write one rollup bucket of ``model`` (:func:`_rollup_select` and its ``params``); returns the rows written.

    On PostgreSQL one ``INSERT ... SELECT``, which blocks no other writer. SQLite has one writer at a
    time, and the statement would hold the database for all of its aggregation while a snapshot waits to
    commit (at 100k streams about a second for a minute bucket, ten for an hour bucket of the group
    samples): the rows are aggregated into a temporary table first, which takes no lock on the main
    database (it is only read), then copied in a transaction of their own (at 100k streams 0.2 s for the
    stream samples' 100k rows, 0.5 s for the groups' 200k).
    """
    fields, select = _rollup_select(db, model)
    with db.cursor() as cursor:
        if db.vendor != "sqlite":
            with transaction.atomic(using=db.alias):
                return insert_select_run(db, cursor, insert_select(db, model, fields, select), params)
        staged = db.ops.quote_name(ROLLUP_STAGED)
        temp_table_drop(db, ROLLUP_STAGED)
        cursor.execute(f"CREATE TEMPORARY TABLE {staged} AS {select}", params)
        try:
            with transaction.atomic(using=db.alias):
                copy = insert_select(db, model, fields, f"SELECT * FROM temp.{staged}")
                return insert_select_run(db, cursor, copy, ())
        finally:
            temp_table_drop(db, ROLLUP_STAGED)


def _rollup(
    model: SampleModel, resolution: str, *, limit: datetime, deadline: float | None = None
) -> tuple[int, datetime | None]:
    """Roll ``model``'s rows up into ``resolution`` buckets that ended before ``limit``.

    Buckets are taken in time order from the end of the newest rollup, skipping stretches without source
    rows; each is one ``INSERT ... SELECT ... GROUP BY`` in the database, in a transaction of its own
    (at 100k streams a minute bucket is 1.8 million raw rows in and 300k rows out: fetched into Python
    and written back, as it once was, that took a quarter of every minute on SQLite). Re-running a
    bucket is harmless: rows that exist already are kept (:func:`~streams_app.metrics.bulk.insert_select_run`).

    Returns the rows written and the time up to which this resolution is complete: every source row
    before it is rolled up (``limit`` when none is left that is due; None when nothing was ever rolled
    up and this call stopped before the first bucket).
    """
    db = connections[router.db_for_write(model)]
    source = _SOURCE[resolution]
    size = BUCKET_SIZE[resolution]
    cursor = rolled_until(model, resolution)
    made = 0
    for _ in range(MAX_BUCKETS[resolution]):
        if deadline is not None and time.monotonic() >= deadline:
            break  # the next run goes on from here
        rows = model.objects.filter(resolution=source)
        if cursor is not None:
            rows = rows.filter(at__gte=cursor)
        first = rows.order_by("at").values_list("at", flat=True).first()
        if first is None:
            return made, limit
        start = _floor(first, size)
        end = start + size
        if end > limit:
            return made, start
        bounds = [db.ops.adapt_datetimefield_value(t) for t in (start, end)]
        made += _bucket_write(db, model, [bounds[0], str(resolution), str(source), *bounds])
        cursor = end
    return made, cursor


def samples_downsample(*, now: datetime, budget_s: float | None = None) -> dict[str, dict[str, int]]:
    """Compute the 1-minute and 1-hour rollups due at ``now``: ``{"1m": {"stream": n, ...}, "1h": {...}}``.

    Minutes are rolled up from the raw samples, hours from the minutes: a minute's figure is the mean (or
    sum, or maximum) of its samples, an hour's the mean (or sum, or maximum) of its minutes, so every
    minute of the hour weighs alike whatever number of ticks it had (a time-weighted mean). An hour of
    100k streams is 108 million raw samples but 18 million minute rows. Both only for buckets that
    ended at least :func:`rollup_grace` ago, and an hour only once its minutes are all rolled up. With
    ``budget_s`` no bucket is started after that many seconds; the next call continues where this one
    stopped, since each resolution resumes from its newest bucket.
    """
    limit = now - rollup_grace()
    deadline = None if budget_s is None else time.monotonic() + budget_s
    made: dict[str, dict[str, int]] = {str(Resolution.MINUTE): {}, str(Resolution.HOUR): {}}
    minutes_done: dict[SampleModel, datetime | None] = {}
    for model, name in TABLE_NAMES.items():
        made[str(Resolution.MINUTE)][name], minutes_done[model] = _rollup(
            model, Resolution.MINUTE, limit=limit, deadline=deadline
        )
    for model, name in TABLE_NAMES.items():
        done = minutes_done[model]
        made[str(Resolution.HOUR)][name] = (
            _rollup(model, Resolution.HOUR, limit=min(limit, done), deadline=deadline)[0] if done else 0
        )
    return made
