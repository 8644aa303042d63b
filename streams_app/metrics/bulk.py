"""Bulk inserts and updates fast enough for a snapshot of ten thousand streams every ten seconds.

Django's ``bulk_create`` prepares every value of every row through the field machinery and
``bulk_update`` builds one ``CASE WHEN id = ...`` expression per field per batch, which SQLite evaluates
branch by branch for each row. For a snapshot's 30k sample rows and 20k changed group rows that cost
several seconds against a budget of two (docs/performance.md#goals-and-floors). These helpers write the same rows with one
``executemany`` per batch and convert only the values that need it (JSON, date-times, bytes); SQL
dialect details (``INSERT OR IGNORE`` / ``ON CONFLICT DO NOTHING``, quoting) come from Django's backend
operations, so they work on SQLite and PostgreSQL alike.

Callers pass values by attribute name (``stream_id``, not ``stream``). No signals are sent and no
``save()`` runs, exactly as with ``bulk_create``/``bulk_update``.

:func:`temp_table_load` stages rows in a temporary table for set-based statements (``UPDATE ... FROM``,
``INSERT ... SELECT``) that Django's ORM cannot express; on PostgreSQL it loads them with a binary ``COPY``,
which costs a fraction of an ``executemany`` (even pipelined, psycopg sends one statement per row).
:func:`insert_select` writes the ``INSERT ... SELECT`` statements of those (a tick's samples from its
staged rows, a rollup bucket from the rows it aggregates), and :func:`insert_select_run` runs one,
ignoring rows that exist already only when it met one.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from dataclasses import dataclass
from typing import Any, cast

from django.db import IntegrityError, connections, models, router, transaction
from django.db.models.constants import OnConflict

#: Rows per ``executemany`` call.
BATCH = 5000
#: Field types whose Python values need the backend's conversion (all others are passed as they are).
_CONVERTED = (
    models.JSONField,
    models.DateTimeField,
    models.DateField,
    models.BinaryField,
    models.DecimalField,
    models.UUIDField,
    models.TimeField,
    models.DurationField,
)


def chunks(items: Sequence, size: int) -> Iterator[Sequence]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


def field_column(field: object) -> str:
    """The column of a concrete field. Django types ``Field.column`` as optional (a relation has none) and
    ``Options.get_field`` as any field or relation; every field these writers name is a concrete column."""
    return cast(str, cast("models.Field[Any, Any]", field).column)


def column_of(model: type[models.Model], name: str) -> str:
    """The column of ``model``'s concrete field ``name``."""
    return field_column(model._meta.get_field(name))


def _fields(model: type[models.Model], attnames: Sequence[str]) -> list[models.Field]:
    by_attname = {f.attname: f for f in model._meta.concrete_fields}
    return [by_attname[name] for name in attnames]


def _converters(fields: Sequence[models.Field], db: Any) -> list[Callable[[Any], Any] | None]:
    return [_converter(field, db) if isinstance(field, _CONVERTED) else None for field in fields]


def _converter(field: models.Field, db: Any) -> Callable[[Any], Any]:
    """The field's conversion, remembered per value for date-times (a snapshot's rows share one tick)."""
    if not isinstance(field, models.DateTimeField):
        return lambda value: field.get_db_prep_save(value, db)
    seen: dict[Any, Any] = {}

    def convert(value: Any) -> Any:
        if value not in seen:
            seen[value] = field.get_db_prep_save(value, db)
        return seen[value]

    return convert


def _prepared(
    rows: Sequence[Sequence[Any]], converters: list[Callable[[Any], Any] | None]
) -> Sequence[Sequence[Any]]:
    """The rows with the converted columns converted, column by column: a snapshot's 300k rows have one
    date-time column among six, and converting only it costs a third of zipping every value of every row."""
    if not any(converters):
        return rows if isinstance(rows, list) else list(rows)
    out = [list(row) for row in rows]
    for i, convert in enumerate(converters):
        if convert is not None:
            for row in out:
                row[i] = convert(row[i])
    return out


def rows_insert(
    model: type[models.Model],
    attnames: Sequence[str],
    rows: Sequence[Sequence[Any]],
    *,
    ignore_conflicts: bool = False,
) -> None:
    """``INSERT`` each row (values in ``attnames`` order); with ``ignore_conflicts`` rows that would break a
    unique constraint are skipped, as ``bulk_create(ignore_conflicts=True)`` does."""
    if not rows:
        return
    db = connections[router.db_for_write(model)]
    qn = db.ops.quote_name
    fields = _fields(model, attnames)
    conflict = OnConflict.IGNORE if ignore_conflicts else None
    sql = " ".join(
        filter(
            None,
            [
                db.ops.insert_statement(on_conflict=conflict),
                f"{qn(model._meta.db_table)} ({', '.join(qn(field_column(f)) for f in fields)})",
                f"VALUES ({', '.join(['%s'] * len(fields))})",
                db.ops.on_conflict_suffix_sql(fields, conflict, None, None),
            ],
        )
    )
    params = _prepared(rows, _converters(fields, db))
    with db.cursor() as cursor:
        for part in chunks(params, BATCH):
            cursor.executemany(sql, part)


