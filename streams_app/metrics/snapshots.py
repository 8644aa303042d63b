"""Metric snapshots, their rollups and retention, and the series charts read.

Three beat tasks (thin interfaces in :mod:`streams_app.tasks`) call into this module and
:mod:`streams_app.metrics.mirror` (whose :func:`mirror_sync` and :class:`SyncResult` are re-exported here):

- :func:`snapshot_take` records one sample per stream, group and DLQ of every connection for one *tick*,
  the interval-aligned time (:func:`snapshot_tick_for`). The tick's :class:`SnapshotRun` row is unique, so
  two overlapping runs for the same tick write one snapshot; the samples are bulk-inserted with
  ``ignore_conflicts`` under their own unique (object, resolution, at) constraints as a second guard.
  The beat task (:func:`snapshot_take_guarded`) holds a renewable lock for the whole run (renewed by a
  heartbeat, so a run longer than the interval still never overlaps the next; a killed run's lock
  expires after :func:`snapshot_lock_s`), and when its run ended after the next tick began it takes that
  tick at once rather than leaving it to a beat message that found the lock held; a task whose
  catch-up stopped at its limit sends itself again (:func:`snapshot_resume_due`). A tick that still
  gets no run is recorded as a :class:`SnapshotSkip` by the next run that does (the gap between the two
  ticks): the overview and ``/metrics`` show them (:func:`snapshot_health`).
- :func:`samples_downsample` rolls raw samples up into 1-minute and 1-hour rows (averages of length, rate,
  lag, pending and depth; maximum of the longest pending idle time; sum of entries added) and
  :func:`samples_prune` applies the retention: raw rows are deleted only once both rollups cover them.
  Both work in bounded steps within a time budget: a rollup bucket per query, and deletions of at most
  :data:`PRUNE_BATCH` rows per short transaction with a pause between them, so a snapshot's commit never
  waits long behind them; what the budget leaves is done by the next run (every minute).

:func:`series` is what charts read: one metric of one object over a window, at the finest resolution whose
retention still covers the window's start.
"""

from __future__ import annotations

import logging
import math
import time
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import connections, models, router, transaction
from django.db.models import Max, Min
from django.utils import timezone

from busconsole.locks import renewed_lock
from streams_app.live import broadcast
from streams_app.metrics.bulk import insert_select, insert_select_run, temp_table_drop
from streams_app.metrics.mirror import SyncResult, mirror_sync
from streams_app.metrics.models import (
    DlqSample,
    GroupSample,
    MirrorState,
    Resolution,
    SnapshotRun,
    SnapshotSkip,
    StreamMirror,
    StreamSample,
)
from streams_app.metrics.signals import snapshot_taken
from streams_app.metrics.snapshot_write import tick_write
from streams_app.perf.heap import gc_paused
from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops import snapshot_reads
from streams_app.redis_ops.errors import OpsError

__all__ = [
    "SnapshotHealth",
    "SyncResult",
    "mirror_sync",
    "mirror_sync_guarded",
    "samples_downsample",
    "samples_prune",
    "series",
    "series_resolution",
    "snapshot_health",
    "snapshot_resume_due",
    "snapshot_take",
    "snapshot_take_guarded",
    "snapshot_tick_for",
]

log = logging.getLogger(__name__)

#: A rate is computed against the previous tick only if that tick is at most this old.
RATE_MAX_GAP = timedelta(minutes=10)
#: Rollup buckets (per resolution and table) one call of :func:`samples_downsample` may compute.
MAX_BUCKETS = {Resolution.MINUTE: 240, Resolution.HOUR: 6}
BUCKET_SIZE = {Resolution.MINUTE: timedelta(minutes=1), Resolution.HOUR: timedelta(hours=1)}
#: Rows deleted per transaction by :func:`samples_prune`, and the pause between two transactions, which
#: lets a waiting writer (a snapshot's commit) take the database in between.
PRUNE_BATCH = 10_000
PRUNE_PAUSE_S = 0.02
#: The temporary table a rollup bucket is aggregated into on SQLite (:func:`_bucket_write`).
ROLLUP_STAGED = "busconsole_rollup"
#: Runs that start after their tick's end catch up with at most this many ticks each.
CATCH_UP_MAX = 3


# ---------------------------------------------------------------------------------------- snapshots


def snapshot_tick_for(*, now: datetime, interval_s: int | None = None) -> datetime:
    """The tick ``now`` belongs to: ``now`` rounded down to a multiple of the interval (UTC epoch)."""
    interval = interval_s or settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S
    return datetime.fromtimestamp(math.floor(now.timestamp() / interval) * interval, tz=UTC)


