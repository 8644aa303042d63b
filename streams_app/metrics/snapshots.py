"""Metric snapshots, their rollups and retention, and the series charts read.

Three beat tasks (thin interfaces in :mod:`streams_app.tasks`) call into this module and
:mod:`streams_app.metrics.mirror` (whose :func:`mirror_sync` and :class:`SyncResult` are re-exported here):

- :func:`snapshot_take` records one sample per stream, group and DLQ of every connection for one *tick*,
  the interval-aligned time (:func:`snapshot_tick_for`). The tick's :class:`SnapshotRun` row is unique, so
  two overlapping runs for the same tick write one snapshot; the samples are bulk-inserted with
  ``ignore_conflicts`` under their own unique (object, resolution, at) constraints as a second guard. The
  beat task also holds a Redis lock (SET NX PX, shorter than the interval) so runs rarely overlap at all.
- :func:`samples_downsample` rolls raw samples up into 1-minute and 1-hour rows (averages of length, rate,
  lag, pending and depth; maximum of the oldest pending entry's idle time; sum of entries added) and
  :func:`samples_prune` applies the retention: raw rows are deleted only once both rollups cover them.

:func:`series` is what charts read: one metric of one object over a window, at the finest resolution whose
retention still covers the window's start.
"""

from __future__ import annotations

import logging
import math
import time
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import models, transaction
from django.db.models import Avg, Max, Sum
from django.utils import timezone

from busconsole.locks import interval_lock_ms, lock_held
from streams_app import signals
from streams_app.live import broadcast
from streams_app.metrics.bulk import rows_insert
from streams_app.metrics.mirror import SyncResult, mirror_refresh, mirror_sync
from streams_app.metrics.models import (
    DlqSample,
    GroupSample,
    Resolution,
    SnapshotRun,
    StreamMirror,
    StreamSample,
    name_hash,
)
from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops import snapshot_reads
from streams_app.redis_ops.conventions import detect_dlq
from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.types import StreamInfo

