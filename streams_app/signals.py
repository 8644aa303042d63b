"""What the console announces to the rest of itself.

:data:`snapshot_taken` is sent once per snapshot tick, after its samples are committed, with
``tick=<datetime>`` and ``run=<SnapshotRun>``: the alert rules connect to it, so they evaluate exactly the
data a chart will show. Then :func:`snapshot_broadcast` tells open pages over the channel layer, with a
small event only (SPEC section 9: the channel layer carries control events, never data), so they refetch.
"""

from __future__ import annotations

import logging
from datetime import datetime

import django.dispatch
from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

log = logging.getLogger(__name__)

snapshot_taken = django.dispatch.Signal()
"""Sent with ``tick`` (datetime) and ``run`` (SnapshotRun) after each snapshot is committed."""

#: The channel-layer event type pages listen for (a consumer's handler is ``metrics_snapshot``).
SNAPSHOT_EVENT = "metrics.snapshot"


def snapshot_group() -> str:
    """The Channels group of pages showing charts: every snapshot is announced there."""
    from streams_app.live.groups import group_name

    return group_name("metrics", "snapshot")


def snapshot_broadcast(tick: datetime) -> None:
    """Send ``{"type": "metrics.snapshot", "tick": iso}`` to :func:`snapshot_group`.

    A courtesy to open pages, never part of the snapshot: failures are logged, not raised.
    """
    try:
        layer = get_channel_layer()
        if layer is None:
            return
        async_to_sync(layer.group_send)(snapshot_group(), {"type": SNAPSHOT_EVENT, "tick": tick.isoformat()})
    except Exception as exc:  # noqa: BLE001 - see the docstring
        log.warning("snapshot broadcast for %s failed: %s", tick.isoformat(), exc)
