"""Export the bus's history to the Parquet lake: incremental, bounded, crash-safe.

Redis keeps what a stream's MAXLEN allows; the lake (:mod:`pipeline.lake`) keeps everything the
exporter saw, for the Spark jobs. For every stream of every connection (``SCAN ... TYPE stream``):

* **Incremental.** :class:`~streams_app.models.ExportCheckpoint` holds the last exported ID; a run reads
  from just after it with ``XRANGE (<last> + COUNT n``. A stream whose newest ID is not past its
  checkpoint costs no XRANGE at all.
* **Bounded memory.** ``COUNT`` adapts so one reply stays near :data:`REPLY_BYTES`, and a *chunk* (the
  replies written to one set of files) ends once it reaches ``chunk_rows`` entries or :data:`CHUNK_BYTES`,
  whatever the stream's length or entry size. The next reply is asked for before one is converted
  (:func:`~streams_app.redis_ops.ranges.range_pages`), so Redis reads it meanwhile.
* **Crash-safe, exactly once.** Per chunk: (1) record the files about to be written in the checkpoint's
  ``pending``, (2) write each file to a temp name and rename it (:meth:`pipeline.lake.Lake.write`),
  (3) move ``last_id`` and clear ``pending`` in one UPDATE. A run killed after (1) leaves ``pending`` set;
  the next run deletes those files first, then exports from ``last_id`` again. File names are the
  chunk's ID range per day, so the redo writes the same names when the stream did not grow meanwhile,
  and removes the stale ones when it did: either way every entry is in exactly one file.
* Two exporters must not interleave on one stream, so whole runs take :class:`PipelineLock`.

Beside the raw entries (``entries``), ``eventbus:metrics`` is also written with typed columns
(``metrics``) and every DLQ the console recognises (:func:`conventions.detect_dlq`, all conventions) with
its parsed facts (``dlq``), in the same chunk and under the same checkpoint. The metric snapshot tables
are exported by time (:mod:`streams_app.lake.tables`).

On a Redis Cluster the streams are found on every primary (the SCAN pages walk them one after another)
and each stream is read from its own node. A primary that does not answer is reported in the run's
``failed`` list, its streams left for the next run (their checkpoints do not move), and only its own
streams are skipped for the rest of the run, not the whole connection.

This module reads Redis only through ``redis_ops``: the streams by SCAN pages (``reads``), their
entries as raw XRANGE pages (:func:`~streams_app.redis_ops.ranges.range_pages`, never ``XRANGE - +``
without ``COUNT``), every failure an :class:`~streams_app.redis_ops.errors.OpsError`.
"""

from __future__ import annotations

import contextlib
import gc
import logging
import multiprocessing
import os
import time
from collections import deque
from collections.abc import Iterator, Sequence
from concurrent.futures import FIRST_COMPLETED, Future, ProcessPoolExecutor, wait
from contextlib import contextmanager
from dataclasses import dataclass
from datetime import datetime
from typing import Any

import pyarrow as pa
from django.conf import settings
from django.utils import timezone

from busconsole.locks import LockError, renewable_lock
from eventbus.keys import is_metrics_key
from eventbus.text import display_text
from pipeline import compact as compaction
from pipeline import convert, lake
from streams_app.lake import worker
from streams_app.lake.checkpoints import (
    ExportStats,
    ProgressFn,
    WrittenFn,
    checkpoint_clear_pending,
    checkpoint_get,
)
from streams_app.lake.models import ExportCheckpoint
from streams_app.lake.tables import export_tables
from streams_app.masking.apply import masker_cached, rules_load
from streams_app.perf.heap import gc_paused
from streams_app.redis_ops import conventions
from streams_app.redis_ops.client import connections
from streams_app.redis_ops.commands import node_of
from streams_app.redis_ops.errors import OpsError, Unreachable
from streams_app.redis_ops.ids import parse_id, parse_position
from streams_app.redis_ops.ranges import range_pages
from streams_app.redis_ops.reads import streams as stream_reads
from streams_app.redis_ops.reads.limits import MAX_PAGE

log = logging.getLogger(__name__)