__all__ = [
    "SyncResult",
    "mirror_sync",
    "mirror_sync_guarded",
    "samples_downsample",
    "samples_prune",
    "series",
    "series_resolution",
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


# ---------------------------------------------------------------------------------------- snapshots


def snapshot_tick_for(*, now: datetime, interval_s: int | None = None) -> datetime:
    """The tick ``now`` belongs to: ``now`` rounded down to a multiple of the interval (UTC epoch)."""
    interval = interval_s or settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S
    return datetime.fromtimestamp(math.floor(now.timestamp() / interval) * interval, tz=UTC)


_STREAM_SAMPLE = ("stream_id", "at", "resolution", "length", "added", "rate_per_s", "entries_added")
_GROUP_SAMPLE = ("group_id", "at", "resolution", "lag", "pending", "oldest_pending_idle_ms")
_DLQ_SAMPLE = ("stream_id", "at", "resolution", "depth")


def snapshot_take(*, tick: datetime) -> SnapshotRun:
    """Record the samples of ``tick`` for every connection, once: a second call returns the first's run.

    An unreachable connection is recorded in ``run.errors`` and skipped; the others are still sampled.
    The mirror's figures of streams and groups are refreshed on the way (:func:`mirror.mirror_refresh`).
    """
    done = SnapshotRun.objects.filter(tick=tick).first()
    if done is not None:
        return done
    started_at = timezone.now()
    t0 = time.perf_counter()
    read: dict[str, snapshot_reads.ServerFacts] = {}
    errors: list[dict[str, str]] = []
    for conn in redis_client.connections():
        try:
            read[conn.name] = snapshot_reads.server_read(conn.name)
        except OpsError as exc:
            errors.append({"conn": conn.name, "error": exc.message})
            log.warning("snapshot %s: %s", tick.isoformat(), exc.message)
    redis_ms = int((time.perf_counter() - t0) * 1000)

    with transaction.atomic():
        run, created = SnapshotRun.objects.get_or_create(
            tick=tick, defaults={"started_at": started_at, "redis_ms": redis_ms, "errors": errors}
        )
        if not created:  # another run of this tick committed first
            return run
        previous = _previous_counters(tick)
        stream_rows: list[tuple[Any, ...]] = []
        group_rows: list[tuple[Any, ...]] = []
        dlq_rows: list[tuple[Any, ...]] = []
        raw = Resolution.RAW.value
        for conn, facts in read.items():
            stream_ids, group_ids = mirror_refresh(conn=conn, streams=facts.streams, now=started_at)
            for s in facts.streams:
                stream_id = stream_ids[name_hash(s.key)]
                added, rate = _added(s, previous.get(stream_id), previous_tick=previous.tick, tick=tick)
                stream_rows.append((stream_id, tick, raw, s.length, added, rate, s.entries_added))
                if detect_dlq(s.key) is not None:
                    dlq_rows.append((stream_id, tick, raw, s.length))
                for g in s.groups:
                    group_id = group_ids[(stream_id, name_hash(g.name))]
                    group_rows.append((group_id, tick, raw, g.lag, g.pending, g.oldest_pending_idle_ms))
        rows_insert(StreamSample, _STREAM_SAMPLE, stream_rows, ignore_conflicts=True)
        rows_insert(GroupSample, _GROUP_SAMPLE, group_rows, ignore_conflicts=True)
        rows_insert(DlqSample, _DLQ_SAMPLE, dlq_rows, ignore_conflicts=True)
        run.finished_at = timezone.now()
        run.duration_ms = int((time.perf_counter() - t0) * 1000)
        run.streams = len(stream_rows)
        run.groups = len(group_rows)
        run.save(update_fields=["finished_at", "duration_ms", "streams", "groups"])
        transaction.on_commit(lambda: _announce(tick, run))
    return run


@dataclass(frozen=True, slots=True)
class _Previous:
    tick: datetime | None
    counters: dict[int, tuple[int | None, int]]  # stream id -> (entries_added, length)

    def get(self, stream_id: int) -> tuple[int | None, int] | None:
        return self.counters.get(stream_id)


def _previous_counters(tick: datetime) -> _Previous:
    prev = (
        SnapshotRun.objects.filter(tick__lt=tick, tick__gte=tick - RATE_MAX_GAP)
        .order_by("-tick")
        .values_list("tick", flat=True)
        .first()
    )
    if prev is None:
        return _Previous(tick=None, counters={})
    rows = StreamSample.objects.filter(resolution=Resolution.RAW, at=prev).values_list("stream_id", "entries_added", "length")
    return _Previous(tick=prev, counters={sid: (added, length) for sid, added, length in rows})


def _added(
    facts: StreamInfo, prev: tuple[int | None, int] | None, *, previous_tick: datetime | None, tick: datetime
) -> tuple[int | None, float | None]:
    """Entries added since the previous tick, and per second.

    From Redis 7's ``entries-added`` counter (a drop means the stream was deleted and created again: all
    its entries are new). Before Redis 7 only the growth of the length is known, a lower bound.
    """
    if prev is None or previous_tick is None:
        return None, None
    prev_added, prev_length = prev
    if facts.entries_added is not None and prev_added is not None:
        added = facts.entries_added - prev_added if facts.entries_added >= prev_added else facts.entries_added
    else:
        added = max(0, facts.length - prev_length)
    seconds = (tick - previous_tick).total_seconds()
    return added, (added / seconds if seconds > 0 else None)


def _announce(tick: datetime, run: SnapshotRun) -> None:
    """After the commit: the signal (alerts), then the channel-layer event (pages). Neither may fail us."""
    for receiver, response in signals.snapshot_taken.send_robust(sender=SnapshotRun, tick=tick, run=run):
        if isinstance(response, Exception):
            log.error("snapshot_taken receiver %r failed", receiver, exc_info=response)
    broadcast.snapshot_broadcast(tick)


# ------------------------------------------------------------------------------- beat task bodies


def snapshot_take_guarded(*, now: datetime) -> SnapshotRun | None:
    """The beat task's body: the snapshot of ``now``'s tick under the overlap lock (None: another run holds it)."""
    interval = settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S
    with lock_held(name="snapshot", ttl_ms=interval_lock_ms(interval)) as acquired:
        if not acquired:
            log.info("snapshot skipped: another run holds the lock")
            return None
        return snapshot_take(tick=snapshot_tick_for(now=now, interval_s=interval))


def mirror_sync_guarded() -> dict[str, SyncResult | str] | None:
    """Sync the mirror of every connection under the overlap lock (None: another run holds it).

    A connection that fails is reported by its error text and does not stop the others.
    """
    with lock_held(name="mirror-sync", ttl_ms=interval_lock_ms(settings.BUSCONSOLE_MIRROR_INTERVAL_S)) as acquired:
        if not acquired:
            return None
        out: dict[str, SyncResult | str] = {}
        for conn in redis_client.connections():
            try:
                out[conn.name] = mirror_sync(conn=conn.name)
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


def _rollup(model: type[models.Model], resolution: str, *, limit: datetime) -> int:
    """Roll raw rows of ``model`` up into ``resolution`` buckets that ended before ``limit``.

    Buckets are taken in time order from the end of the newest rollup, skipping stretches without raw
    rows; one query per bucket, grouped by object. Re-running is harmless (ignore_conflicts).
    """
    fk, aggregates = _ROLLUPS[model]
    size = BUCKET_SIZE[resolution]
    cursor = _rolled_until(model, resolution)
    made = 0
    for _ in range(MAX_BUCKETS[resolution]):
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


def samples_downsample(*, now: datetime) -> dict[str, dict[str, int]]:
    """Compute the 1-minute and 1-hour rollups due at ``now``: ``{"1m": {"stream": n, ...}, "1h": {...}}``.

    Both are computed from raw samples (so an hour's average weighs every raw sample alike), for buckets
    that ended at least :func:`rollup_grace` ago.
    """
    limit = now - rollup_grace()
    return {
        str(resolution): {_TABLE_NAMES[model]: _rollup(model, resolution, limit=limit) for model in _ROLLUPS}
        for resolution in (Resolution.MINUTE, Resolution.HOUR)
    }


def samples_prune(*, now: datetime) -> dict[str, int]:
    """Apply retention at ``now``; returns the rows deleted per table and resolution.

    Raw rows go after BUSCONSOLE_RETENTION_RAW_H hours, but never before both rollups cover them (a
    downsampler that fell behind loses nothing); 1-minute rows after _1M_D days, 1-hour rows after _1H_D
    days. Snapshot runs follow the raw retention, and mirror rows of things deleted longer ago than the
    1-hour retention are forgotten with the last of their history.
    """
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
            deleted[f"{name}.raw"] = model.objects.filter(resolution=Resolution.RAW, at__lt=cut).delete()[0]
        for res, cut in cuts.items():
            deleted[f"{name}.{res}"] = model.objects.filter(resolution=res, at__lt=cut).delete()[0]
    deleted["runs"] = SnapshotRun.objects.filter(tick__lt=raw_cut).delete()[0]
    deleted["mirror"] = StreamMirror.objects.filter(deleted_at__lt=cuts[Resolution.HOUR]).delete()[0]
    return deleted


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

    ``kind`` is "stream" (metrics "length", "rate"), "group" ("lag", "pending", "oldest_pending_idle_ms")
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