def snapshot_take(*, tick: datetime) -> SnapshotRun:
    """Record the samples of ``tick`` for every connection, once: a second call returns the first's run.

    An unreachable connection is recorded in ``run.errors`` and skipped; the others are still sampled.
    The mirror's figures of streams and groups are refreshed on the way (:mod:`.snapshot_write`).
    """
    with gc_paused():
        return _snapshot_take(tick)


def _snapshot_take(tick: datetime) -> SnapshotRun:
    done = SnapshotRun.objects.filter(tick=tick).first()
    if done is not None:
        return done
    started_at = timezone.now()
    t0 = time.perf_counter()
    read: dict[str, snapshot_reads.ServerFacts] = {}
    errors: list[dict[str, str]] = []
    for conn in redis_client.connections():
        try:
            facts = snapshot_reads.server_read(conn.name)
        except OpsError as exc:
            errors.append({"conn": conn.name, "error": exc.message})
            log.warning("snapshot %s: %s", tick.isoformat(), exc.message)
            continue
        read[conn.name] = facts
        missed = getattr(facts, "missed", ())
        if missed:  # a cluster primary did not answer: its streams have no sample this tick
            errors.append({"conn": conn.name, "error": f"partial: not read from {', '.join(missed)}"})
    redis_ms = int((time.perf_counter() - t0) * 1000)

    with transaction.atomic():
        run, created = SnapshotRun.objects.get_or_create(
            tick=tick, defaults={"started_at": started_at, "redis_ms": redis_ms, "errors": errors}
        )
        if not created:  # another run of this tick committed first
            return run
        _record_gap(tick, found_at=started_at)
        previous_tick = _previous_tick(tick)
        streams = groups = 0
        for conn, facts in read.items():
            written = tick_write(
                conn=conn, streams=facts.streams, tick=tick, previous_tick=previous_tick, now=started_at
            )
            streams += written.streams
            groups += written.groups
        run.finished_at = timezone.now()
        run.duration_ms = int((time.perf_counter() - t0) * 1000)
        run.streams = streams
        run.groups = groups
        run.save(update_fields=["finished_at", "duration_ms", "streams", "groups"])
        transaction.on_commit(lambda: _announce(tick, run))
    return run


def _record_gap(tick: datetime, *, found_at: datetime) -> None:
    """Record the ticks between the newest earlier run and ``tick`` that got no run (one row per gap)."""
    interval = settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S
    prev = SnapshotRun.objects.filter(tick__lt=tick).order_by("-tick").values_list("tick", flat=True).first()
    if prev is None:
        return
    missed = round((tick - prev).total_seconds() / interval) - 1
    if missed > 0:
        SnapshotSkip.objects.get_or_create(
            tick=prev + timedelta(seconds=interval),
            defaults={"ticks": missed, "interval_s": interval, "found_at": found_at},
        )
        log.warning("snapshot %s: %d earlier tick(s) were not recorded", tick.isoformat(), missed)


def _previous_tick(tick: datetime) -> datetime | None:
    """The newest recorded tick before ``tick`` if it is at most :data:`RATE_MAX_GAP` old: rates are counted
    against its samples (:mod:`~streams_app.metrics.snapshot_write`)."""
    return (
        SnapshotRun.objects.filter(tick__lt=tick, tick__gte=tick - RATE_MAX_GAP)
        .order_by("-tick")
        .values_list("tick", flat=True)
        .first()
    )


def _announce(tick: datetime, run: SnapshotRun) -> None:
    """After the commit: the signal (alerts), then the channel-layer event (pages). Neither may fail us."""
    for receiver, response in snapshot_taken.send_robust(sender=SnapshotRun, tick=tick, run=run):
        if isinstance(response, Exception):
            log.error("snapshot_taken receiver %r failed", receiver, exc_info=response)
    broadcast.snapshot_broadcast(tick)


# ------------------------------------------------------------------------------- beat task bodies


def snapshot_lock_s(interval_s: int | None = None) -> float:
    """How long a snapshot lock outlives its last renewal: the interval (a killed run costs one tick)."""
    return float(max(5, interval_s or settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S))


