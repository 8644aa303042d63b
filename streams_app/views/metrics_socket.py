"""Websocket ``/ws/metrics/``: tells a page with charts that a new metric snapshot was committed.

The snapshot job broadcasts ``{"type": "metrics.snapshot", "tick": iso}`` to one Channels group
(:func:`streams_app.live.groups.snapshot_group`); this consumer relays it to the browser as
``{"type": "snapshot", "tick": iso}``, and ``static/js/metrics.js`` turns that into the
``metrics-snapshot`` DOM event the chart panels' ``hx-trigger`` listens for. Only that small control
event travels here (docs/architecture.md#the-channel-layer); the charts themselves are fetched over HTTP. Close codes: 4401
for anonymous or since signed-out users, 4403 when the user's role changed (the page reconnects; see
:mod:`streams_app.views.socket_auth`), 4503 when the channel layer is unreachable (the page then polls
every 10 s).

A page about one stream (stream, group, DLQ pages) adds ``?conn=<name>&key=<percent-encoded key>``:
the socket then also relays that stream's operator actions and job progress
(:mod:`streams_app.live.broadcast`) as ``{"type": "changed", ...}`` and ``{"type": "job", ...}``,
which ``metrics.js`` turns into the ``stream-changed`` and ``job-progress`` DOM events.
"""

from __future__ import annotations

import logging
from collections.abc import Mapping
from typing import Any
from urllib.parse import unquote_to_bytes

from channels.db import database_sync_to_async
from django.conf import settings

from streams_app.live.broadcast import changed_frame, job_frame
from streams_app.live.groups import snapshot_group, stream_group
from streams_app.views import links
from streams_app.views.socket_auth import SessionBoundConsumer

log = logging.getLogger(__name__)


def _stream_of(scope: Mapping[str, Any]) -> tuple[str, bytes] | None:
    """The (connection, key) a page asked to follow, if any and if the connection exists.

    The query string is parsed from its raw bytes so that a key that is not UTF-8 survives.
    """
    params: dict[bytes, bytes] = {}
    for pair in scope.get("query_string", b"").split(b"&"):
        name, _, value = pair.partition(b"=")
        params.setdefault(name, unquote_to_bytes(value.replace(b"+", b" ")))
    conn = params.get(b"conn", b"").decode("latin-1")
    key = params.get(b"key", b"")
    if not conn or not key or conn not in settings.BUS_REDIS_URLS:
        return None
    return conn, key


class MetricsConsumer(SessionBoundConsumer):
    group: str | None = None
    stream_group: str | None = None

    async def connect(self) -> None:
        await self.accept()  # accept first so the close code reaches the client
        if not await self.auth_admit():
            return
        try:
            await self.channel_layer.group_add(snapshot_group(), self.channel_name)
        except Exception as exc:  # noqa: BLE001 - the page falls back to polling
            log.warning("metrics socket: channel layer unavailable: %s", exc)
            await self.close(code=4503)
            return
        self.group = snapshot_group()
        followed = _stream_of(self.scope)
        if followed is not None:
            # a key too long for a URL comes as its digest (views/links.py)
            followed = (followed[0], await database_sync_to_async(links.resolve_key)(*followed))
            self.stream_group = stream_group(*followed)
            try:
                await self.channel_layer.group_add(self.stream_group, self.channel_name)
            except Exception as exc:  # noqa: BLE001 - charts still refresh; the page can be reloaded
                log.warning("page socket: cannot follow the stream: %s", exc)
                self.stream_group = None
        await self.send_json({"type": "status", "state": "live"})

    async def receive_json(self, content: object, **kwargs: object) -> None:
        """Nothing to receive."""

    async def disconnect(self, code: int) -> None:
        await self.auth_release()
        for group in (self.group, self.stream_group):
            if group is None:
                continue
            try:
                await self.channel_layer.group_discard(group, self.channel_name)
            except Exception as exc:  # noqa: BLE001 - the group entry expires on its own
                log.debug("metrics socket: group_discard failed: %s", exc)

    async def metrics_snapshot(self, event: dict) -> None:
        await self.send_json({"type": "snapshot", "tick": str(event.get("tick", ""))[:40]})

    async def stream_changed(self, event: dict) -> None:
        await self.send_json(changed_frame(event))

    async def job_progress(self, event: dict) -> None:
        await self.send_json(job_frame(event))
