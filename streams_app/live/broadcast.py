"""Tell open pages that something happened, from sync code (views, Celery tasks).

Only small events travel the channel layer (docs/architecture.md#the-channel-layer): an operator action (``stream_changed``:
requeue, claim, ack, rewind...), a job's progress (``job_progress``) or a committed metric snapshot
(``snapshot_broadcast``). The consumers turn the first two into browser frames with
:func:`changed_frame` and :func:`job_frame`. A broadcast is a courtesy to
watchers, never part of the action: failures (channel-layer Redis down, called from inside an event
loop) are logged and swallowed, so a requeue never fails because a notification could not be sent.
"""

from __future__ import annotations

import json
import logging
from datetime import datetime
from typing import Any

from asgiref.sync import async_to_sync
from channels.layers import get_channel_layer

from eventbus.text import display_text
from streams_app.live.groups import job_group, snapshot_group, stream_group

log = logging.getLogger(__name__)

#: The channel-layer event type of a snapshot (a consumer's handler is ``metrics_snapshot``).
SNAPSHOT_EVENT = "metrics.snapshot"
#: An event bigger than this (as JSON) is cut to its keys: watchers refetch details if they need them.
MAX_EVENT_BYTES = 8 * 1024


def stream_changed(conn: str, key: bytes, **info: Any) -> None:
    """Broadcast ``{"type": "changed", "conn", "key", **info}`` to the open tails of ``key``.

    e.g. ``stream_changed("default", b"orders:dlq", action="requeue", count=3, user="otto")``.
    """
    group = stream_group(conn, key)  # in the event too: the tail hub's relay routes by it (live/relay.py)
    event = {"type": "stream.changed", "conn": conn, "key": display_text(key), "info": _small(info), "group": group}
    group_send(group, event)


def job_progress(
    job_id: str | int,
    *,
    state: str,
    done: int = 0,
    total: int | None = None,
    error: str | None = None,
    kind: str | None = None,
    conn: str | None = None,
    key: bytes | None = None,
) -> None:
    """Broadcast a job's progress to its watchers and, given ``conn`` and ``key``, to that stream's tails."""
    # The API's job shape (GET /api/v1/jobs/<id>), so a page can treat both alike.
    event = {"type": "job.progress", "id": job_id, "kind": kind, "state": state, "done": done,
             "total": total, "error": (error or "")[:500] or None}
    group_send(job_group(job_id), event)
    if conn is not None and key is not None:
        group = stream_group(conn, key)
        group_send(group, {**event, "conn": conn, "key": display_text(key), "group": group})


def snapshot_broadcast(tick: datetime) -> None:
    """Broadcast ``{"type": "metrics.snapshot", "tick": iso}`` to the pages showing charts."""
    group_send(snapshot_group(), {"type": SNAPSHOT_EVENT, "tick": tick.isoformat()})


def changed_frame(event: dict[str, Any]) -> dict[str, Any]:
    """The browser frame of a ``stream.changed`` event: ``{"type": "changed", "conn", "key", **info}``."""
    return {**(event.get("info") or {}), "type": "changed", "conn": event.get("conn"), "key": event.get("key")}


def job_frame(event: dict[str, Any]) -> dict[str, Any]:
    """The browser frame of a ``job.progress`` event: ``{"type": "job", ...}``."""
    return {"type": "job", **{k: v for k, v in event.items() if k != "type"}}


def _small(info: dict[str, Any]) -> dict[str, Any]:
    """JSON-able (bytes shown as text) and bounded in size."""
    text = json.dumps(info, default=lambda v: display_text(v) if isinstance(v, bytes) else str(v))
    if len(text) > MAX_EVENT_BYTES:
        return {"truncated": True, "fields": sorted(str(k) for k in info)[:50]}
    return json.loads(text)


def group_send(group: str, event: dict[str, Any]) -> None:
    """Send one small event to a channel-layer group; never raises (a failure is logged)."""
    try:
        layer = get_channel_layer()
        if layer is None:
            return
        async_to_sync(layer.group_send)(group, event)
    except Exception as exc:  # noqa: BLE001 - see the module docstring: never fail the caller
        log.warning("broadcast to %s failed: %s", group, exc)
