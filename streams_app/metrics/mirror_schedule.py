"""Scheduling the mirror: the beat task's body, which syncs every connection's mirror under a lock,
a full pass when one is due and an incremental one otherwise (the sync itself: :mod:`.mirror`). A full
pass is done in parts of BUSCONSOLE_MIRROR_PASS_KEYS streams and half the interval at most, one part per
tick (:mod:`.mirror_pass`), so a first sync of 100k streams does not overrun its interval; 0 does it
in one go.
"""

from __future__ import annotations

import logging
from datetime import datetime

from django.conf import settings
from django.utils import timezone

from busconsole.locks import renewed_lock
from streams_app.metrics.mirror import SyncResult, mirror_sync
from streams_app.metrics.mirror_pass import mirror_pass_part
from streams_app.metrics.models import MirrorState
from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops.errors import OpsError

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
