"""Scheduling the mirror: the beat task's body, which syncs every connection's mirror under a lock,
a full pass when one is due and an incremental one otherwise (the sync itself: :mod:`.mirror`). A full
pass is done in parts of BUSCONSOLE_MIRROR_PASS_KEYS streams and half the interval at most, one part per
tick (:mod:`.mirror_pass`), so a first sync of 100k streams does not overrun its interval; 0 does it
in one go.

A connection in family mode (more keys than ``BUSCONSOLE_FAMILY_MODE_KEYS``, docs/operations.md#stream-families)
gets no full pass: a row per key would be a million rows. Its sync (:func:`mirror_members_sync`) reads and
writes the members the family tick keeps (:func:`~.family_ticks.members_wanted`) with their groups and
consumers, and marks nothing deleted: it cannot tell a key it skipped from one that vanished.
"""

from __future__ import annotations

import logging
import time
from datetime import datetime

from django.conf import settings
from django.db import transaction
from django.utils import timezone

from busconsole.locks import renewed_lock
from streams_app.metrics.bulk import chunks
from streams_app.metrics.family_ticks import family_mode, members_wanted
from streams_app.metrics.mirror import SYNC_CHUNK, SyncResult, mirror_sync, sync_chunk
from streams_app.metrics.mirror_pass import mirror_pass_part
from streams_app.metrics.models import FamilyPassState, MirrorState
from streams_app.perf.heap import gc_paused
from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops import snapshot_reads
from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.reads.families import keys_total

log = logging.getLogger(__name__)


def mirror_full_due(*, conn: str, now: datetime) -> bool:
    """Whether the next sync of ``conn`` must be (a part of) a full pass: none yet, the last one is too
    old, or one done in parts is under way."""
    state = MirrorState.objects.filter(connection=conn).values_list("full_synced_at", "pass_cursor").first()
    if state is None or state[0] is None or state[1] is not None:
        return True
    return (now - state[0]).total_seconds() >= settings.BUSCONSOLE_MIRROR_FULL_EVERY_S


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
                if family_mode(keys_total(conn.name)):
                    out[conn.name] = mirror_members_sync(conn=conn.name)
                    continue
                full = mirror_full_due(conn=conn.name, now=now or timezone.now())
                keys = settings.BUSCONSOLE_MIRROR_PASS_KEYS
                out[conn.name] = (
                    mirror_pass_part(conn=conn.name, max_keys=keys, budget_s=interval / 2) if full and keys
                    else mirror_sync(conn=conn.name, full=full)
                )
            except OpsError as exc:
                log.warning("mirror sync of %s failed: %s", conn.name, exc.message)
                out[conn.name] = exc.message
        return out


def mirror_members_sync(*, conn: str) -> SyncResult:
    """The mirror sync of a connection in family mode: its members only, nothing marked deleted."""
    with gc_paused():
        started = time.perf_counter()
        keys = members_wanted(conn, FamilyPassState.objects.filter(connection=conn).first())
        streams, _, missed = snapshot_reads.streams_read_covered(conn, keys, consumers=True)
        redis_ms = int((time.perf_counter() - started) * 1000)
        now = timezone.now()
        totals = dict.fromkeys(
            ("created", "changed", "returned", "groups", "groups_created", "groups_deleted", "consumers",
             "consumers_deleted"), 0)
        for part in chunks(streams, SYNC_CHUNK):
            with transaction.atomic():
                sync_chunk(conn, part, now=now, totals=totals)
        duration_ms = int((time.perf_counter() - started) * 1000)
        MirrorState.objects.update_or_create(connection=conn, defaults={
            "synced_at": now, "full": False, "duration_ms": duration_ms, "redis_ms": redis_ms,
            "streams": len(streams), "streams_written": len(streams), "partial": ", ".join(missed),
        })
    return SyncResult(
        conn=conn, synced_at=now, streams=len(streams), streams_created=totals["created"],
        streams_changed=totals["changed"], streams_deleted=0, streams_returned=totals["returned"],
        groups=totals["groups"], groups_created=totals["groups_created"], groups_deleted=totals["groups_deleted"],
        consumers=totals["consumers"], consumers_deleted=totals["consumers_deleted"], redis_ms=redis_ms,
        duration_ms=duration_ms, full=False, streams_written=len(streams), missed=tuple(missed),
    )