def snapshot_take_guarded(
    *, now: datetime, catch_up: bool = False, clock: Callable[[], datetime] = timezone.now
) -> SnapshotRun | None:
    """The beat task's body: the snapshot of ``now``'s tick under the renewable lock (None: another run holds it).

    With ``catch_up`` (the beat task), a run that ended after the next tick began (by ``clock``) takes that
    tick too, at most :data:`CATCH_UP_MAX` times: the beat message of that tick found the lock held and was
    dropped. The lock is renewed by a heartbeat for as long as the runs last.
    """
    interval = settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S
    with renewed_lock("lock:snapshot", timeout_s=snapshot_lock_s(interval)) as held:
        if not held.acquired:
            log.info("snapshot of %s not started: another run holds the lock", now.isoformat())
            return None
        tick = snapshot_tick_for(now=now, interval_s=interval)
        run = snapshot_take(tick=tick)
        for _ in range(CATCH_UP_MAX if catch_up else 0):
            current = snapshot_tick_for(now=clock(), interval_s=interval)
            if current <= tick or held.lost.is_set():
                break
            tick = current
            run = snapshot_take(tick=tick)
        return run


def snapshot_resume_due(run: SnapshotRun | None, *, now: datetime) -> bool:
    """Whether the beat task, whose last run was ``run``, must send itself again at ``now``: a later tick
    is under way, so its catch-up stopped at :data:`CATCH_UP_MAX` runs (or lost the lock).

    That tick's beat message came while the lock was held and was dropped. Without a message of the
    task's own, the tick would be skipped even though every run fits the interval: runs that start
    late in their tick (the beat's phase) each end in the next one, and the catch-up chains them until
    its limit. The limit keeps one task within its time limit; the chain goes on in the next task.
    """
    return run is not None and snapshot_tick_for(now=now) > run.tick


@dataclass(frozen=True, slots=True)
class SnapshotHealth:
    """Whether the snapshots keep up: what the overview's notice and ``/metrics`` say about them."""

    interval_s: int
    last_tick: datetime | None
    last_duration_ms: int | None
    lag_s: float | None  # seconds from the newest recorded tick to now
    skipped_total: int  # ticks missed, as far back as the skip records go
    skipped_recent: int  # ticks missed within the last hour
    last_skip: datetime | None
    rollups_until: datetime | None = None  # where the 1-minute rollups of every sample table end
    rollup_backlog_s: float | None = None  # from there to the newest tick: raw samples not rolled up yet

    @property
    def rollups_behind(self) -> bool:
        """The 1-minute rollups end more than :data:`ROLLUP_BACKLOG_MAX` before the newest tick.

        In the steady state they trail it by the grace (:func:`rollup_grace`) and the minute between two
        retention runs. Raw samples are deleted only once rolled up, so a retention that cannot keep
        up, or that does not run, makes the database grow by every tick's samples.
        """
        return self.rollup_backlog_s is not None and self.rollup_backlog_s > ROLLUP_BACKLOG_MAX.total_seconds()

    @property
    def behind(self) -> bool:
        """The newest tick is more than two intervals old (plus the last run's own duration)."""
        if self.lag_s is None:
            return False
        return self.lag_s > 2 * self.interval_s + (self.last_duration_ms or 0) / 1000

    @property
    def too_slow(self) -> bool:
        """The last run took longer than the interval: the next tick will need a catch-up, or be missed."""
        return self.last_duration_ms is not None and self.last_duration_ms > self.interval_s * 1000


#: The window of :attr:`SnapshotHealth.skipped_recent`.
RECENT = timedelta(hours=1)
#: How far the 1-minute rollups may trail the newest tick before :attr:`SnapshotHealth.rollups_behind`.
ROLLUP_BACKLOG_MAX = timedelta(minutes=15)


def snapshot_health(*, now: datetime | None = None) -> SnapshotHealth:
    """Small queries: the newest finished run, the skip records (one row per gap) and, per sample table,
    where its 1-minute rollups end (:func:`_rollups_until`)."""
    now = now or timezone.now()
    interval = settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S
    run = SnapshotRun.objects.filter(finished_at__isnull=False).order_by("-tick").first()
    total = 0
    recent = 0
    last: datetime | None = None
    for tick, ticks, step in SnapshotSkip.objects.values_list("tick", "ticks", "interval_s"):
        total += ticks
        # the missed ticks are tick + k * step for k < ticks: count those within the window
        first_k = max(0, math.ceil((now - RECENT - tick).total_seconds() / step))
        recent += max(0, ticks - first_k)
        final = tick + timedelta(seconds=step * (ticks - 1))
        last = final if last is None else max(last, final)
    rolled = _rollups_until()
    return SnapshotHealth(
        interval_s=interval,
        last_tick=run.tick if run else None,
        last_duration_ms=run.duration_ms if run else None,
        lag_s=(now - run.tick).total_seconds() if run else None,
        skipped_total=total,
        skipped_recent=recent,
        last_skip=last,
        rollups_until=rolled,
        rollup_backlog_s=max(0.0, (run.tick - rolled).total_seconds()) if run and rolled else None,
    )


