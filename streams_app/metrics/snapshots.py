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
from collections.abc import Callable
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import Avg, Max, Sum
from django.utils import timezone

from busconsole.locks import renewed_lock
from streams_app import signals
from streams_app.live import broadcast
from streams_app.metrics.bulk import gc_paused, rows_delete, rows_insert
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
from streams_app.metrics.snapshot_write import tick_write
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
PRUNE_BATCH = 2000
PRUNE_PAUSE_S = 0.02
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
            written = tick_write(conn=conn, streams=facts.streams, tick=tick, previous_tick=previous_tick,
                                 now=started_at)
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
    for receiver, response in signals.snapshot_taken.send_robust(sender=SnapshotRun, tick=tick, run=run):
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


def snapshot_health(*, now: datetime | None = None) -> SnapshotHealth:
    """Two small queries: the newest finished run, and the skip records (one row per gap)."""
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
    return SnapshotHealth(
        interval_s=interval,
        last_tick=run.tick if run else None,
        last_duration_ms=run.duration_ms if run else None,
        lag_s=(now - run.tick).total_seconds() if run else None,
        skipped_total=total,
        skipped_recent=recent,
        last_skip=last,
    )


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

#: Per table: the foreign key, and per rolled-up column its aggregate.
_ROLLUPS: dict[type[models.Model], tuple[str, dict[str, type[models.Aggregate]]]] = {
    StreamSample: ("stream", {"length": Avg, "rate_per_s": Avg, "added": Sum}),
    GroupSample: ("group", {"lag": Avg, "pending": Avg, "oldest_pending_idle_ms": Max}),
    DlqSample: ("stream", {"depth": Avg}),
}
_FLOAT_COLUMNS = {"rate_per_s"}
_TABLE_NAMES = {StreamSample: "stream", GroupSample: "group", DlqSample: "dlq"}


def _floor(at: datetime, size: timedelta) -> datetime:
    step = size.total_seconds()
    return datetime.fromtimestamp(math.floor(at.timestamp() / step) * step, tz=UTC)


def _rounded(column: str, value: Any) -> Any:
    """Averages of counts are stored as whole numbers, rounded half up; rates stay floats."""
    if value is None or column in _FLOAT_COLUMNS:
        return value
    return math.floor(float(value) + 0.5)


def rollup_grace() -> timedelta:
    """How long after a bucket ends it is rolled up: late snapshot commits land before that."""
    return timedelta(seconds=max(60, 3 * settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S))


def _rolled_until(model: type[models.Model], resolution: str) -> datetime | None:
    """End of the newest rollup bucket: raw rows before it are covered by this resolution."""
    last = model.objects.filter(resolution=resolution).aggregate(m=Max("at"))["m"]
    return last + BUCKET_SIZE[resolution] if last else None


def _rollup(model: type[models.Model], resolution: str, *, limit: datetime, deadline: float | None = None) -> int:
    """Roll raw rows of ``model`` up into ``resolution`` buckets that ended before ``limit``.

    Buckets are taken in time order from the end of the newest rollup, skipping stretches without raw
    rows; one query per bucket, grouped by object. Re-running is harmless (ignore_conflicts).
    """
    fk, aggregates = _ROLLUPS[model]
    size = BUCKET_SIZE[resolution]
    cursor = _rolled_until(model, resolution)
    made = 0
    for _ in range(MAX_BUCKETS[resolution]):
        if deadline is not None and time.monotonic() >= deadline:
            break  # the next run goes on from here
        raw = model.objects.filter(resolution=Resolution.RAW)
        if cursor is not None:
            raw = raw.filter(at__gte=cursor)
        first = raw.order_by("at").values_list("at", flat=True).first()
        if first is None:
            break
        start = _floor(first, size)
        end = start + size
        if end > limit:
            break
        columns = list(aggregates)
        rows = [
            (row[fk], start, str(resolution), *(_rounded(c, row[f"v_{c}"]) for c in columns))
            for row in model.objects.filter(resolution=Resolution.RAW, at__gte=start, at__lt=end)
            .values(fk)
            .annotate(**{f"v_{c}": aggregates[c](c) for c in columns})
            .order_by()
        ]
        rows_insert(model, [f"{fk}_id", "at", "resolution", *columns], rows, ignore_conflicts=True)
        made += len(rows)
        cursor = end
    return made


