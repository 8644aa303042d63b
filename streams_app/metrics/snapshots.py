"""Taking metric snapshots: one sample per stream, group and DLQ of every connection for one *tick*, and
one per stream family; a connection above ``BUSCONSOLE_FAMILY_MODE_KEYS`` keys is snapshotted by family,
with per-stream samples of the members that matter only (:mod:`.family_ticks`).

A tick is the interval-aligned time (:func:`snapshot_tick_for`). The tick's :class:`SnapshotRun` row is
unique, so two overlapping runs for the same tick write one snapshot; the samples are bulk-inserted with
``ignore_conflicts`` under their own unique (object, resolution, at) constraints as a second guard (the
writing itself: :mod:`.snapshot_write`). The beat task (:func:`snapshot_take_guarded`, called by the thin
interface in :mod:`streams_app.tasks`) holds a renewable lock for the whole run (renewed by a heartbeat,
so a run longer than the interval still never overlaps the next; a killed run's lock expires after
:func:`snapshot_lock_s`), and when its run ended after the next tick began it takes that tick at once
rather than leaving it to a beat message that found the lock held; a task whose catch-up stopped at its
limit sends itself again (:func:`snapshot_resume_due`). A tick that still gets no run is recorded as a
:class:`SnapshotSkip` by the next run that does (the gap between the two ticks): the overview and
``/metrics`` show them (:mod:`.health`).

The rest of the samples' life is in its own modules: :mod:`.rollups` (1-minute and 1-hour rows),
:mod:`.pruning` (retention), :mod:`.series` (what charts read), :mod:`.health` (whether the snapshots
keep up) and :mod:`.mirror_schedule` (the mirror's beat task).
"""

from __future__ import annotations

import functools
import logging
import math
import time
from collections.abc import Callable, Sequence
from datetime import UTC, datetime, timedelta
from typing import Any

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from busconsole.locks import renewed_lock
from streams_app.live import broadcast
from streams_app.metrics import family_ticks
from streams_app.metrics.models import SnapshotRun, SnapshotSkip
from streams_app.metrics.signals import snapshot_taken
from streams_app.metrics.snapshot_write import tick_write
from streams_app.perf.heap import gc_paused
from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops import snapshot_reads
from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.reads.families import keys_total
from streams_app.redis_ops.types import StreamInfo

log = logging.getLogger(__name__)

#: A rate is computed against the previous tick only if that tick is at most this old.
RATE_MAX_GAP = timedelta(minutes=10)
#: Runs that start after their tick's end catch up with at most this many ticks each.
CATCH_UP_MAX = 3


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
    read: dict[str, tuple[snapshot_reads.ServerFacts, int | None]] = {}
    by_family: dict[str, family_ticks.FamilyTick] = {}  # connections above the family-mode threshold
    errors: list[dict[str, str]] = []
    for conn in redis_client.connections():
        try:
            total = keys_total(conn.name)
            if family_ticks.family_mode(total):
                by_family[conn.name] = family_tick = family_ticks.family_tick_read(conn.name, tick=tick, keys_total=total)
                missed = family_tick.missed
            else:
                facts = snapshot_reads.server_read(conn.name)
                read[conn.name] = (facts, total)
                missed = getattr(facts, "missed", ())
        except OpsError as exc:
            errors.append({"conn": conn.name, "error": exc.message})
            log.warning("snapshot %s: %s", tick.isoformat(), exc.message)
            continue
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
        run.families = {}
        for name, (facts, total) in read.items():
            sums: dict[str, dict[str, Any]] = {}
            written = tick_write(
                conn=name, streams=facts.streams, tick=tick, previous_tick=previous_tick, now=started_at,
                beside=functools.partial(_family_sums, facts.streams, into=sums),  # while the database works
            )
            streams += written.streams
            groups += written.groups
            run.families[name] = {"mode": "stream", "families": family_ticks.family_samples_from_streams(
                name, sums, streams=len(facts.streams), tick=tick, keys_total=total,
                complete=not getattr(facts, "missed", ()))}
        for name, family_tick in by_family.items():
            written = family_ticks.family_tick_write(family_tick, tick=tick, previous_tick=previous_tick, now=started_at)
            streams += written.streams
            groups += written.groups
            run.families[name] = family_tick.notes
        run.finished_at = timezone.now()
        run.duration_ms = int((time.perf_counter() - t0) * 1000)
        run.streams = streams
        run.groups = groups
        run.save(update_fields=["finished_at", "duration_ms", "streams", "groups", "families"])
        transaction.on_commit(lambda: _announce(tick, run))
    return run


def _family_sums(streams: Sequence[StreamInfo], *, into: dict[str, dict[str, Any]]) -> None:
    into.update(family_ticks.stream_sums(streams))


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