FIRST_COUNT = 500
"""XRANGE COUNT of a stream's first reply, before its entry size is known."""
MAX_COUNT = 20_000
REPLY_BYTES = 8 * 1024 * 1024
"""COUNT is adapted so one XRANGE reply is about this big (Arrow bytes)."""
CHUNK_ROWS = 250_000
CHUNK_BYTES = 128 * 1024 * 1024
PARALLEL_MIN_ENTRIES = 200_000
"""Below this many entries in the streams looked at, one process exports them (spawning costs ~1 s)."""
LOCK_NAME = "pipeline-lock"  # the key is busconsole:pipeline-lock (busconsole.locks)
LOCK_TIMEOUT_S = 600


class ExportBusy(Exception):
    """Another export or pipeline run holds the lock."""


class PipelineLock:
    """The one-run-at-a-time lock of export and pipeline runs, in the console's Redis.

    It expires :data:`LOCK_TIMEOUT_S` after its holder stopped renewing it (a killed run frees it
    by itself); holders renew after every chunk and every Spark job.
    """

    def __init__(self) -> None:
        self._lock = renewable_lock(LOCK_NAME, timeout_s=LOCK_TIMEOUT_S)

    def acquire(self) -> None:
        if not self._lock.acquire(blocking=False):
            raise ExportBusy("another export or pipeline run is in progress")

    def renew(self) -> None:
        try:
            self._lock.reacquire()
        except LockError as exc:
            raise ExportBusy("the pipeline lock expired and may be held by another run") from exc

    def release(self) -> None:
        with contextlib.suppress(LockError):
            self._lock.release()


@contextmanager
def pipeline_lock() -> Iterator[PipelineLock]:
    lock = PipelineLock()
    lock.acquire()
    try:
        yield lock
    finally:
        lock.release()


def since_id(value: str) -> str:
    """``--since`` (an entry ID, a bare ms time or an ISO-8601 time) as the first ID to export."""
    position = parse_position(value, what="since")
    return f"{position.ms}-{position.seq or 0}"


# ------------------------------------------------------------------------------------------- runs


def export_run(
    *,
    conns: Sequence[str] | None = None,
    match: bytes = b"*",
    since: str | None = None,
    lake_uri: str | None = None,
    tables: bool = True,
    compact: bool = True,
    chunk_rows: int = CHUNK_ROWS,
    workers: int | None = None,
    parallel_min: int = PARALLEL_MIN_ENTRIES,
    now: datetime | None = None,
    on_progress: ProgressFn | None = None,
    on_written: WrittenFn | None = None,
) -> ExportStats:
    """Export new entries of every stream matching ``match`` on ``conns`` (all connections by default),
    then the snapshot tables. Take :func:`pipeline_lock` around it when other runs may start.

    With ``compact`` the partitions this and earlier runs left in several files are then merged
    (:mod:`pipeline.compact`), so a lake exported every few minutes does not grow a file per run.

    With at least ``parallel_min`` entries in the streams to look at, streams are exported by ``workers``
    processes (``BUSCONSOLE_EXPORT_WORKERS``; 0 means one per core, at most 4), this one and ``workers - 1``
    spawned ones: parsing replies and building Arrow arrays hold the GIL, so one process cannot use a
    second core. The workers are spawned
    (a fork of a process running threads may deadlock), so the program calling this needs the usual
    ``if __name__ == "__main__"`` guard, as ``manage.py``, ``celery`` and pytest have.
    """
    started = time.monotonic()
    rules_load()  # the masking rules of this run (one query): every stream is exported masked by them
    uri = lake_uri or settings.BUSCONSOLE_LAKE
    stats = ExportStats()
    first = since_id(since) if since else None
    plan: list[StreamTask] = []
    for conn in conns or [c.name for c in connections()]:
        try:
            found, missed = _streams(conn, match)
        except OpsError as exc:
            stats.failed.append(f"{conn}: {exc.message}")
            continue
        plan += found
        stats.failed += [f"{conn} {node}: did not answer; its streams were not exported" for node in missed]
    count = _workers(workers, plan, parallel_min)
    if count > 1 and on_written is None:
        _export_parallel(uri, plan, since=first, chunk_rows=chunk_rows, workers=count, stats=stats,
                         on_progress=on_progress)
    else:
        unreachable: set[tuple[str, str]] = set()  # (connection, node): a silent node skips only its keys
        for item in plan:
            if (item.conn, item.node) in unreachable:
                continue
            part = export_one(uri, item, since=first, chunk_rows=chunk_rows, on_progress=on_progress,
                              on_written=on_written, base=stats)
            if part.unreachable:
                unreachable.add((item.conn, item.node))
    if compact:
        _compact(uri)
    if tables:
        since_ms = parse_id(first).ms if first else 0
        export_tables(lake.Lake(uri), now=now or timezone.now(), since_ms=since_ms, stats=stats, on_written=on_written)
    stats.seconds = round(time.monotonic() - started, 3)
    if on_progress:
        on_progress(stats)
    return stats