def samples_downsample(*, now: datetime, budget_s: float | None = None) -> dict[str, dict[str, int]]:
    """Compute the 1-minute and 1-hour rollups due at ``now``: ``{"1m": {"stream": n, ...}, "1h": {...}}``.

    Both are computed from raw samples (so an hour's average weighs every raw sample alike), for buckets
    that ended at least :func:`rollup_grace` ago. With ``budget_s`` no bucket is started after that many
    seconds (each bucket is one query and its insert, in its own short transaction); the next call
    continues where this one stopped, since each resolution resumes from its newest bucket.
    """
    limit = now - rollup_grace()
    deadline = None if budget_s is None else time.monotonic() + budget_s
    return {
        str(resolution): {
            _TABLE_NAMES[model]: _rollup(model, resolution, limit=limit, deadline=deadline) for model in _ROLLUPS
        }
        for resolution in (Resolution.MINUTE, Resolution.HOUR)
    }


def samples_prune(*, now: datetime, budget_s: float | None = None) -> dict[str, int]:
    """Apply retention at ``now``; returns the rows deleted per table and resolution.

    Raw rows go after BUSCONSOLE_RETENTION_RAW_H hours, but never before both rollups cover them (a
    downsampler that fell behind loses nothing); 1-minute rows after _1M_D days, 1-hour rows after _1H_D
    days. Snapshot runs follow the raw retention, skip records the 1-hour one, and mirror rows of things
    deleted longer ago than the 1-hour retention are forgotten with the last of their history.

    Rows go in transactions of at most :data:`PRUNE_BATCH` (found through the (resolution, at) index),
    with a short pause between two, so the database is never held for long. With ``budget_s`` no batch
    starts after that many seconds; the rest goes on the next run.
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
        covered = [_rolled_until(model, res) for res in (Resolution.MINUTE, Resolution.HOUR)]
        if all(covered):
            cut = min(raw_cut, *covered)
            deleted[f"{name}.raw"] = _prune(model.objects.filter(resolution=Resolution.RAW, at__lt=cut), deadline)
        for res, cut in cuts.items():
            deleted[f"{name}.{res}"] = _prune(model.objects.filter(resolution=res, at__lt=cut), deadline)
    deleted["runs"] = _prune(SnapshotRun.objects.filter(tick__lt=raw_cut), deadline)
    deleted["skips"] = _prune(SnapshotSkip.objects.filter(tick__lt=cuts[Resolution.HOUR]), deadline)
    deleted["mirror"] = 0
    gone = StreamMirror.objects.filter(deleted_at__lt=cuts[Resolution.HOUR])
    for _ in range(1000):  # bounded; each pass forgets at most 100 streams with what little history they kept
        if deadline is not None and time.monotonic() >= deadline:
            break
        ids = list(gone.values_list("id", flat=True)[:100])
        if not ids:
            break
        with transaction.atomic():
            deleted["mirror"] += StreamMirror.objects.filter(pk__in=ids).delete()[1].get(StreamMirror._meta.label, 0)
    return deleted


def _prune(rows: models.QuerySet, deadline: float | None) -> int:
    """Delete ``rows`` (nothing may point at them) in short transactions of at most PRUNE_BATCH rows."""
    total = 0
    while deadline is None or time.monotonic() < deadline:
        with transaction.atomic():
            ids = list(rows.values_list("pk", flat=True)[:PRUNE_BATCH])
            total += rows_delete(rows.model, ids)
        if len(ids) < PRUNE_BATCH:
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
