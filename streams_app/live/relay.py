"""Operator events for the tails of one process: one channel-layer channel per hub, not one per client.

A tail page hears of operator actions and job progress about its stream (:mod:`.broadcast`) through the
channel layer. With a group membership per websocket, channels-redis's ``group_send`` writes one
message per member into Redis and the process pops each on its own, so one requeue watched by 500
tabs cost 500 messages. Here the hub of each process (each event loop) joins a stream's group once,
with one channel of its own, while any of its clients tails that stream, and hands each event to its
local subscribers as a control frame: one message per stream and process, whatever the clients.

A client joins before it is told "live" (:meth:`EventRelay.join` waits for the ``group_add``), so an
action announced after the page said "live" reaches it. The layer forgets memberships after its
``group_expiry`` (a day by default): memberships are renewed every :data:`RENEW_S`. Events are a
courtesy: when the layer is down the tail still works, without them (logged).
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
from collections.abc import Callable
from typing import Any

from channels.layers import get_channel_layer

from streams_app.live.broadcast import changed_frame, job_frame
from streams_app.live.groups import stream_group

log = logging.getLogger(__name__)

#: Seconds between renewals of the relay's group memberships (channels-redis forgets them after a day).
RENEW_S = 3600.0

Deliver = Callable[[str, bytes, dict[str, Any]], None]
"""Hand a browser frame to the local subscribers of (conn, key)."""

_FRAMES = {"stream.changed": changed_frame, "job.progress": job_frame}


class EventRelay:
    """The channel-layer side of one hub: joins a stream's group while it has local subscribers."""

    def __init__(self, deliver: Deliver) -> None:
        self.deliver = deliver
        self.channel: str | None = None
        self.streams: dict[str, tuple[str, bytes]] = {}  # group -> the stream it announces
        self._joins: dict[str, asyncio.Future[None]] = {}
        self._task: asyncio.Task[None] | None = None
        self.events = 0

    async def join(self, conn: str, key: bytes) -> None:
        """Be in the stream's group (once per process); never raises (events are a courtesy)."""
        group = stream_group(conn, key)
        join = self._joins.get(group)
        if join is None:
            join = self._joins[group] = asyncio.ensure_future(self._add(group, (conn, key)))
        try:
            await asyncio.shield(join)
        except Exception as exc:  # noqa: BLE001 - the tail works without operator-action events
            log.warning("tail: channel layer unavailable, no live action events: %s", exc)
            if self._joins.get(group) is join:
                del self._joins[group]

    def leave(self, conn: str, key: bytes) -> None:
        """The last local client of the stream left: leave its group (in the background)."""
        group = stream_group(conn, key)
        join = self._joins.pop(group, None)
        self.streams.pop(group, None)
        if join is not None and self.channel is not None:
            asyncio.get_running_loop().create_task(self._discard(group))

    async def _add(self, group: str, stream: tuple[str, bytes]) -> None:
        layer = get_channel_layer()
        if layer is None:
            return
        if self.channel is None:
            # The default prefix: channels-redis reads one Redis list per process for the channels made
            # with one prefix, and the consumers' channels (the revocation events) use this one.
            self.channel = await layer.new_channel()
        await layer.group_add(group, self.channel)
        self.streams[group] = stream
        if self._task is None:
            self._task = asyncio.get_running_loop().create_task(self._run(layer), name="tail-event-relay")

    async def _discard(self, group: str) -> None:
        layer = get_channel_layer()
        with contextlib.suppress(Exception):  # the membership expires on its own
            if layer is not None and self.channel is not None:
                await layer.group_discard(group, self.channel)

    async def _run(self, layer: Any) -> None:
        """Receive the relay's events and hand them out; renew memberships now and then."""
        assert self.channel is not None
        renew_at = asyncio.get_running_loop().time() + RENEW_S
        while True:
            try:
                async with asyncio.timeout(max(0.0, renew_at - asyncio.get_running_loop().time())):
                    event = await layer.receive(self.channel)
            except TimeoutError:
                renew_at += RENEW_S
                for group in list(self.streams):
                    with contextlib.suppress(Exception):
                        await layer.group_add(group, self.channel)
                continue
            except Exception as exc:  # noqa: BLE001 - the layer's Redis went away: try again shortly
                log.warning("tail: channel-layer receive failed: %s", exc)
                await asyncio.sleep(1.0)
                continue
            self._hand_out(event)

    def _hand_out(self, event: dict[str, Any]) -> None:
        shape = _FRAMES.get(event.get("type", ""))
        stream = self.streams.get(event.get("group", ""))
        if shape is None or stream is None:
            return
        self.events += 1
        frame = shape({k: v for k, v in event.items() if k != "group"})
        self.deliver(*stream, frame)