def _rollups_until() -> datetime | None:
    """Where the 1-minute rollups of every sample table end: the earliest of the tables' ends, a table
    never rolled up counting from its oldest raw sample (None: no raw sample at all). One lookup per
    table on the (resolution, at) index, two for a table never rolled up."""
    ends = []
    for model in _ROLLUPS:
        end = _rolled_until(model, Resolution.MINUTE)
        if end is None:
            end = model.objects.filter(resolution=Resolution.RAW).aggregate(m=Min("at"))["m"]
        if end is not None:
            ends.append(end)
    return min(ends, default=None)


def mirror_full_due(*, conn: str, now: datetime) -> bool:
    """Whether the next sync of ``conn`` must be a full pass (none yet, or the last one is too old)."""
    full_at = MirrorState.objects.filter(connection=conn).values_list("full_synced_at", flat=True).first()
    return full_at is None or (now - full_at).total_seconds() >= settings.BUSCONSOLE_MIRROR_FULL_EVERY_S


def mirror_sync_guarded(*, now: datetime | None = None) -> dict[str, SyncResult | str] | None:
    """Sync the mirror of every connection under a renewable lock (None: another run holds it).

    Each connection gets a full pass when :func:`mirror_full_due`, else an incremental one. A connection
    that fails is reported by its error text and does not stop the others.
    """
    interval = settings.BUSCONSOLE_MIRROR_INTERVAL_S
    with renewed_lock("lock:mirror-sync", timeout_s=float(max(5, interval))) as held:
        if not held.acquired:
            return None
        out: dict[str, SyncResult | str] = {}
        for conn in redis_client.connections():
            if held.lost.is_set():
                break
            try:
                full = mirror_full_due(conn=conn.name, now=now or timezone.now())
                out[conn.name] = mirror_sync(conn=conn.name, full=full)
            except OpsError as exc:
                log.warning("mirror sync of %s failed: %s", conn.name, exc.message)
                out[conn.name] = exc.message
        return out


# ---------------------------------------------------------------------------- rollups and retention

#: Per table: the foreign key, and how each rolled-up column is rolled up: ``mean`` (of a count: kept as
#: a whole number, rounded half up), ``fmean`` (of a float), ``sum`` or ``max``.
_ROLLUPS: dict[type[models.Model], tuple[str, dict[str, str]]] = {
    StreamSample: ("stream", {"length": "mean", "rate_per_s": "fmean", "added": "sum"}),
    GroupSample: ("group", {"lag": "mean", "pending": "mean", "oldest_pending_idle_ms": "max"}),
    DlqSample: ("stream", {"depth": "mean"}),
}
#: The rows each resolution is rolled up from: minutes from the raw samples, hours from the minutes.
_SOURCE = {Resolution.MINUTE: Resolution.RAW, Resolution.HOUR: Resolution.MINUTE}
_TABLE_NAMES = {StreamSample: "stream", GroupSample: "group", DlqSample: "dlq"}


def _floor(at: datetime, size: timedelta) -> datetime:
    step = size.total_seconds()
    return datetime.fromtimestamp(math.floor(at.timestamp() / step) * step, tz=UTC)


def rollup_grace() -> timedelta:
    """How long after a bucket ends it is rolled up: late snapshot commits land before that."""
    return timedelta(seconds=max(60, 3 * settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S))


def _rolled_until(model: type[models.Model], resolution: str) -> datetime | None:
    """End of the newest rollup bucket: raw rows before it are covered by this resolution."""
    last = model.objects.filter(resolution=resolution).aggregate(m=Max("at"))["m"]
    return last + BUCKET_SIZE[resolution] if last else None


