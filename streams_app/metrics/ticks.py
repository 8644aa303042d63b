"""The times at which a sample table has rows, and the reads of one object's samples that go through them.

The sample tables (:class:`~streams_app.metrics.models.StreamSample`, ``GroupSample``, ``DlqSample``) are
keyed time first: their unique key is (resolution, at, object). A snapshot tick inserts one row per stream
and group, all with the same ``at``, so with that key they land side by side at the index's right edge:
a tick writes as many index pages as its rows fill. Keyed object first, as they were, each tick touched a
page per stream and per group once every series had filled a page of its own, and on tables holding a
few hours of history a tick's writes grew three- to fourfold at 10k streams (docs/performance.md#snapshot-ticks-on-tables-with-history).

What that key does not serve directly is "one object's samples over a window": its rows lie one per tick,
each among the rows of every other object of the tick. Those reads go through the window's ticks
instead. :func:`ticks_sql` finds them by skipping through the key: the first ``at`` at or after the
window's start, then the first after that, and so on, one index seek each (a recursive ``WITH``; the
table has a few distinct times for millions of rows). An object's row at each tick is one more seek on
the full key. A read then costs a few seeks per tick of its window, about what it returns.

Why hand-written SQL: Django's ORM has no recursive common table expressions (django-cte would add them
for this one statement), and neither database finds the distinct times of an index by itself: both would
read every row of the window. The statement is plain SQL that SQLite and PostgreSQL run alike; names and
values come from the model and the backend (quoting, date-time adaptation and conversion).
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from datetime import datetime
from typing import Any, cast

from django.db import connections, router
from django.db.models import Field, Model
from django.db.models.expressions import RawSQL

from streams_app.metrics.bulk import chunks, column_of

#: The ticks one :func:`sample_ticks` call returns at most when the caller passes no ``limit`` (``limit=None``:
#: all of them).
PAGE = 360


def _db(model: type[Model]) -> Any:
    return connections[router.db_for_read(model)]


def ticks_sql(
    model: type[Model],
    resolution: str,
    *,
    since: datetime | None = None,
    until: datetime | None = None,
    after: datetime | None = None,
    before: datetime | None = None,
    newest_first: bool = False,
    limit: int | None = None,
    db: Any = None,
) -> tuple[str, list[Any]]:
    """The SQL (and its parameters) of the distinct ``at`` values of ``model``'s rows of ``resolution``
    within the bounds: ``since``/``until`` inclusive, ``after``/``before`` exclusive (any may be None).

    Oldest first, or newest first with ``newest_first``; at most ``limit`` of them (None: all, else at least
    1). It is a ``SELECT`` of one column, to run (:func:`sample_ticks`) or to use as the subquery of an
    ``at__in`` filter (:func:`in_ticks`)."""
    if limit is not None and limit < 1:
        raise ValueError(f"limit must be None or at least 1, not {limit}")
    db = db or _db(model)
    qn = db.ops.quote_name
    table = qn(model._meta.db_table)
    at, res = qn(column_of(model, "at")), qn(column_of(model, "resolution"))

    def value(t: datetime) -> Any:
        return db.ops.adapt_datetimefield_value(t)

    near = [(op, t) for op, t in ((">=", since), (">", after)) if t is not None]
    far = [(op, t) for op, t in (("<=", until), ("<", before)) if t is not None]
    step, order = (">", "ASC")
    if newest_first:
        near, far = far, near
        step, order = ("<", "DESC")

    def first(bounds: list[tuple[str, Any]]) -> str:
        where = "".join(f" AND s.{at} {op} {'t.at' if t is None else '%s'}" for op, t in bounds)
        return f"(SELECT s.{at} FROM {table} AS s WHERE s.{res} = %s{where} ORDER BY s.{at} {order} LIMIT 1)"

    # Each step gives the database one bound on the near side, the previous tick: with the window's own
    # start there too, SQLite started every step's range there and read the window's rows up to the
    # previous tick (a second per hundred ticks of 2,000 streams).
    cap = "" if limit is None else " AND t.n < %s"
    sql = (
        f"WITH RECURSIVE t(at, n) AS (SELECT {first(near + far)}, 1 "
        f"UNION ALL SELECT {first([(step, None), *far])}, t.n + 1 FROM t WHERE t.at IS NOT NULL{cap}) "
        "SELECT t.at FROM t WHERE t.at IS NOT NULL"
    )
    params = [resolution, *(value(t) for _, t in near + far), resolution, *(value(t) for _, t in far)]
    return sql, [*params, *([] if limit is None else [limit])]


def in_ticks(model: type[Model], resolution: str, **bounds: Any) -> RawSQL:
    """``at__in=in_ticks(...)``: the rows at the window's ticks (:func:`ticks_sql`'s bounds), which the
    database reads by seeking (resolution, at, object) once per tick and object."""
    return RawSQL(*ticks_sql(model, resolution, **bounds))


def sample_ticks(model: type[Model], resolution: str, **bounds: Any) -> list[datetime]:
    """The distinct ``at`` values of :func:`ticks_sql` as aware date-times (``limit`` defaults to :data:`PAGE`)."""
    bounds.setdefault("limit", PAGE)
    db = _db(model)
    sql, params = ticks_sql(model, resolution, db=db, **bounds)
    field = cast("Field[Any, Any]", model._meta.get_field("at"))  # a concrete date-time field, not a relation
    column = field.get_col(model._meta.db_table)
    converters = [*db.ops.get_db_converters(column), *column.get_db_converters(db)]
    out: list[datetime] = []
    with db.cursor() as cursor:
        cursor.execute(sql, params)
        for (value,) in cursor.fetchall():
            for convert in converters:
                value = convert(value, column, db)
            out.append(value)
    return out


def ticks_back(
    model: type[Model],
    resolution: str,
    *,
    until: datetime,
    first: int = 8,
    growth: int = 4,
    page: int = PAGE * 8,
) -> Iterator[list[datetime]]:
    """Pages of the ticks at or before ``until``, newest first: ``first`` ticks, then each page ``growth``
    times the last, up to ``page``. A walk back that usually ends within a few ticks reads few; the caller
    stops when it has read far enough."""
    bound: dict[str, datetime] = {"until": until}
    size = first
    while True:
        ticks = sample_ticks(model, resolution, newest_first=True, limit=size, **bound)
        if ticks:
            yield ticks
        if len(ticks) < size:
            return
        bound = {"before": ticks[-1]}
        size = min(size * growth, page)


def window_parts(
    model: type[Model], resolution: str, ids: Sequence[int], *, size: int = 500, **bounds: Any
) -> Iterator[tuple[Sequence[int], Sequence[datetime]]]:
    """The (objects, ticks) pairs to read a set of objects' rows of a window by: ``ids`` and the window's
    ticks (:func:`ticks_sql`'s bounds, read once), each in parts of up to ``size``, for a filter
    ``fk__in=objects, at__in=ticks`` per pair. Both lists are spelled out: with two lists of values on the
    key's last columns either database seeks every pair, where with the ticks as a subquery PostgreSQL may
    plan a scan of the table, as its statistics lead it (seen with a window whose rows it thought few)."""
    if not ids:
        return
    ticks = sample_ticks(model, resolution, limit=None, **bounds)
    for ats in chunks(ticks, size):
        for part in chunks(ids, size):
            yield part, ats
