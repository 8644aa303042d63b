"""The database side of a metric snapshot: one connection's tick written by a dozen set-based statements.

At 100k streams a tick writes 300k sample rows and refreshes the mirror's figures of every stream and
group it read; it must fit in the snapshot interval and stay within 1.5x of the Redis read (SPEC section
8). Work per row in Python (a model per row, a SELECT of the mirror to compare figures and find ids, an
``UPDATE`` per changed row) costs more than that, and on PostgreSQL a statement per row costs a round
trip's worth of work per row. So, inside the snapshot's transaction:

1. the tick's facts are staged in two temporary tables, one row per stream and one per group, keyed by
   the hashes the mirror finds them by (:func:`~streams_app.metrics.bulk.temp_table_load`: ``COPY`` on
   PostgreSQL, ``executemany`` on SQLite);
2. one ``UPDATE ... FROM`` per mirror table writes only the rows whose figures differ, or that were
   marked deleted (they are back). A group row whose only change is the idle time of the same idlest
   pending entry is left alone: it grows every tick and the sample has it, so a quiet bus writes no
   mirror row at all;
3. an anti-join names the streams and groups the mirror lacks (none, on a bus that is not growing):
   only those get their display texts and DLQ facts computed here, and are inserted;
4. one ``INSERT ... SELECT`` per sample table takes the ids from the mirror and, for the rates, joins the
   previous tick's samples: ``added`` and ``rate_per_s`` are computed by the database, with the same
   integer arithmetic and the same division of doubles as Python's ``added / seconds``.

Django's ORM says neither ``UPDATE ... FROM`` nor ``INSERT ... SELECT`` over a join, and
``bulk_create(update_conflicts=True)`` needs a model instance per row and rewrites every row every tick
(on PostgreSQL a new row version per stream and group every ten seconds, for autovacuum to clean up);
hence SQL, built from the models' own table and column names and the backend's quoting and conflict
clauses. ``UPDATE ... FROM`` needs SQLite 3.33 or later.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.db import connections, models, router
from django.db.models.constants import OnConflict

from eventbus.conventions import detect_dlq
from streams_app.metrics.bulk import rows_insert, temp_table_drop, temp_table_load
from streams_app.metrics.mirror import (
    GROUP_FIGURES,
    STREAM_FIGURES,
    group_figures,
    stream_figures,
    stream_names,
)
from streams_app.metrics.models import (
    TEXT_MAX,
    DlqSample,
    GroupMirror,
    GroupSample,
    Resolution,
    StreamMirror,
    StreamSample,
    name_hash,
)
from streams_app.redis_ops.conventions import dlq_patterns
from streams_app.redis_ops.decoding import display_text
from streams_app.redis_ops.types import GroupInfo, StreamInfo

__all__ = ["TickWritten", "tick_write"]

STAGED_STREAMS = "busconsole_tick_streams"
STAGED_GROUPS = "busconsole_tick_groups"

_TYPES: dict[type[models.Field], str] = {
    models.BigIntegerField: "bigint",
    models.IntegerField: "bigint",
    models.CharField: "text",
}
#: Figures compared to decide whether a group row is worth a write: all but the idle time (the last).
_GROUP_COMPARED = GROUP_FIGURES[:-1]


@dataclass(frozen=True, slots=True)
class TickWritten:
    streams: int  # stream samples of the tick (one per stream read)
    groups: int  # group samples


def tick_write(
    *, conn: str, streams: Sequence[StreamInfo], tick: datetime, previous_tick: datetime | None, now: datetime
) -> TickWritten:
    """Record ``conn``'s ``streams`` at ``tick`` (call inside the snapshot's transaction).

    Refreshes the mirror's figures (creating the rows of new streams and groups, un-deleting the rows of
    those that came back) and inserts one raw sample per stream, group and DLQ; a sample that exists
    already is kept (``ignore_conflicts``). ``added`` and the rate are counted from the samples of
    ``previous_tick`` (None: no previous tick close enough, both stay None).
    """
    db = connections[router.db_for_write(StreamSample)]
    by_hash = {name_hash(s.key): s for s in streams}
    group_hash: dict[bytes, str] = {}  # group names repeat across streams: hash each once
    groups: dict[tuple[str, str], GroupInfo] = {}
    for h, s in by_hash.items():
        for g in s.groups:
            gh = group_hash.get(g.name)
            if gh is None:
                gh = group_hash[g.name] = name_hash(g.name)
            groups[(h, gh)] = g

    patterns = dlq_patterns()  # the configured conventions, read from the settings once rather than per key
    temp_table_load(db, STAGED_STREAMS, _staged_columns(StreamMirror, ["key_hash"], STREAM_FIGURES, is_dlq="boolean"),
                    [(h, *stream_figures(s), detect_dlq(s.key, patterns) is not None) for h, s in by_hash.items()])
    temp_table_load(db, STAGED_GROUPS, _staged_columns(GroupMirror, ["key_hash", "name_hash"], GROUP_FIGURES),
                    [(h, gh, *group_figures(g)) for (h, gh), g in groups.items()])
    sql = _Statements(db)
    at = db.ops.adapt_datetimefield_value(tick)
    with db.cursor() as cursor, _hash_joins(db):
        cursor.execute(sql.streams_update, [conn])
        cursor.execute(sql.streams_missing, [conn])
        _streams_create(conn, [by_hash[h] for (h,) in cursor.fetchall()], now=now)
        cursor.execute(sql.groups_update, [conn])
        cursor.execute(sql.groups_missing, [conn])
        _groups_create([(stream_id, gh, groups[(h, gh)]) for h, gh, stream_id in cursor.fetchall()], now=now)

        seconds = (tick - previous_tick).total_seconds() if previous_tick is not None else None
        before = db.ops.adapt_datetimefield_value(previous_tick) if previous_tick is not None else None
        raw = Resolution.RAW.value
        # Without a previous tick the join matches nothing (``at = NULL``): every added and rate is NULL.
        cursor.execute(sql.stream_samples, [at, raw, seconds, conn, raw, before])
        cursor.execute(sql.group_samples, [at, raw, conn])
        cursor.execute(sql.dlq_samples, [at, raw, conn])
    temp_table_drop(db, STAGED_GROUPS)
    temp_table_drop(db, STAGED_STREAMS)
    return TickWritten(streams=len(by_hash), groups=len(groups))


@contextmanager
def _hash_joins(db: Any) -> Iterator[None]:
    """On PostgreSQL, no nested-loop joins for the block (the setting is put back after it).

    The statistics of the sample tables always lag the newest tick (its rows came after autovacuum's
    last ``ANALYZE``), so the planner takes the previous tick for a handful of rows and joins it by a
    nested loop over a materialized scan: quadratic, seconds at 10k streams. Statements over a whole
    tick want hash joins anyway. SQLite has only nested loops and picks the unique indexes by itself.
    """
    if db.vendor != "postgresql":
        yield
        return
    with db.cursor() as cursor:
        cursor.execute("SELECT current_setting('enable_nestloop')")
        (was,) = cursor.fetchone()
        cursor.execute("SELECT set_config('enable_nestloop', 'off', true)")  # true: this transaction only
        try:
            yield
        finally:
            cursor.execute("SELECT set_config('enable_nestloop', %s, true)", [was])


def _staged_columns(
    model: type[models.Model], hashes: Sequence[str], figures: Sequence[str], **extra: str
) -> list[tuple[str, str]]:
    """A staging table's columns: the hashes, the mirror's figures (same names and types), then ``extra``."""
    meta = model._meta
    figure_columns = [(meta.get_field(f).column, _TYPES[type(meta.get_field(f))]) for f in figures]
    return [*((h, "text") for h in hashes), *figure_columns, *extra.items()]


def _streams_create(conn: str, streams: Sequence[StreamInfo], *, now: datetime) -> None:
    """Mirror rows for streams seen for the first time (a concurrent run may have created some: ignored)."""
    rows = [(conn, s.key, name_hash(s.key), now, *stream_names(s.key), *stream_figures(s), now, now) for s in streams]
    rows_insert(
        StreamMirror,
        ["connection", "key", "key_hash", "synced_at", "key_text", "is_dlq", "dlq_convention", "dlq_sources",
         *STREAM_FIGURES, "first_seen", "last_seen"],
        rows, ignore_conflicts=True,
    )


def _groups_create(groups: Sequence[tuple[int, str, GroupInfo]], *, now: datetime) -> None:
    """Mirror rows for groups seen for the first time: (stream id, name hash, facts) each."""
    rows = [(stream_id, g.name, gh, display_text(g.name)[:TEXT_MAX], *group_figures(g), now, now)
            for stream_id, gh, g in groups]
    rows_insert(GroupMirror, ["stream_id", "name", "name_hash", "name_text", *GROUP_FIGURES, "first_seen", "last_seen"],
                rows, ignore_conflicts=True)


class _Statements:
    """The tick's SQL for one database, from the models' tables and columns (parameters are ``%s``)."""

    def __init__(self, db: Any) -> None:
        qn = db.ops.quote_name
        differs = "IS NOT" if db.vendor == "sqlite" else "IS DISTINCT FROM"  # NULL-safe inequality

        def table(model: type[models.Model]) -> str:
            return qn(model._meta.db_table)

        def col(model: type[models.Model], field: str) -> str:
            return qn(model._meta.get_field(field).column)

        sm, gm = table(StreamMirror), table(GroupMirror)
        staged_s, staged_g = qn(STAGED_STREAMS), qn(STAGED_GROUPS)
        s_conn, s_hash, s_id = col(StreamMirror, "connection"), col(StreamMirror, "key_hash"), col(StreamMirror, "id")
        g_stream, g_hash, g_id = col(GroupMirror, "stream"), col(GroupMirror, "name_hash"), col(GroupMirror, "id")
        deleted = col(StreamMirror, "deleted_at")
        stream_of = f"{sm} AS m ON m.{s_conn} = %s AND m.{s_hash} = s.key_hash"

        s_figures = [col(StreamMirror, f) for f in STREAM_FIGURES]
        self.streams_update = (
            f"UPDATE {sm} AS m SET {', '.join(f'{c} = s.{c}' for c in s_figures)}, {deleted} = NULL "
            f"FROM {staged_s} AS s WHERE m.{s_conn} = %s AND m.{s_hash} = s.key_hash "
            f"AND (m.{deleted} IS NOT NULL OR {' OR '.join(f'm.{c} {differs} s.{c}' for c in s_figures)})"
        )
        self.streams_missing = (
            f"SELECT s.key_hash FROM {staged_s} AS s "
            f"WHERE NOT EXISTS (SELECT 1 FROM {sm} AS m WHERE m.{s_conn} = %s AND m.{s_hash} = s.key_hash)"
        )
        g_figures = [col(GroupMirror, f) for f in GROUP_FIGURES]
        g_compared = [col(GroupMirror, f) for f in _GROUP_COMPARED]
        g_deleted = col(GroupMirror, "deleted_at")
        self.groups_update = (
            f"UPDATE {gm} AS t SET {', '.join(f'{c} = g.{c}' for c in g_figures)}, {g_deleted} = NULL "
            f"FROM {staged_g} AS g JOIN {sm} AS m ON m.{s_conn} = %s AND m.{s_hash} = g.key_hash "
            f"WHERE t.{g_stream} = m.{s_id} AND t.{g_hash} = g.name_hash "
            f"AND (t.{g_deleted} IS NOT NULL OR {' OR '.join(f't.{c} {differs} g.{c}' for c in g_compared)})"
        )
        self.groups_missing = (
            f"SELECT g.key_hash, g.name_hash, m.{s_id} FROM {staged_g} AS g "
            f"JOIN {sm} AS m ON m.{s_conn} = %s AND m.{s_hash} = g.key_hash "
            f"WHERE NOT EXISTS (SELECT 1 FROM {gm} AS t WHERE t.{g_stream} = m.{s_id} AND t.{g_hash} = g.name_hash)"
        )

        def insert(model: type[models.Model], fields: Sequence[str], select: str) -> str:
            columns = [model._meta.get_field(f) for f in fields]
            return " ".join(filter(None, [
                db.ops.insert_statement(on_conflict=OnConflict.IGNORE),
                f"{table(model)} ({', '.join(qn(f.column) for f in columns)})",
                select,
                db.ops.on_conflict_suffix_sql(columns, OnConflict.IGNORE, None, None),
            ]))

        ss = table(StreamSample)
        p_stream, p_res, p_at = col(StreamSample, "stream"), col(StreamSample, "resolution"), col(StreamSample, "at")
        p_added, p_length = col(StreamSample, "entries_added"), col(StreamSample, "length")
        # Entries added since the previous tick: from Redis 7's entries-added counter (a drop means the
        # stream was deleted and made again: all its entries are new); before Redis 7 only the growth of
        # the length is known, a lower bound. NULL for a stream without a sample at the previous tick.
        added = (
            f"CASE WHEN p.{p_stream} IS NULL THEN NULL "
            f"WHEN s.entries_added IS NOT NULL AND p.{p_added} IS NOT NULL THEN "
            f"CASE WHEN s.entries_added >= p.{p_added} THEN s.entries_added - p.{p_added} ELSE s.entries_added END "
            f"WHEN s.length > p.{p_length} THEN s.length - p.{p_length} ELSE 0 END"
        )
        self.stream_samples = insert(
            StreamSample, ["stream", "at", "resolution", "length", "added", "rate_per_s", "entries_added"],
            f"SELECT x.id, %s, %s, x.length, x.added, "
            f"CAST(x.added AS DOUBLE PRECISION) / CAST(%s AS DOUBLE PRECISION), x.entries_added FROM ("
            f"SELECT m.{s_id} AS id, s.length AS length, s.entries_added AS entries_added, {added} AS added "
            f"FROM {staged_s} AS s JOIN {stream_of} "
            f"LEFT JOIN {ss} AS p ON p.{p_stream} = m.{s_id} AND p.{p_res} = %s AND p.{p_at} = %s) AS x",
        )
        self.group_samples = insert(
            GroupSample, ["group", "at", "resolution", "lag", "pending", "oldest_pending_idle_ms"],
            f"SELECT t.{g_id}, %s, %s, g.lag, g.pending, g.oldest_pending_idle_ms "
            f"FROM {staged_g} AS g JOIN {sm} AS m ON m.{s_conn} = %s AND m.{s_hash} = g.key_hash "
            f"JOIN {gm} AS t ON t.{g_stream} = m.{s_id} AND t.{g_hash} = g.name_hash",
        )
        self.dlq_samples = insert(
            DlqSample, ["stream", "at", "resolution", "depth"],
            f"SELECT m.{s_id}, %s, %s, s.length FROM {staged_s} AS s JOIN {stream_of} WHERE s.is_dlq",
        )