def _compact(uri: str) -> None:
    """Merge small files, leaving alone the partitions of a chunk that a failed stream left pending
    (the next run deletes those files, which must still be where the checkpoint says)."""
    pending = [path for paths in ExportCheckpoint.objects.exclude(pending=[]).values_list("pending", flat=True)
               for path in paths]
    done = compaction.compact(uri, skip=pending)
    if done.partitions:
        log.info("compacted %d partitions of the lake: %d files into %d", done.partitions, done.files_before,
                 done.files_after)


@dataclass(frozen=True, slots=True)
class StreamTask:
    conn: str
    key: bytes
    newest: str | None
    length: int
    node: str = ""  # the primary serving the key (host:port); one node per connection on standalone


@dataclass
class _Part:
    stats: ExportStats
    unreachable: bool = False


def _streams(conn: str, match: bytes) -> tuple[list[StreamTask], tuple[str, ...]]:
    """Every stream matching ``match`` with its newest ID and length, by SCAN pages (no KEYS) over every
    primary, and the primaries that did not answer (their streams wait for the next run)."""
    out: list[StreamTask] = []
    missed: dict[str, None] = {}
    cursor = 0
    while True:
        page = stream_reads.streams_scan(conn, match=match, cursor=cursor, count=MAX_PAGE)
        out += [StreamTask(conn, s.key, s.last_id, s.length, node_of(conn, s.key)) for s in page.streams]
        missed.update(dict.fromkeys(page.missed))
        cursor = page.next_cursor
        if cursor == 0:
            return out, tuple(missed)


def _workers(requested: int | None, plan: list[StreamTask], parallel_min: int) -> int:
    configured = requested if requested is not None else settings.BUSCONSOLE_EXPORT_WORKERS
    count = configured or min(4, os.cpu_count() or 1)
    if len(plan) < 2 or sum(item.length for item in plan) < parallel_min:
        return 1
    return max(1, min(count, len(plan)))


def export_one(
    uri: str,
    item: StreamTask,
    *,
    since: str | None,
    chunk_rows: int,
    on_progress: ProgressFn | None = None,
    on_written: WrittenFn | None = None,
    base: ExportStats | None = None,
) -> _Part:
    """Export one stream, counting into ``base`` (or a new ExportStats); failures are counted, not raised."""
    stats = base if base is not None else ExportStats()
    part = _Part(stats)
    try:
        _export_stream(
            lake.Lake(uri), item.conn, item.key, newest=item.newest, since=since, chunk_rows=chunk_rows,
            stats=stats, on_progress=on_progress, on_written=on_written,
        )
    except Unreachable as exc:
        stats.failed.append(f"{item.conn}: {exc.message}")
        part.unreachable = True
    except (OpsError, pa.ArrowException) as exc:
        message = exc.message if isinstance(exc, OpsError) else str(exc)
        stats.failed.append(f"{item.conn} {display_text(item.key)}: {message}")
        log.warning("export of %s %r failed: %s", item.conn, item.key, message)
    stats.streams += 1
    return part


