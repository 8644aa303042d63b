"""Websocket consumers: the live tail of one stream (SPEC section 4).

``/ws/c/<conn>/streams/<key>/tail/?after=<id>`` sends JSON frames:

- ``{"type": "entry", "id", "fields", "decoded"}``, or several as ``{"type": "entries", "entries": [...]}``
  (the same entry JSON as the page and the API, from ``presenters.entry_json``);
- ``{"type": "skipped", "count", "resume_after", "last_skipped"[, "reason"]}``: entries in
  (resume_after, last_skipped] were not sent: this client fell behind (``count`` exact), or, with
  ``count`` null because nobody counted them, a reconnect's replay was cut at its limit
  (``reason: "replay_limit"``) or the whole process could not keep up (``reason: "lagging"``);
- ``{"type": "status", "state": "replaying" | "live" | "reconnecting" | "stalled" | "error", ...}``:
  ``reconnecting`` when the reader of the stream's node (the server, or its primary on a Redis Cluster)
  first fails to reach it, ``stalled`` with a ``reason`` (and the ``node``) when it has kept failing or
  Redis refuses the read, ``live`` again once it reads (:mod:`streams_app.live.node_reader`): the page
  says "live" only while entries can arrive;
- ``{"type": "changed", ...}`` (an operator action on the stream) and ``{"type": "job", ...}`` (progress
  of a background job about it), relayed from the channel layer by the process's hub, which hears them
  once per stream for all its clients (:mod:`streams_app.live.relay`).

Entries travel through the process's tail hub, never through the channel layer (SPEC section 9:
channels-redis drops or buffers without bound): while a client keeps up, the hub writes the stream's
shared frames straight to its socket (:mod:`streams_app.live.wire`); once it falls behind, they wait in
its bounded queue and go out through ``send`` here, with ``skipped`` frames for what did not fit. Close codes: 4401 anonymous or signed out since (logout,
deactivation: :mod:`streams_app.views.socket_auth`), 4403 the user's role changed (the page reconnects),
4400 bad ``after``, 4404 unknown connection or not a stream, 4503 Redis unreachable (the page retries that one).
"""

from __future__ import annotations

import asyncio
import logging
import re
from urllib.parse import parse_qs, unquote_to_bytes

from channels.db import database_sync_to_async

from streams_app.live.hub import Hub, Subscription, get_hub
from streams_app.live.wire import direct_socket
from streams_app.masking.apply import masker_cached, rules_load
from streams_app.redis_ops.errors import OpsError
from streams_app.redis_ops.types import Entry
from streams_app.views import links
from streams_app.views.presenters import entry_json
from streams_app.views.socket_auth import SessionBoundConsumer

log = logging.getLogger(__name__)

# The key is taken from the path as the client sent it: servers decode %2F into "/" in scope["path"].
_RAW_TAIL_PATH = re.compile(rb"/ws/c/[A-Za-z0-9_.-]+/streams/([^/]+)/tail/?")
_CLOSE_CODES = {"bad_request": 4400, "not_found": 4404, "unreachable": 4503}


def tail_hub() -> Hub:
    """This process's tail hub, its entry frames shaped like the page's and the API's entries."""
    return get_hub(entry_json=masked_entry_json)


def masked_entry_json(conn: str, key: bytes, entry: Entry) -> dict:
    """The entry frame, masked: encoded once per entry and shared by every subscriber, so the tail never
    reveals (a masked value is revealed, audited, on the entry's page). Rules as last read in this process;
    every tail connection reads them first (:func:`streams_app.masking.apply.rules_load`)."""
    return entry_json(conn, key, masker_cached(conn, key).entry(entry))


def tail_key(scope: dict) -> bytes:
    """The stream key of a tail URL, exactly as percent-encoded by the client (any bytes)."""
    raw = (scope.get("raw_path") or b"").split(b"?", 1)[0]
    root = (scope.get("root_path") or "").encode()
    if root and raw.startswith(root):
        raw = raw[len(root) :]
    match = _RAW_TAIL_PATH.fullmatch(raw)
    if match:
        return unquote_to_bytes(match.group(1))
    # No raw path (an in-process test communicator): the decoded path is exact for UTF-8 keys.
    return scope["url_route"]["kwargs"]["key"].encode("utf-8", "surrogateescape")


class TailConsumer(SessionBoundConsumer):
    """One browser tab watching one stream, for as long as its session and role hold."""

    sub: Subscription | None = None
    pump_task: asyncio.Task[None] | None = None

    async def connect(self) -> None:
        # Accept first so the close code reaches the client (a refused handshake is a bare 403).
        await self.accept()
        if not await self.auth_admit():
            return
        conn = self.scope["url_route"]["kwargs"]["conn"]
        # a key too long for a URL comes as its digest (views/links.py), resolved once signed in
        key = await database_sync_to_async(links.resolve_key)(conn, tail_key(self.scope))
        # The masking rules as they are now, for the frames this process's hub encodes (it may not query).
        await database_sync_to_async(rules_load)()
        after = parse_qs(self.scope.get("query_string", b"").decode("latin-1")).get("after", [None])[0] or None
        try:
            self.sub = await tail_hub().subscribe(conn, key, after=after)
        except OpsError as exc:
            await self.send_json({"type": "status", "state": "error", "code": exc.code, "message": exc.message})
            await self.close(code=_CLOSE_CODES.get(exc.code, 4500))
            return
        self.pump_task = asyncio.get_running_loop().create_task(self._pump(self.sub))

    async def _pump(self, sub: Subscription) -> None:
        try:
            code = await sub.pump(self.send_text, socket=lambda: direct_socket(self.scope))
        except asyncio.CancelledError:
            raise
        except OpsError as exc:  # the replay could not be read
            code = _CLOSE_CODES.get(exc.code, 4500)
            await self.send_json({"type": "status", "state": "error", "code": exc.code, "message": exc.message})
        except OSError as exc:  # the client went away mid-send (uvicorn's ClientDisconnected)
            log.debug("tail: send failed: %s", exc)
            return
        except Exception:
            log.exception("tail: pump failed")
            code = 4500
        await self.close(code=code)

    async def send_text(self, text: str) -> None:
        await self.send(text_data=text)

    async def receive_json(self, content: object, **kwargs: object) -> None:
        """Nothing to receive: pausing is closing, resuming is reconnecting with ``after``."""

    async def auth_ended(self) -> None:
        """Signed out or role changed: not one more entry goes out before the close."""
        self._stop()

    def _stop(self) -> None:
        if self.sub is not None:
            tail_hub().unsubscribe(self.sub)
            self.sub = None
        if self.pump_task is not None:
            self.pump_task.cancel()
            self.pump_task = None

    async def disconnect(self, code: int) -> None:
        self._stop()
        await self.auth_release()