def _aggregate(db: Any, how: str, column: str) -> str:
    """The SQL aggregate of ``column`` for a rollup (``how`` as in :data:`_ROLLUPS`).

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


def _rollup_select(db: Any, model: type[models.Model]) -> tuple[list[str], str]:
    """The fields and the ``SELECT`` of one rollup bucket of ``model``: its rows of one resolution between
    two times, grouped by object. Parameters: the bucket's start and resolution (of the rows it makes),
    then the source's resolution and the bucket's start and end."""
    fk, columns = _ROLLUPS[model]
    meta = model._meta
    qn = db.ops.quote_name
    fk_column, at, resolution = (qn(meta.get_field(f).column) for f in (fk, "at", "resolution"))
    aggregates = ", ".join(_aggregate(db, how, qn(meta.get_field(c).column)) for c, how in columns.items())
    return [fk, "at", "resolution", *columns], (
        f"SELECT {fk_column}, %s, %s, {aggregates} FROM {qn(meta.db_table)} "
        f"WHERE {resolution} = %s AND {at} >= %s AND {at} < %s GROUP BY {fk_column}"
    )


def _bucket_write(db: Any, model: type[models.Model], params: Sequence[Any]) -> int:
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
    model: type[models.Model], resolution: str, *, limit: datetime, deadline: float | None = None
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
    cursor = _rolled_until(model, resolution)
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
    minutes_done: dict[type[models.Model], datetime | None] = {}
    for model, name in _TABLE_NAMES.items():
        made[str(Resolution.MINUTE)][name], minutes_done[model] = _rollup(
            model, Resolution.MINUTE, limit=limit, deadline=deadline
        )
    for model, name in _TABLE_NAMES.items():
        done = minutes_done[model]
        made[str(Resolution.HOUR)][name] = (
            _rollup(model, Resolution.HOUR, limit=min(limit, done), deadline=deadline)[0] if done else 0
        )
    return made


def samples_prune(*, now: datetime, budget_s: float | None = None) -> dict[str, int]:
    """Apply retention at ``now``; returns the rows deleted per table and resolution.

    Raw rows go after BUSCONSOLE_RETENTION_RAW_H hours, but never before both rollups cover them, and
    1-minute rows after _1M_D days, but never before the hours made of them exist (a downsampler that
    fell behind loses nothing); 1-hour rows after _1H_D days. Snapshot runs follow the raw retention,
    skip records the 1-hour one, and mirror rows of things deleted longer ago than the 1-hour retention
    are forgotten with the last of their history.

    Rows go in transactions of at most :data:`PRUNE_BATCH` (see :func:`_prune`), with a short pause
    between two, so the database is never held for long. With ``budget_s`` no batch starts after that
    many seconds; the rest goes on the next run.
    """
    deadline = None if budget_s is None else time.monotonic() + budget_s
    raw_cut = now - timedelta(hours=settings.BUSCONSOLE_RETENTION_RAW_H)
    cuts = {
        Resolution.MINUTE: now - timedelta(days=settings.BUSCONSOLE_RETENTION_1M_D),
        Resolution.HOUR: now - timedelta(days=settings.BUSCONSOLE_RETENTION_1H_D),
    }
    deleted: dict[str, int] = {}
    for model in _ROLLUPS:
        name = _TABLE_NAMES[model]
        covered = {res: _rolled_until(model, res) for res in (Resolution.MINUTE, Resolution.HOUR)}
        if all(covered.values()):
            cut = min(raw_cut, *covered.values())
            deleted[f"{name}.raw"] = _prune(
                model.objects.filter(resolution=Resolution.RAW, at__lt=cut), deadline
            )
        for res, cut in cuts.items():
            if res == Resolution.MINUTE:
                hours = covered[Resolution.HOUR]
                cut = min(cut, hours) if hours else None
            deleted[f"{name}.{res}"] = (
                _prune(model.objects.filter(resolution=res, at__lt=cut), deadline) if cut else 0
            )
    deleted["runs"] = _prune(SnapshotRun.objects.filter(tick__lt=raw_cut), deadline, by="tick")
    deleted["skips"] = _prune(
        SnapshotSkip.objects.filter(tick__lt=cuts[Resolution.HOUR]), deadline, by="tick"
    )
    deleted["mirror"] = 0
    gone = StreamMirror.objects.filter(deleted_at__lt=cuts[Resolution.HOUR])
    for _ in range(1000):  # bounded; each pass forgets at most 100 streams with what little history they kept
        if deadline is not None and time.monotonic() >= deadline:
            break
        ids = list(gone.values_list("id", flat=True)[:100])
        if not ids:
            break
        with transaction.atomic():
            deleted["mirror"] += (
                StreamMirror.objects.filter(pk__in=ids).delete()[1].get(StreamMirror._meta.label, 0)
            )
    return deleted


def _prune(rows: models.QuerySet, deadline: float | None, *, by: str = "at") -> int:
    """Delete ``rows`` (nothing may point at them, no signal listens for them) in short transactions of
    about PRUNE_BATCH rows each, oldest ``by`` (an indexed date-time field) first.

    A batch is one ``DELETE`` whose rows never travel to Python and back:

    * on SQLite, ``DELETE ... WHERE pk IN (SELECT pk ... LIMIT n)``: SQLite has one writer at a time, so
      a batch is at most PRUNE_BATCH rows however many a tick wrote;
    * on PostgreSQL that statement is planned as a hash join over a scan of the whole table, every
      batch, and a deleted row's index entries stay until a vacuum; so a batch is a range of ``by``,
      the oldest PRUNE_BATCH rows and the rest of the tick of the newest of them (``by <=`` its value:
      ``QuerySet.delete`` without anything to collect, one ``DELETE`` of the queryset's filter). Measured
      over a table of 1.2M group samples: a tick's 200k rows in a tenth of a second, where a batch of
      10k ids took as long (and longer as the table grows). A batch this large holds up no other
      writer there: it locks only the rows it deletes, which nothing else writes.
    """
    db = connections[router.db_for_write(rows.model)]
    meta = rows.model._meta
    qn = db.ops.quote_name
    total = 0
    while deadline is None or time.monotonic() < deadline:
        with transaction.atomic(using=db.alias):
            if db.vendor == "postgresql":
                newest = list(rows.order_by(by).values_list(by, flat=True)[PRUNE_BATCH - 1 : PRUNE_BATCH])
                deleted = (rows.filter(**{f"{by}__lte": newest[0]}) if newest else rows).delete()[0]
                last = not newest
            else:
                select, params = rows.values("pk")[:PRUNE_BATCH].query.get_compiler(db.alias).as_sql()
                with db.cursor() as cursor:
                    cursor.execute(
                        f"DELETE FROM {qn(meta.db_table)} WHERE {qn(meta.pk.column)} IN ({select})", params
                    )
                    deleted = cursor.rowcount
                last = deleted < PRUNE_BATCH
        total += deleted
        if last:
            break
        time.sleep(PRUNE_PAUSE_S)  # let a waiting writer in
    return total


# ------------------------------------------------------------------------------------------- series

_SERIES: dict[tuple[str, str], tuple[type[models.Model], str, str]] = {
    ("stream", "length"): (StreamSample, "stream_id", "length"),
    ("stream", "rate"): (StreamSample, "stream_id", "rate_per_s"),
    ("group", "lag"): (GroupSample, "group_id", "lag"),
    ("group", "pending"): (GroupSample, "group_id", "pending"),
    ("group", "oldest_pending_idle_ms"): (GroupSample, "group_id", "oldest_pending_idle_ms"),
    ("dlq", "depth"): (DlqSample, "stream_id", "depth"),
}
SERIES_METRICS = tuple(_SERIES)


def series_resolution(*, since: datetime, now: datetime | None = None) -> str:
    """The finest resolution whose retention still reaches back to ``since``."""
    now = now or timezone.now()
    if since >= now - timedelta(hours=settings.BUSCONSOLE_RETENTION_RAW_H):
        return Resolution.RAW
    if since >= now - timedelta(days=settings.BUSCONSOLE_RETENTION_1M_D):
        return Resolution.MINUTE
    return Resolution.HOUR


def series(
    *, kind: str, obj_id: int, metric: str, since: datetime, until: datetime | None = None
) -> list[tuple[datetime, float | None]]:
    """``[(at, value)]`` of one metric of one object, oldest first.

    ``kind`` is "stream" (metrics "length", "rate"), "group" ("lag", "pending", "oldest_pending_idle_ms": the
    longest idle time among the group's pending entries, named before it was the maximum over the PEL)
    or "dlq" ("depth"; ``obj_id`` is the DLQ's StreamMirror id). None values are gaps (a lag Redis could
    not tell, a rate without a previous tick).
    """
    try:
        model, fk, column = _SERIES[(kind, metric)]
    except KeyError:
        raise ValueError(f"unknown series {kind}/{metric}; known: {SERIES_METRICS}") from None
    rows = model.objects.filter(**{fk: obj_id}, resolution=series_resolution(since=since), at__gte=since)
    if until is not None:
        rows = rows.filter(at__lte=until)
    return [
        (at, None if value is None else float(value))
        for at, value in rows.order_by("at").values_list("at", column)
    ]
