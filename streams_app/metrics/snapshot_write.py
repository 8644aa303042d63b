"""The database side of a metric snapshot: one connection's tick written by a dozen set-based statements.

At 100k streams a tick writes 300k sample rows and refreshes the mirror's figures of every stream and
group it read; it must fit in the snapshot interval and stay within 1.5x of the Redis read
(docs/performance.md#goals-and-floors). Work per row in Python (a model per row, a SELECT of the mirror to compare figures and find ids, an
``UPDATE`` per changed row) costs more than that, and on PostgreSQL a statement per row costs a round
trip's worth of work per row. So, inside the snapshot's transaction:

1. the tick's streams are staged in a temporary table, keyed by the hash the mirror finds them by
   (:func:`~streams_app.metrics.bulk.temp_table_load`: binary ``COPY`` on PostgreSQL, ``executemany``
   on SQLite); the hash and DLQ flag of a key are remembered by the process (:func:`_key_memo`);
2. one ``UPDATE`` puts each staged stream's mirror id in the staged table (looked up by hash once), and
   one ``UPDATE ... FROM`` by those ids writes only the stream rows whose figures differ, or that were
   marked deleted (they are back);
3. one ``INSERT ... SELECT`` takes the staged ids and, for the rates, joins the previous tick's
   samples: ``added`` and ``rate_per_s`` are computed by the database, with the same integer arithmetic
   and the same division of doubles as Python's ``added / seconds``. It is a plain ``INSERT`` (see
   :func:`_samples_insert`), and only when it wrote fewer rows than there are streams does an anti-join
   name the streams the mirror lacks (those without an id: none, on a bus that is not growing): only those get their display
   texts and DLQ facts computed here, are inserted, and get their samples. On PostgreSQL steps 2 and
   3 and the read of the ids below are one statement (:func:`_streams_merged`);
4. the ids of the tick's streams are read back, and its groups staged by (stream id, name hash): their
   statements join the group mirror alone, not the stream mirror by a 64-character hash again. Then
   the same three steps for the groups; a group row whose only change is the idle time of the same
   idlest pending entry is left alone: it grows every tick and the sample has it, so a quiet bus
   writes no mirror row at all. Last, the DLQ samples.

On SQLite the tick runs with larger page caches, on PostgreSQL with in-memory hash joins
(:func:`_sqlite_caches`, :func:`_hash_joins`). Tried and left out: pre-formatted text for ``COPY``
(psycopg's C ``write_row`` is faster), JSON staging through ``json_each`` on SQLite (three times slower
than ``executemany``), overlapping the Redis read with the writes in a thread, and
``synchronous_commit = off`` (no gain measured). What overlaps is the family sums and the groups' staged
rows but their streams' ids (hashes and figures), in a thread beside the streams' statements
(:func:`_beside`).

Django's ORM says neither ``UPDATE ... FROM`` nor ``INSERT ... SELECT`` over a join, and
``bulk_create(update_conflicts=True)`` needs a model instance per row and rewrites every row every tick
(on PostgreSQL a new row version per stream and group every ten seconds, for autovacuum to clean up);
hence SQL, built from the models' own table and column names and the backend's quoting and conflict
clauses. ``UPDATE ... FROM`` needs SQLite 3.33 or later.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator, Sequence
from concurrent.futures import ThreadPoolExecutor
from contextlib import contextmanager
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.db import IntegrityError, connections, models, router, transaction

from eventbus.conventions import DlqPattern, detect_dlq
from eventbus.text import display_text
from streams_app.metrics.bulk import (
    InsertSelect,
    column_of,
    insert_select,
    insert_select_run,
    rows_insert,
    temp_table_drop,
    temp_table_load,
)
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
from streams_app.redis_ops.types import GroupInfo, StreamInfo

__all__ = ["TickWritten", "tick_write"]

STAGED_STREAMS = "busconsole_tick_streams"
STAGED_GROUPS = "busconsole_tick_groups"

_TYPES: dict[type[Any], str] = {
    models.BigIntegerField: "bigint",
    models.IntegerField: "bigint",
    models.CharField: "text",
}
#: Stream keys the process remembers the digest and DLQ flag of (:func:`_key_memo`), and the longest key
#: remembered: 250k keys of 20 bytes take some 65 MB, of the longest twice that.
KEY_MEMO_MAX = 250_000
KEY_MEMO_KEY_MAX = 256
#: The SQLite page caches of a tick (:func:`_sqlite_caches`), in KiB.
SQLITE_CACHE_KIB = 64 * 1024
#: PostgreSQL's ``work_mem`` for the tick's joins (:func:`_hash_joins`): a hash may take it times
#: ``hash_mem_multiplier`` (2 by default); the group mirror's rows of 100k streams (200k groups) take 40 MB.
PG_WORK_MEM = "64MB"
#: Figures compared to decide whether a group row is worth a write: all but the idle time (the last).
_GROUP_COMPARED = GROUP_FIGURES[:-1]


@dataclass(frozen=True, slots=True)
class TickWritten:
    streams: int  # stream samples of the tick (one per stream read)
    groups: int  # group samples


def tick_write(
    *, conn: str, streams: Sequence[StreamInfo], tick: datetime, previous_tick: datetime | None, now: datetime,
    beside: Callable[[], None] | None = None,
) -> TickWritten:
    """Record ``conn``'s ``streams`` at ``tick`` (call inside the snapshot's transaction).

    Refreshes the mirror's figures (creating the rows of new streams and groups, un-deleting the rows of
    those that came back) and inserts one raw sample per stream, group and DLQ; a sample that exists
    already is kept (``ignore_conflicts``). ``added`` and the rate are counted from the samples of
    ``previous_tick`` (None: no previous tick close enough, both stay None).

    ``beside``, work in Python that touches no database (the tick's family sums), runs in a thread of its
    own from the first set-based statement on (:func:`_beside`); it has ended when this returns, and what
    it raised is raised here.
    """
    db = connections[router.db_for_write(StreamSample)]
    patterns = dlq_patterns()  # the configured conventions, read from the settings once rather than per key
    memo = _key_memo(patterns)
    by_hash: dict[str, StreamInfo] = {}
    staged_streams: dict[str, tuple[Any, ...]] = {}  # by hash, as by_hash: a key read twice is staged once
    for s in streams:
        known = memo.get(s.key) or _key_learn(memo, s.key, patterns)
        by_hash[known[0]] = s
        staged_streams[known[0]] = (*known, *stream_figures(s))

    with _sqlite_caches(db), db.cursor() as cursor, _hash_joins(db):
        temp_table_load(
            db,
            STAGED_STREAMS,
            _staged_columns(StreamMirror, ["key_hash", ("is_dlq", "boolean")], STREAM_FIGURES),
            list(staged_streams.values()),
        )
        sql = _Statements(db)
        at = db.ops.adapt_datetimefield_value(tick)
        seconds = (tick - previous_tick).total_seconds() if previous_tick is not None else None
        before = db.ops.adapt_datetimefield_value(previous_tick) if previous_tick is not None else None
        raw = Resolution.RAW.value
        # Without a previous tick the join matches nothing (``at = NULL``): every added and rate is NULL.
        stream_params = [at, raw, seconds, raw, before]  # the values, then the joins
        merged_params = [conn, raw, before, at, raw, seconds]  # the joins (the WITH), then the values
        # The groups' staged rows but their streams' ids, built while the streams' statements run:
        # only the ids wait for those statements.
        tails: dict[str, list[tuple[Any, ...]]] = {}
        with _beside(beside, lambda: tails.update(_group_tails(by_hash))):
            ids = _streams_merged(db, cursor, sql, merged_params)
            if ids is None:  # SQLite, or the merged statement met a sample that exists already
                cursor.execute(sql.streams_id_column)
                cursor.execute(sql.streams_resolve, [conn])
                cursor.execute(sql.streams_update)
                written = _samples_insert(db, cursor, sql.stream_samples, stream_params)
            else:
                written = len(ids)
        if written < len(by_hash):
            if ids is not None:  # PostgreSQL's merged statement: the staged rows have no ids yet
                cursor.execute(sql.streams_id_column)
                cursor.execute(sql.streams_resolve, [conn])
            cursor.execute(sql.streams_missing)
            _streams_create(conn, [by_hash[h] for (h,) in cursor.fetchall()], now=now)
            cursor.execute(f"{sql.streams_resolve} AND s.mirror_id IS NULL", [conn])
            cursor.execute(sql.stream_samples.ignoring, stream_params)
            ids = None  # read again, with the new rows
        if ids is None:
            cursor.execute(sql.streams_ids)
            ids = dict(cursor.fetchall())
        group_rows = _group_rows(tails, ids)

        temp_table_load(
            db,
            STAGED_GROUPS,
            _staged_columns(GroupMirror, [("stream_id", "bigint"), "name_hash"], GROUP_FIGURES),
            group_rows,
        )
        cursor.execute(sql.groups_update)
        if _samples_insert(db, cursor, sql.group_samples, [at, raw]) < len(group_rows):
            groups = _groups_of(by_hash, ids)  # only now: a tick of known groups needs no facts by key
            cursor.execute(sql.groups_missing)
            _groups_create(
                [(stream_id, gh, groups[(stream_id, gh)]) for stream_id, gh in cursor.fetchall()], now=now
            )
            cursor.execute(sql.group_samples.ignoring, [at, raw])
        cursor.execute(sql.dlq_samples.ignoring, [at, raw, conn])
        temp_table_drop(db, STAGED_GROUPS)
        temp_table_drop(db, STAGED_STREAMS)
    return TickWritten(streams=len(by_hash), groups=len(group_rows))


@contextmanager
def _beside(*work: Callable[[], None] | None) -> Iterator[None]:
    """Run ``work`` (the functions given, in order; None skipped) in a thread while the block runs; the
    block's end waits for it and raises its error.

    The block is the streams' set-based statements, which run in SQLite's C code or PostgreSQL's server
    with the GIL released, while the client has nothing to do: Python work of the tick that needs no
    database (the family sums, the groups' rows but their ids) fits there instead of after the writes.
    Started earlier it would only share the GIL with the tick's own Python (the staging), and
    ``executemany`` gives the GIL up for each row, then waits a switch interval to get it back.
    """
    steps = [step for step in work if step is not None]
    if not steps:
        yield
        return

    def run() -> None:
        for step in steps:
            step()

    with ThreadPoolExecutor(max_workers=1, thread_name_prefix="snapshot-beside") as pool:
        done = pool.submit(run)
        yield
    done.result()  # the pool has waited for it; its error, if any, is raised here


def _streams_merged(db: Any, cursor: Any, sql: _Statements, params: Sequence[Any]) -> dict[str, int] | None:
    """On PostgreSQL, the streams' refresh, samples and ids in one statement: (key hash, mirror id) of
    each staged stream the mirror has. None on SQLite, or when the statement met a sample that exists
    already: nothing it did is kept, and the caller runs the separate statements (a conflict is rare,
    see :func:`_samples_insert`).

    The separate statements (refresh, samples, ids) join the staged streams to the mirror by a
    64-character hash three times over, each a noticeable part of a tick at 100k streams
    (docs/performance.md#figures-behind-the-design). Here a ``WITH`` materializes
    that join once, with the previous samples and a flag for the rows whose figures changed; a
    data-modifying ``WITH`` writes the changed mirror rows from it, another inserts the samples, and
    the statement returns the ids. All its parts see the same snapshot, and the ``UPDATE`` and the
    ``INSERT`` write different tables. SQLite has no data-modifying ``WITH``. (The groups' two
    statements were measured merged the same way: the 200k materialized rows cost what the second
    join saved.)
    """
    if sql.streams_merged is None:
        return None
    try:
        with transaction.atomic(using=db.alias):
            cursor.execute(sql.streams_merged, params)
    except IntegrityError:
        return None
    return dict(cursor.fetchall())


def _group_tails(by_hash: dict[str, StreamInfo]) -> dict[str, list[tuple[Any, ...]]]:
    """The staged rows of the streams' groups without their first column, by the stream's key hash: the
    name's hash and the figures, for :func:`_group_rows` to put the stream's mirror id in front of.
    Built in :func:`_beside`'s thread while the streams' statements run (hashing and reading the figures
    of 200k groups at 100k streams is most of the groups' Python). The walk is written out here and in
    :func:`_groups_of` rather than shared through a generator: this one runs every tick over every
    group, and a generator would add a resumption per group to it."""
    group_hash: dict[bytes, str] = {}  # group names repeat across streams: hash each once
    tails: dict[str, list[tuple[Any, ...]]] = {}
    for h, s in by_hash.items():
        rows = tails[h] = []
        for g in s.groups:
            gh = group_hash.get(g.name)
            if gh is None:
                gh = group_hash[g.name] = name_hash(g.name)
            rows.append((gh, *group_figures(g)))
    return tails


def _group_rows(tails: dict[str, list[tuple[Any, ...]]], ids: dict[str, int]) -> list[tuple[Any, ...]]:
    """The staged rows of the groups: (the stream's mirror id, the name's hash, the figures), from
    :func:`_group_tails`; a stream without an id is left out, as :func:`_groups_of` leaves it."""
    rows: list[tuple[Any, ...]] = []
    append = rows.append
    for h, stream_tails in tails.items():
        stream_id = ids.get(h)
        if stream_id is None:
            continue
        head = (stream_id,)
        for tail in stream_tails:
            append(head + tail)
    return rows


def _groups_of(by_hash: dict[str, StreamInfo], ids: dict[str, int]) -> dict[tuple[int, str], GroupInfo]:
    """The groups of the streams, by (the stream's mirror id, the name's hash).

    ``ids`` (key hash -> mirror id) was read in this transaction after the stream rows were refreshed
    and created, and every stream row of the tick was read or written by it, so an id stays valid to
    its end: a mirror row is deleted only by retention, once the stream has been marked deleted for a
    long time, and a row this tick un-deleted is locked by its ``UPDATE``. A stream without an id (its
    row went between two statements) is left out, as the joins of the staged streams leave it.
    """
    group_hash: dict[bytes, str] = {}  # group names repeat across streams: hash each once
    groups: dict[tuple[int, str], GroupInfo] = {}
    for h, s in by_hash.items():
        stream_id = ids.get(h)
        if stream_id is None:
            continue
        for g in s.groups:
            gh = group_hash.get(g.name)
            if gh is None:
                gh = group_hash[g.name] = name_hash(g.name)
            groups[(stream_id, gh)] = g
    return groups


def _key_memo(patterns: tuple[DlqPattern, ...]) -> dict[bytes, tuple[str, bool]]:
    """The process's memo of stream keys: key bytes -> (:func:`name_hash`, whether a DLQ under ``patterns``).

    Both are pure functions of the key's bytes and the configured conventions, so the memo stays true
    across ticks whatever other processes do to the mirror (it holds no database id): it is only
    emptied when the conventions change. Hashing and matching 100k keys cost a tenth of a second a
    tick; the lookups a hundredth. Bounded by :func:`_key_learn`.
    """
    if _KEY_MEMO.patterns != patterns:
        _KEY_MEMO.patterns = patterns
        _KEY_MEMO.facts = {}
    return _KEY_MEMO.facts


def _key_learn(
    memo: dict[bytes, tuple[str, bool]], key: bytes, patterns: tuple[DlqPattern, ...]
) -> tuple[str, bool]:
    """Compute a key's facts and remember them, unless the key is long (a rare key of a megabyte would
    stay in memory for nothing); a memo that reached :data:`KEY_MEMO_MAX` keys starts over."""
    known = (name_hash(key), detect_dlq(key, patterns) is not None)
    if len(key) <= KEY_MEMO_KEY_MAX:
        if len(memo) >= KEY_MEMO_MAX:
            memo.clear()
        memo[key] = known
    return known


@dataclass(slots=True)
class _KeyMemo:
    patterns: tuple[DlqPattern, ...] | None = None
    facts: dict[bytes, tuple[str, bool]] = field(default_factory=dict)


_KEY_MEMO = _KeyMemo()


@contextmanager
def _sqlite_caches(db: Any) -> Iterator[None]:
    """On SQLite, page caches of :data:`SQLITE_CACHE_KIB` for the main and the temporary database for the
    block (the sizes are put back after it, which frees the pages beyond them).

    The default cache (2 MiB) holds a fraction of what a tick of 100k streams touches: the staged
    tables (tens of MiB) spill to a temporary file and the mirror's and samples' index pages are read
    back from the OS for every statement; with the larger caches the tick's statements cost a third
    less. PostgreSQL has its shared buffers.
    """
    if db.vendor != "sqlite":
        yield
        return
    with db.cursor() as cursor:
        was = {}
        for schema in ("main", "temp"):
            cursor.execute(f"PRAGMA {schema}.cache_size")
            (was[schema],) = cursor.fetchone()
            cursor.execute(f"PRAGMA {schema}.cache_size = {-SQLITE_CACHE_KIB}")
        try:
            yield
        finally:
            for schema, size in was.items():
                cursor.execute(f"PRAGMA {schema}.cache_size = {int(size)}")


def _samples_insert(db: Any, cursor: Any, sql: InsertSelect, params: Sequence[Any]) -> int:
    """Run a sample ``INSERT ... SELECT`` (:func:`~streams_app.metrics.bulk.insert_select_run`: the plain
    ``INSERT`` first); returns the rows inserted.

    A conflict is rare: nothing else writes raw samples of a tick while its
    :class:`~streams_app.metrics.models.SnapshotRun` row, created in this transaction, is uncommitted
    (a concurrent run of the tick waits on that row's unique index, then finds the run and writes
    nothing), so only samples left by a run of the tick that retention has since forgotten meet one.
    Ignoring conflicts from the start would cost over a second a tick at 100k streams on PostgreSQL.
    """
    return insert_select_run(db, cursor, sql, params)


@contextmanager
def _hash_joins(db: Any) -> Iterator[None]:
    """On PostgreSQL, hash joins in memory for the block: no nested loops, and :data:`PG_WORK_MEM` per hash
    (both settings are put back after it).

    The statistics of the sample tables always lag the newest tick (its rows came after autovacuum's
    last ``ANALYZE``), so the planner takes the previous tick for a handful of rows and joins it by a
    nested loop over a materialized scan: quadratic, seconds at 10k streams. Statements over a whole
    tick want hash joins anyway, and the default ``work_mem`` (4 MB) holds the hash of some 40k group
    rows: beyond that each join spills its batches to temporary files. SQLite has only nested loops
    and picks the unique indexes by itself.
    """
    if db.vendor != "postgresql":
        yield
        return
    settings = {"enable_nestloop": "off", "work_mem": PG_WORK_MEM}
    with db.cursor() as cursor:
        was = {}
        for name, value in settings.items():
            cursor.execute("SELECT current_setting(%s)", [name])
            (was[name],) = cursor.fetchone()
            cursor.execute("SELECT set_config(%s, %s, true)", [name, value])  # true: this transaction only
        yield
        # Put back only after success: after an error the transaction is aborted, where any statement
        # fails ("current transaction is aborted") and would hide the real error; and the settings,
        # local to the transaction, go with its rollback anyway.
        for name, value in was.items():
            cursor.execute("SELECT set_config(%s, %s, true)", [name, value])


def _staged_columns(
    model: type[models.Model], keys: Sequence[str | tuple[str, str]], figures: Sequence[str]
) -> list[tuple[str, str]]:
    """A staging table's columns: the ``keys`` (a name is a text column, else name and SQL type), then the
    mirror's figures (same names and types)."""
    meta = model._meta
    figure_columns = [(column_of(model, f), _TYPES[type(meta.get_field(f))]) for f in figures]
    return [*((k, "text") if isinstance(k, str) else k for k in keys), *figure_columns]


def _streams_create(conn: str, streams: Sequence[StreamInfo], *, now: datetime) -> None:
    """Mirror rows for streams seen for the first time (a concurrent run may have created some: ignored)."""
    rows = [
        (conn, s.key, name_hash(s.key), now, *stream_names(s.key), *stream_figures(s), now, now)
        for s in streams
    ]
    rows_insert(
        StreamMirror,
        [
            "connection",
            "key",
            "key_hash",
            "synced_at",
            "key_text",
            "is_dlq",
            "dlq_convention",
            "dlq_sources",
            *STREAM_FIGURES,
            "first_seen",
            "last_seen",
        ],
        rows,
        ignore_conflicts=True,
    )


def _groups_create(groups: Sequence[tuple[int, str, GroupInfo]], *, now: datetime) -> None:
    """Mirror rows for groups seen for the first time: (stream id, name hash, facts) each."""
    rows = [
        (stream_id, g.name, gh, display_text(g.name)[:TEXT_MAX], *group_figures(g), now, now)
        for stream_id, gh, g in groups
    ]
    rows_insert(
        GroupMirror,
        ["stream_id", "name", "name_hash", "name_text", *GROUP_FIGURES, "first_seen", "last_seen"],
        rows,
        ignore_conflicts=True,
    )


class _Statements:
    """The tick's SQL for one database, from the models' tables and columns (parameters are ``%s``)."""

    def __init__(self, db: Any) -> None:
        qn = db.ops.quote_name
        differs = "IS NOT" if db.vendor == "sqlite" else "IS DISTINCT FROM"  # NULL-safe inequality

        def table(model: type[models.Model]) -> str:
            return qn(model._meta.db_table)

        def col(model: type[models.Model], field: str) -> str:
            return qn(column_of(model, field))

        sm, gm = table(StreamMirror), table(GroupMirror)
        staged_s, staged_g = qn(STAGED_STREAMS), qn(STAGED_GROUPS)
        s_conn, s_hash, s_id = (
            col(StreamMirror, "connection"),
            col(StreamMirror, "key_hash"),
            col(StreamMirror, "id"),
        )
        g_stream, g_hash, g_id = (
            col(GroupMirror, "stream"),
            col(GroupMirror, "name_hash"),
            col(GroupMirror, "id"),
        )
        deleted = col(StreamMirror, "deleted_at")
        stream_of = f"{sm} AS m ON m.{s_conn} = %s AND m.{s_hash} = s.key_hash"

        s_figures = [col(StreamMirror, f) for f in STREAM_FIGURES]
        stream_changed = (
            f"(m.{deleted} IS NOT NULL OR {' OR '.join(f'm.{c} {differs} s.{c}' for c in s_figures)})"
        )
        # Where the merged statement is not run (SQLite; see :func:`_streams_merged`), the staged streams'
        # mirror ids are looked up by hash once, into a column of the staged table, and the refresh, the
        # samples and the ids go by id: a lookup in the (connection, 64-character hash) index costs more
        # than one by rowid, and the separate statements made three of them.
        self.streams_id_column = f"ALTER TABLE {staged_s} ADD COLUMN mirror_id bigint"
        self.streams_resolve = (
            f"UPDATE {staged_s} AS s SET mirror_id = (SELECT m.{s_id} FROM {sm} AS m "
            f"WHERE m.{s_conn} = %s AND m.{s_hash} = s.key_hash) WHERE TRUE"
        )
        self.streams_update = (
            f"UPDATE {sm} AS m SET {', '.join(f'{c} = s.{c}' for c in s_figures)}, {deleted} = NULL "
            f"FROM {staged_s} AS s WHERE m.{s_id} = s.mirror_id AND {stream_changed}"
        )
        self.streams_missing = f"SELECT s.key_hash FROM {staged_s} AS s WHERE s.mirror_id IS NULL"
        self.streams_ids = f"SELECT s.key_hash, s.mirror_id FROM {staged_s} AS s WHERE s.mirror_id IS NOT NULL"
        g_figures = [col(GroupMirror, f) for f in GROUP_FIGURES]
        g_compared = [col(GroupMirror, f) for f in _GROUP_COMPARED]
        g_deleted = col(GroupMirror, "deleted_at")
        group_of = f"t.{g_stream} = g.stream_id AND t.{g_hash} = g.name_hash"
        self.groups_update = (
            f"UPDATE {gm} AS t SET {', '.join(f'{c} = g.{c}' for c in g_figures)}, {g_deleted} = NULL "
            f"FROM {staged_g} AS g WHERE {group_of} "
            f"AND (t.{g_deleted} IS NOT NULL OR {' OR '.join(f't.{c} {differs} g.{c}' for c in g_compared)})"
        )
        self.groups_missing = (
            f"SELECT g.stream_id, g.name_hash FROM {staged_g} AS g "
            f"WHERE NOT EXISTS (SELECT 1 FROM {gm} AS t WHERE {group_of})"
        )

        def insert(model: type[models.Model], fields: Sequence[str], select: str) -> InsertSelect:
            return insert_select(db, model, fields, select)

        ss = table(StreamSample)
        p_stream, p_res, p_at = (
            col(StreamSample, "stream"),
            col(StreamSample, "resolution"),
            col(StreamSample, "at"),
        )
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
        stream_values = (
            "SELECT x.id, %s, %s, x.length, x.added, "
            "CAST(x.added AS DOUBLE PRECISION) / CAST(%s AS DOUBLE PRECISION), x.entries_added FROM "
        )
        with_previous = (
            f"FROM {staged_s} AS s JOIN {stream_of} "
            f"LEFT JOIN {ss} AS p ON p.{p_stream} = m.{s_id} AND p.{p_res} = %s AND p.{p_at} = %s"
        )
        self.stream_samples = insert(
            StreamSample,
            ["stream", "at", "resolution", "length", "added", "rate_per_s", "entries_added"],
            f"{stream_values}(SELECT s.mirror_id AS id, s.length AS length, s.entries_added AS entries_added, "
            f"{added} AS added FROM {staged_s} AS s "
            f"LEFT JOIN {ss} AS p ON p.{p_stream} = s.mirror_id AND p.{p_res} = %s AND p.{p_at} = %s "
            "WHERE s.mirror_id IS NOT NULL) AS x",
        )
        self.group_samples = insert(
            GroupSample,
            ["group", "at", "resolution", "lag", "pending", "oldest_pending_idle_ms"],
            f"SELECT t.{g_id}, %s, %s, g.lag, g.pending, g.oldest_pending_idle_ms "
            f"FROM {staged_g} AS g JOIN {gm} AS t ON {group_of}",
        )
        # PostgreSQL: the three statements of the streams in one (see :func:`_streams_merged`).
        self.streams_merged: str | None = None
        if db.vendor == "postgresql":
            self.streams_merged = (
                f"WITH x AS MATERIALIZED (SELECT m.{s_id} AS id, s.key_hash AS key_hash, "
                f"{', '.join(f's.{c} AS {c}' for c in s_figures)}, {added} AS added, "
                f"{stream_changed} AS changed {with_previous}), "
                f"u AS (UPDATE {sm} AS m SET {', '.join(f'{c} = x.{c}' for c in s_figures)}, {deleted} = NULL "
                f"FROM x WHERE m.{s_id} = x.id AND x.changed), "
                f"i AS (INSERT INTO {self.stream_samples.into} {stream_values}x) "
                "SELECT x.key_hash, x.id FROM x"
            )
        self.dlq_samples = insert(
            DlqSample,
            ["stream", "at", "resolution", "depth"],
            f"SELECT m.{s_id}, %s, %s, s.length FROM {staged_s} AS s JOIN {stream_of} WHERE s.is_dlq",
        )
