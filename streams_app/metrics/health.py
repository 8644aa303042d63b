"""Whether the snapshots keep up: what the overview's notice and ``/metrics`` say about them.

Missed ticks (the :class:`SnapshotSkip` rows :mod:`.snapshots` records), the newest run's age and
duration, and how far the 1-minute rollups trail the newest tick (:func:`.rollups.rollups_until`).
"""

from __future__ import annotations

import math
from dataclasses import dataclass
from datetime import datetime, timedelta

from django.conf import settings
from django.utils import timezone

from streams_app.metrics.models import SnapshotRun, SnapshotSkip
from streams_app.metrics.rollups import rollups_until


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

        In the steady state they trail it by the grace (:func:`.rollups.rollup_grace`) and the minute between two
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
    where its 1-minute rollups end (:func:`.rollups.rollups_until`)."""
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
    rolled = rollups_until()
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