@dataclass(frozen=True, slots=True)
class InsertSelect:
    """An ``INSERT ... SELECT`` into a model's table, as is and ignoring rows that exist already
    (:func:`insert_select`, run by :func:`insert_select_run`)."""

    into: str  # the table and its columns
    plain: str
    ignoring: str


def insert_select(db: Any, model: type[models.Model], fields: Sequence[str], select: str) -> InsertSelect:
    """The statements writing the rows of ``select`` (SQL, its columns in ``fields`` order) into ``model``'s table."""
    qn = db.ops.quote_name
    columns = [model._meta.get_field(f) for f in fields]
    into = f"{qn(model._meta.db_table)} ({', '.join(qn(field_column(f)) for f in columns)})"
    ignoring = [
        db.ops.insert_statement(on_conflict=OnConflict.IGNORE),
        into,
        select,
        db.ops.on_conflict_suffix_sql(columns, OnConflict.IGNORE, None, None),
    ]
    return InsertSelect(
        into=into, plain=f"INSERT INTO {into} {select}", ignoring=" ".join(filter(None, ignoring))
    )


def insert_select_run(db: Any, cursor: Any, statement: InsertSelect, params: Sequence[Any]) -> int:
    """Run an :class:`InsertSelect` (inside a transaction); returns the rows inserted.

    The plain ``INSERT`` first, in a savepoint, and only when it breaks a unique constraint the statement
    again ignoring conflicts. The callers write rows that rarely exist already (a snapshot's samples, a
    rollup bucket), and on PostgreSQL ``ON CONFLICT DO NOTHING`` costs two thirds more per row: a probe
    of the unique index before the heap insert, a speculative insertion and its confirmation in the WAL.
    """
    try:
        with transaction.atomic(using=db.alias):
            cursor.execute(statement.plain, params)
    except IntegrityError:
        cursor.execute(statement.ignoring, params)
    return cursor.rowcount


def temp_table_load(
    db: Any, name: str, columns: Sequence[tuple[str, str]], rows: Sequence[Sequence[Any]]
) -> None:
    """Create the temporary table ``name`` (``columns``: name and SQL type) on ``db`` and load ``rows`` into it.

    Call inside a transaction and :func:`temp_table_drop` it before the end: on PostgreSQL the table is
    also dropped at the commit (``ON COMMIT DROP``), and on either database a rollback takes it away. A
    table of that name left on this connection by an earlier failure is replaced. Values go in as they
    are (no field conversion): give the types the columns declare (Python ints for integer columns,
    bools for booleans, str for text; the type names must be PostgreSQL's, which SQLite accepts too).
    SQLite and PostgreSQL only.

    No index: the statements that read it scan it once and look each row up in the indexes of the
    permanent tables (SQLite) or hash it (PostgreSQL), so an index would only cost its own writes.
    """
    qn = db.ops.quote_name
    postgres = db.vendor == "postgresql"
    names = ", ".join(qn(column) for column, _ in columns)
    with db.cursor() as cursor:
        temp_table_drop(db, name)
        cursor.execute(
            f"CREATE TEMPORARY TABLE {qn(name)} ({', '.join(f'{qn(c)} {kind}' for c, kind in columns)})"
            f"{' ON COMMIT DROP' if postgres else ''}"
        )
        if postgres:
            # Binary: no text escaping to get right for any value, and half the cost of the text format
            # (psycopg's C dumpers write ints and strings as they are, given the columns' types).
            with cursor.cursor.copy(f"COPY {qn(name)} ({names}) FROM STDIN (FORMAT BINARY)") as copy:
                copy.set_types([kind for _, kind in columns])
                for row in rows:
                    copy.write_row(row)
        else:
            sql = f"INSERT INTO {qn(name)} ({names}) VALUES ({', '.join(['%s'] * len(columns))})"
            for part in chunks(rows, BATCH):
                cursor.executemany(sql, part)


def temp_table_drop(db: Any, name: str) -> None:
    """Drop the temporary table ``name`` if there is one (never a permanent table of the same name)."""
    schema = "pg_temp" if db.vendor == "postgresql" else "temp"
    with db.cursor() as cursor:
        cursor.execute(f"DROP TABLE IF EXISTS {schema}.{db.ops.quote_name(name)}")


def rows_update(
    model: type[models.Model], attnames: Sequence[str], rows: Sequence[tuple[Any, Sequence[Any]]]
) -> None:
    """``UPDATE table SET a = %s, ... WHERE pk = %s`` for each ``(pk, values in attnames order)``."""
    if not rows:
        return
    db = connections[router.db_for_write(model)]
    qn = db.ops.quote_name
    meta = model._meta
    fields = _fields(model, attnames)
    sql = (
        f"UPDATE {qn(meta.db_table)} SET {', '.join(f'{qn(field_column(f))} = %s' for f in fields)} "
        f"WHERE {qn(field_column(meta.pk))} = %s"
    )
    params = [
        [*values, pk]
        for values, pk in zip(
            _prepared([v for _, v in rows], _converters(fields, db)), (pk for pk, _ in rows), strict=True
        )
    ]
    with db.cursor() as cursor:
        for part in chunks(params, BATCH):
            cursor.executemany(sql, part)
