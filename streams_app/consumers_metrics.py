"""Websocket ``/ws/metrics/``: tells a page with charts that a new metric snapshot was committed.

The snapshot job broadcasts ``{"type": "metrics.snapshot", "tick": iso}`` to one Channels group
(:func:`streams_app.signals.snapshot_group`); this consumer relays it to the browser as
``{"type": "snapshot", "tick": iso}``, and ``static/js/metrics.js`` turns that into the
``metrics-snapshot`` DOM event the chart panels' ``hx-trigger`` listens for. Only that small control
event travels here (SPEC section 9); the charts themselves are fetched over HTTP. Close codes: 4401
for anonymous users, 4503 when the channel layer is unreachable (the page then polls every 10 s).
"""

from __future__ import annotations

import logging

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from streams_app.auth import Role, role_of
from streams_app.signals import snapshot_group

log = logging.getLogger(__name__)


@database_sync_to_async
def _may_read(user: object) -> bool:
    return role_of(user) >= Role.VIEWER


class MetricsConsumer(AsyncJsonWebsocketConsumer):
    group: str | None = None

    async def connect(self) -> None:
        await self.accept()  # accept first so the close code reaches the client
        if not await _may_read(self.scope.get("user")):
            await self.close(code=4401)
            return
        try:
            await self.channel_layer.group_add(snapshot_group(), self.channel_name)
        except Exception as exc:  # noqa: BLE001 - the page falls back to polling
            log.warning("metrics socket: channel layer unavailable: %s", exc)
            await self.close(code=4503)
            return
        self.group = snapshot_group()
        await self.send_json({"type": "status", "state": "live"})

    async def receive_json(self, content: object, **kwargs: object) -> None:
        """Nothing to receive."""

    async def disconnect(self, code: int) -> None:
        if self.group is not None:
            try:
                await self.channel_layer.group_discard(self.group, self.channel_name)
            except Exception as exc:  # noqa: BLE001 - the group entry expires on its own
                log.debug("metrics socket: group_discard failed: %s", exc)

    async def metrics_snapshot(self, event: dict) -> None:
        await self.send_json({"type": "snapshot", "tick": str(event.get("tick", ""))[:40]})
