"""Scheduling the mirror: the beat task's body, which syncs every connection's mirror under a lock,
a full pass when one is due and an incremental one otherwise (the sync itself: :mod:`.mirror`).
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from busconsole.locks import renewed_lock
from streams_app.metrics.mirror import SyncResult, mirror_sync
from streams_app.metrics.models import MirrorState
from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops.errors import OpsError

log = logging.getLogger(__name__)


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