def _export_parallel(
    uri: str,
    plan: list[StreamTask],
    *,
    since: str | None,
    chunk_rows: int,
    workers: int,
    stats: ExportStats,
    on_progress: ProgressFn | None,
) -> None:
    """Streams spread over ``workers`` processes, longest first: ``workers - 1`` fresh ones (spawned: no
    fork of a threaded process), each reporting a stream's counts back when done, and this one.

    This process exports too, rather than waiting: a spawned worker is a fresh interpreter importing
    and setting Django up, a measurable share of a big export's CPU
    (docs/performance.md#figures-behind-the-design). It hands the workers their next stream between its
    own chunks and streams, one stream ahead of them, so a worker does not wait for it.

    A worker imports :mod:`streams_app.lake.worker` (Django-free) to start, configures Django with its
    ``setup``, and only then imports this module, to unpickle :func:`export_stream`, the first task.
    """
    context = multiprocessing.get_context("spawn")
    todo = deque(sorted(plan, key=lambda item: -item.length))
    spawned = workers - 1
    running: set[Future[ExportStats]] = set()
    with ProcessPoolExecutor(
        max_workers=spawned, mp_context=context, initializer=worker.setup, initargs=(worker.parent_settings(),),
    ) as pool:

        def collect(*, block: bool) -> None:
            done, _ = wait(running, timeout=None if block else 0, return_when=FIRST_COMPLETED)
            for future in done:
                running.discard(future)
                part = future.result()
                for name in ("streams", "entries", "files", "metrics", "dead_letters", "samples"):
                    setattr(stats, name, getattr(stats, name) + getattr(part, name))
                stats.failed += part.failed
                if on_progress:
                    on_progress(stats)  # may raise (a cancelled job): streams not started are dropped

        def hand_out(ahead: int = 1) -> None:
            collect(block=False)
            while todo and len(running) < spawned + ahead:
                item = todo.popleft()
                running.add(pool.submit(export_stream, uri, item.conn, item.key, item.newest, item.length, since,
                                        chunk_rows))

        def progress(_: ExportStats) -> None:  # after each chunk this process wrote
            hand_out()
            if on_progress:
                on_progress(stats)

        try:
            hand_out(ahead=0)
            while todo:
                export_one(uri, todo.popleft(), since=since, chunk_rows=chunk_rows, on_progress=progress,
                           base=stats)
                hand_out()
            while running:
                collect(block=True)
        except BaseException:
            pool.shutdown(wait=True, cancel_futures=True)
            raise


def export_stream(
    uri: str, conn: str, key: bytes, newest: str | None, length: int, since: str | None, chunk_rows: int
) -> ExportStats:
    """One stream, in a worker process of :func:`_export_parallel`: its counts go back to the parent."""
    return export_one(uri, StreamTask(conn, key, newest, length), since=since, chunk_rows=chunk_rows).stats


# ------------------------------------------------------------------------------------------ streams


def _export_stream(
    target: lake.Lake,
    conn: str,
    key: bytes,
    *,
    newest: str | None,
    since: str | None,
    chunk_rows: int,
    stats: ExportStats,
    on_progress: ProgressFn | None,
    on_written: WrittenFn | None,
) -> None:
    checkpoint = checkpoint_get(conn, ExportCheckpoint.Kind.STREAM, key)
    checkpoint_clear_pending(target, checkpoint)
    start = f"({checkpoint.last_id}" if checkpoint.last_id else "-"
    if since and (not checkpoint.last_id or parse_id(since) > parse_id(checkpoint.last_id)):
        start = since
    if newest is None or (checkpoint.last_id and parse_id(newest) <= parse_id(checkpoint.last_id)):
        return  # empty, or nothing new since the last run
    text = display_text(key)
    is_metrics = is_metrics_key(key)
    is_dlq = conventions.detect_dlq(key) is not None
    pieces: list[pa.Table] = []
    metrics: list[pa.Table] = []
    dead: list[pa.Table] = []
    rows = size = 0

    def flush() -> None:
        nonlocal rows, size
        files = _chunk_files(lake.ENTRIES, conn, key, pieces)
        files += _chunk_files(lake.METRICS, conn, None, metrics)
        files += _chunk_files(lake.DLQ, conn, key, dead)
        last_id = pieces[-1].column("entry_id")[-1].as_py()
        _commit_chunk(target, checkpoint, files, last_id=last_id, rows=rows, on_written=on_written)
        stats.entries += rows
        stats.files += len(files)
        stats.metrics += sum(t.num_rows for t in metrics)
        stats.dead_letters += sum(t.num_rows for t in dead)
        pieces.clear()
        metrics.clear()
        dead.clear()
        rows = size = 0
        gc.collect(0)  # the cycles the chunk made, if any: only its young objects are walked
        if on_progress:
            on_progress(stats)

    limit = min(MAX_COUNT, chunk_rows)
    count = min(FIRST_COUNT, limit)  # per page, aimed at REPLY_BYTES by the last page's size
    # Every reply is hundreds of thousands of new objects, which the collector would walk again and again
    # while they are alive: it is paused for the stream (streams_app/perf/heap.py).
    # Masked as the console shows the stream (the rules read once per run, rules_load in export_run and
    # in each worker): the lake, and the reports made from it, hold no value a rule hides.
    masker = masker_cached(conn, key)
    mask = masker.entry if masker.active else None
    with gc_paused(), contextlib.closing(range_pages(conn, key, start, count=lambda: count, mask=mask)) as replies:
        for reply in replies:
            table = convert.entries_table(conn, key, text, reply)
            count = max(1, min(limit, int(REPLY_BYTES * len(reply) / max(table.nbytes, 1))))
            pieces.append(table)
            if is_metrics:
                metrics.append(convert.metrics_table(conn, reply))
            if is_dlq:
                dead.append(_dlq_table(conn, key, text, reply))
            rows += len(reply)
            size += table.nbytes
            if rows >= chunk_rows or size >= CHUNK_BYTES:
                flush()
        if pieces:
            flush()


