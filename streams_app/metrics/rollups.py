"""Rolling raw samples up into 1-minute and 1-hour rows (:func:`samples_downsample`).

Averages of length, rate, lag, pending and depth (weighted by each row's count of raw samples, so a
rollup of rollups averages exactly); the maximum of the longest pending idle time; the sum of entries
added. The work is done in bounded steps (a bucket's objects in id ranges, a query each) within a time
or row budget; what the budget leaves is done by the next run (every minute), from the watermark each
step saves with its rows (:class:`~streams_app.metrics.models.RollupMark`). Retention deletes raw rows only once
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
from streams_app.metrics.models import (
    DlqSample,
    GroupMirror,
    GroupSample,
    Resolution,
    RollupMark,
    StreamMirror,
    StreamSample,
)

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
    """Where this resolution's complete buckets end: source rows before it are covered (a bucket a run
    stopped part-way through is not: its rows may still be needed)."""
    mark = _mark(model, resolution)
    return mark.bucket if mark is not None else None


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


#: Per table, the averaged columns' sum and count columns: a rollup row keeps the sum of the raw values its
#: mean was taken of and their number (``samples``, None on a raw row: one; a column that may be None has a
#: count of its own), so an hour made of minutes averages its raw samples exactly.
WEIGHTS: dict[SampleModel, dict[str, tuple[str, str]]] = {
    StreamSample: {"length": ("length_sum", "samples"), "rate_per_s": ("rate_sum", "rate_samples")},
    GroupSample: {"lag": ("lag_sum", "lag_samples"), "pending": ("pending_sum", "samples")},
    DlqSample: {"depth": ("depth_sum", "samples")},
}
#: Objects (mirror rows of streams, groups) per statement of a rollup bucket: a run can stop between two
#: (:func:`samples_downsample`'s ``max_rows``) and the next goes on from the :class:`RollupMark`. Each step
#: reads the bucket's index range again, so a bucket of 100k streams takes two or three.
ROLLUP_STEP = 50_000


def _mean(db: Any, how: str, total: str, count: str) -> str:
    """The SQL mean ``total / count`` (None when ``count`` is 0) for a rollup (``how`` as in :data:`ROLLUPS`).

    A mean of counts is stored rounded half up, ``floor(total / count + 0.5)``, computed exactly: on PostgreSQL
    in numeric (a sum of integers is one), on SQLite in integer arithmetic, ``floor((2 total + count) / (2
    count))`` with the division's truncation towards zero corrected for a negative remainder (SQLite's
    ``FLOOR`` exists only when built with its math functions); its ``%`` is ``%%``, as the statement has
    parameters (a single one broke DEBUG's query log)."""
    if how == "fmean":
        return f"(1.0 * {total} / NULLIF({count}, 0))"
    if db.vendor == "postgresql":
        return f"CAST(FLOOR(CAST({total} AS NUMERIC) / NULLIF({count}, 0) + 0.5) AS BIGINT)"
    a, b = f"(2 * {total} + {count})", f"(2 * NULLIF({count}, 0))"
    return f"({a} / {b} - ({a} %% {b} < 0))"


def _rollup_select(db: Any, model: SampleModel) -> tuple[list[str], str]:
    """The fields and the ``SELECT`` of one step of a rollup bucket of ``model``: its rows of one resolution
    between two times and of objects in an id range, grouped by object. Parameters: the bucket's start and
    resolution (of the rows it makes), then the source's resolution, the bucket's start and end, and the
    object ids after which and up to which (inclusive) the step goes.

    It reads raw rows and minute rows alike: a raw row's sum is None, standing for its own value
    (``COALESCE``), its count 1 (``samples`` is None), or 0 where the value is None."""
    fk, columns = ROLLUPS[model]
    qn = db.ops.quote_name

    def col(name: str) -> str:
        return qn(column_of(model, name))

    fk_column, at, resolution = (col(f) for f in (fk, "at", "resolution"))
    samples = f"COALESCE({col('samples')}, 1)"
    fields = [fk, "at", "resolution", "samples"]
    selects = [f"SUM({samples})"]
    for column, how in columns.items():
        fields.append(column)
        if how == "sum":
            selects.append(f"SUM({col(column)})")
            continue
        if how == "max":
            selects.append(f"MAX({col(column)})")
            continue
        total_column, count_column = WEIGHTS[model][column]
        total = f"SUM(COALESCE({col(total_column)}, {col(column)}))"
        count = (
            f"SUM({samples})" if count_column == "samples"
            else f"SUM(CASE WHEN {col(column)} IS NULL THEN 0 ELSE COALESCE({col(count_column)}, 1) END)"
        )
        selects.append(_mean(db, how, total, count))
        fields.append(total_column)
        selects.append(total)
        if count_column != "samples":
            fields.append(count_column)
            selects.append(count)
    return fields, (
        f"SELECT {fk_column}, %s, %s, {', '.join(selects)} FROM {qn(model._meta.db_table)} "
        f"WHERE {resolution} = %s AND {at} >= %s AND {at} < %s AND {fk_column} > %s AND {fk_column} <= %s "
        f"GROUP BY {fk_column}"
    )


def _bucket_write(db: Any, model: SampleModel, params: Sequence[Any], mark: RollupMark) -> int:
    """Write one step of a rollup bucket of ``model`` (:func:`_rollup_select` and its ``params``) and save
    ``mark`` in the same transaction, so a step is never counted twice; returns the rows written.

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
                made = insert_select_run(db, cursor, insert_select(db, model, fields, select), params)
                mark.save()
                return made
        staged = db.ops.quote_name(ROLLUP_STAGED)
        temp_table_drop(db, ROLLUP_STAGED)
        cursor.execute(f"CREATE TEMPORARY TABLE {staged} AS {select}", params)
        try:
            with transaction.atomic(using=db.alias):
                copy = insert_select(db, model, fields, f"SELECT * FROM temp.{staged}")
                made = insert_select_run(db, cursor, copy, ())
                mark.save()
                return made
        finally:
            temp_table_drop(db, ROLLUP_STAGED)


def _mark(model: SampleModel, resolution: str) -> RollupMark | None:
    """The table's watermark (for a table rolled up before there were any, which wrote whole buckets only:
    the end of its newest bucket). None: nothing rolled up yet."""
    table = TABLE_NAMES[model]
    mark = RollupMark.objects.filter(table=table, resolution=resolution).first()
    if mark is not None:
        return mark
    last = model.objects.filter(resolution=resolution).aggregate(m=Max("at"))["m"]
    return RollupMark(table=table, resolution=resolution, bucket=last + BUCKET_SIZE[resolution]) if last else None


def _step_end(model: SampleModel, after: int, step: int) -> int | None:
    """The id up to which the next step of a bucket goes: the ``step``-th mirror row (stream or group) after
    ``after``, read on the mirror's primary key; None: fewer are left, the step is the bucket's last."""
    parent = GroupMirror if model is GroupSample else StreamMirror
    found = list(parent.objects.filter(pk__gt=after).order_by("pk").values_list("pk", flat=True)[step - 1 : step])
    return found[0] if found else None


def _rollup(
    model: SampleModel, resolution: str, *, limit: datetime, deadline: float | None = None,
    rows: list[int] | None = None, step: int | None = None,
) -> tuple[int, datetime | None]:
    """Roll ``model``'s rows up into ``resolution`` buckets that ended before ``limit``.

    Buckets are taken in time order from the :class:`RollupMark`, skipping stretches without source rows,
    in steps of :data:`ROLLUP_STEP` objects: one ``INSERT ... SELECT ... GROUP BY`` each, in a transaction
    of its own with the mark it moves (at 100k streams a minute
    bucket is 1.8 million raw rows in and 300k rows out: fetched into Python and written back, as it once
    was, that took a quarter of every minute on SQLite). The run stops between two steps at ``deadline``
    or once ``rows[0]`` rows (a budget shared by the tables, counted down) are written; the next run goes
    on from the mark. Re-running a step is harmless: rows that exist already are kept
    (:func:`~streams_app.metrics.bulk.insert_select_run`).

    Returns the rows written and the time up to which this resolution is complete: every source row
    before it is rolled up (``limit`` when none is left that is due; None when nothing was ever rolled
    up and this call stopped before the first bucket).
    """
    db = connections[router.db_for_write(model)]
    source = _SOURCE[resolution]
    size = BUCKET_SIZE[resolution]
    mark = _mark(model, resolution)
    made = 0
    buckets = 0
    while buckets < MAX_BUCKETS[resolution]:
        if (deadline is not None and time.monotonic() >= deadline) or (rows is not None and rows[0] <= 0):
            break  # the next run goes on from the mark
        source_rows = model.objects.filter(resolution=source)
        if mark is not None:
            source_rows = source_rows.filter(at__gte=mark.bucket)
        first = source_rows.order_by("at").values_list("at", flat=True).first()
        if first is None:
            return made, limit
        start = _floor(first, size)
        end = start + size
        if end > limit:
            return made, start
        mark = mark or RollupMark(table=TABLE_NAMES[model], resolution=resolution, bucket=start)
        if mark.bucket != start:
            mark.bucket, mark.after = start, 0
        upto = _step_end(model, mark.after, step or ROLLUP_STEP)
        bounds = [db.ops.adapt_datetimefield_value(t) for t in (start, end)]
        params = [bounds[0], str(resolution), str(source), *bounds, mark.after, 2**62 if upto is None else upto]
        if upto is None:  # the bucket's last step: the mark moves past it
            mark.bucket, mark.after = end, 0
            buckets += 1
        else:
            mark.after = upto
        written = _bucket_write(db, model, params, mark)
        made += written
        if rows is not None:
            rows[0] -= written
    return made, mark.bucket if mark is not None else None


def samples_downsample(
    *, now: datetime, budget_s: float | None = None, max_rows: int | None = None, step: int | None = None
) -> dict[str, dict[str, int]]:
    """Compute the 1-minute and 1-hour rollups due at ``now``: ``{"1m": {"stream": n, ...}, "1h": {...}}``.

    Minutes are rolled up from the raw samples, hours from the minutes, whose counts and sums
    (:data:`WEIGHTS`) make an hour's mean that of its raw samples exactly, whatever ticks each minute had
    (an hour of 100k streams is 108 million raw samples but 18 million minute rows). Both only for buckets
    that ended :func:`rollup_grace` ago, an hour once its minutes are all rolled up. With ``budget_s`` no
    step starts after that many seconds, with ``max_rows`` none once that many rows are written (``step``:
    objects per step); the next call goes on from each table's :class:`RollupMark`.
    """
    limit = now - rollup_grace()
    deadline = None if budget_s is None else time.monotonic() + budget_s
    rows = None if max_rows is None else [max_rows]
    made: dict[str, dict[str, int]] = {str(Resolution.MINUTE): {}, str(Resolution.HOUR): {}}
    minutes_done: dict[SampleModel, datetime | None] = {}
    for model, name in TABLE_NAMES.items():
        made[str(Resolution.MINUTE)][name], minutes_done[model] = _rollup(
            model, Resolution.MINUTE, limit=limit, deadline=deadline, rows=rows, step=step
        )
    for model, name in TABLE_NAMES.items():
        done = minutes_done[model]
        made[str(Resolution.HOUR)][name] = (
            _rollup(model, Resolution.HOUR, limit=min(limit, done), deadline=deadline, rows=rows, step=step)[0]
            if done else 0
        )
    return made