def _chunk_files(dataset: str, conn: str, key: bytes | None, pieces: list[pa.Table]) -> list[tuple[str, pa.Table]]:
    if not pieces:
        return []
    out = []
    for day, part in convert.split_by_partition(dataset, pa.concat_tables(pieces)):
        ids = part.column("entry_id")
        out.append((lake.entry_file(dataset, conn, key, day, ids[0].as_py(), ids[-1].as_py()), part))
    return out


def _commit_chunk(
    target: lake.Lake,
    checkpoint: ExportCheckpoint,
    files: list[tuple[str, pa.Table]],
    *,
    last_id: str,
    rows: int,
    on_written: WrittenFn | None,
) -> None:
    """Intent, files, checkpoint: the three steps that make a chunk land exactly once."""
    paths = [path for path, _ in files]
    checkpoint.pending = paths
    checkpoint.save(update_fields=["pending", "updated_at"])
    for path, table in files:
        target.write(table, path)
    if on_written:
        on_written(paths)
    checkpoint.last_id = last_id
    checkpoint.exported += rows
    checkpoint.pending = []
    checkpoint.save(update_fields=["last_id", "exported", "pending", "updated_at"])


def _dlq_table(conn: str, key: bytes, key_text: str, reply: convert.Reply) -> pa.Table:
    """DLQ entries parsed by the console's conventions (one Python call per entry: DLQs are small)."""
    cols: dict[str, list[Any]] = {name: [] for name in lake.DLQ_SCHEMA.names}
    for raw_id, flat in reply:
        entry_id = raw_id.decode()
        pairs = list(zip(flat[0::2], flat[1::2], strict=True))
        entry = conventions.parse_dlq_entry(key, entry_id, pairs)
        ms = parse_id(entry_id).ms
        cols["entry_id"].append(entry_id)
        cols["ms"].append(ms)
        cols["convention"].append(entry.convention)
        cols["stream"].append(entry.original_stream)
        cols["stream_text"].append(display_text(entry.original_stream) if entry.original_stream else None)
        cols["original_id"].append(entry.original_id)
        cols["group"].append(entry.group)
        cols["error"].append(entry.error)
        cols["retries"].append(entry.retries if entry.retries is None or abs(entry.retries) < 2**62 else None)
        cols["failed_ms"].append(entry.failed_at_ms)
    n = len(reply)
    ms_array = pa.array(cols["ms"], pa.int64())
    cols.update(
        conn=[conn] * n,
        dlq=[key] * n,
        dlq_text=[key_text] * n,
        ts=ms_array.cast(lake.TS),
        date=pa.array([m // 86_400_000 for m in cols["ms"]], pa.int32()).view(pa.date32()),
        failed_at=pa.array(cols["failed_ms"], pa.int64()).cast(lake.TS),
    )
    return pa.table([cols[name] for name in lake.DLQ_SCHEMA.names], schema=lake.DLQ_SCHEMA)
