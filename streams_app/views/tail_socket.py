"""Websocket consumers: the live tail of one stream (docs/api.md#the-live-tails-frames).

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

Filters. ``?filter=<text>`` (search's language, :mod:`streams_app.views.tail_filter`) keeps only the
entries it matches, evaluated on the server on the masked entries the frames are built from, so a
filter finds in the tail exactly what search finds and nothing a mask hides. The first frame then
says how the filter was read, ``{"type": "status", "state": "filter", "filter", "query", "kind":
"expression" | "text", "read_as"}`` (``read_as``: the CEL an old ``path=value`` filter was read as), or
why it was refused, ``{"type": "status", "state": "filter_error", "filter", "message"}``: the socket stays
open and tails nothing until it is sent a filter it can take. A filtered tail also sends ``{"type":
"tested", "last_id"}`` now and then: its filter has read up to there (a reconnect goes on after it);
and ``{"type": "status", "state": "filter_costly", "count", "message"}`` when entries were left out
because their own data made the filter too costly (search counts them the same way).
The client may change its filter on the open socket by sending ``{"type": "filter", "filter": text}``
(empty: none): the tail goes on from the newest entry it was sent or told of, replaying anything newer
through the new filter; a refused filter leaves the tail as it was.

Entries travel through the process's tail hub, never through the channel layer (docs/architecture.md#the-channel-layer:
channels-redis drops or buffers without bound): while a client keeps up, the hub writes the stream's
shared frames straight to its socket (:mod:`streams_app.live.wire`); once it falls behind, they wait in
its bounded queue and go out through ``send`` here, with ``skipped`` frames for what did not fit. Close codes: 4401 anonymous or signed out since (logout,
deactivation: :mod:`streams_app.views.socket_auth`), 4403 the user's role changed (the page reconnects),
4400 bad ``after``, 4404 unknown connection or not a stream, 4503 Redis unreachable (the page retries that one).
"""

from __future__ import annotations

import asyncio
import json
import logging
import re
from collections.abc import Mapping
from typing import Any
from urllib.parse import parse_qs, unquote_to_bytes

from channels.db import database_sync_to_async

from streams_app.live.hub import RESTART, Hub, Subscription, TailFilter, get_hub
from streams_app.live.wire import direct_socket
from streams_app.masking.apply import masker_cached, rules_load
from streams_app.redis_ops.conventions import detect_dlq
from streams_app.redis_ops.errors import InvalidArgument, OpsError
from streams_app.redis_ops.types import Entry
from streams_app.views import links
from streams_app.views.presenters import entry_json
from streams_app.views.socket_auth import SessionBoundConsumer
from streams_app.views.tail_filter import ChosenFilter, tail_filter_compile

log = logging.getLogger(__name__)

# The key is taken from the path as the client sent it: servers decode %2F into "/" in scope["path"].
_RAW_TAIL_PATH = re.compile(rb"/ws/c/[A-Za-z0-9_.-]+/streams/([^/]+)/tail/?")
_CLOSE_CODES = {"bad_request": 4400, "not_found": 4404, "unreachable": 4503}
#: A socket's filter changes at most this often: compiling one (and checking its cost) runs on the loop.
FILTER_CHANGE_S = 0.2


def tail_hub() -> Hub:
    """This process's tail hub, its entry frames shaped like the page's and the API's entries."""
    return get_hub(entry_json=entry_json, shown=masked_entry)


def masked_entry(conn: str, key: bytes, entry: Entry) -> Entry:
    """The entry as the tail shows it, masked: its frame is encoded once and shared by every subscriber,
    and filters read it, so the tail never reveals nor finds a masked value (a masked value is revealed,
    audited, on the entry's page). Rules as last read in this process; every tail connection reads them
    first (:func:`streams_app.masking.apply.rules_load`)."""
    return masker_cached(conn, key).entry(entry)


def tail_key(scope: Mapping[str, Any]) -> bytes:
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
    pump_task: asyncio.Task[int | None] | None = None
    conn = ""
    key = b""
    position: str | None = None  # ``after`` of the next subscription
    tail_filter: TailFilter | None = None
    admitted = False
    finished = False  # closed by the server: nothing more starts
    changed_at = 0.0  # when the last filter message was read (loop time)

    async def connect(self) -> None:
        # Accept first so the close code reaches the client (a refused handshake is a bare 403).
        await self.accept()
        if not await self.auth_admit():
            return
        self.conn = self.scope["url_route"]["kwargs"]["conn"]
        # a key too long for a URL comes as its digest (views/links.py), resolved once signed in
        self.key = await database_sync_to_async(links.resolve_key)(self.conn, tail_key(self.scope))
        # The masking rules as they are now, for the frames this process's hub encodes (it may not query).
        await database_sync_to_async(rules_load)()
        query = parse_qs(self.scope.get("query_string", b"").decode("latin-1"))
        self.position = query.get("after", [None])[0] or None
        self.admitted = True
        text = query.get("filter", [""])[0]
        if text.strip():
            chosen = await self._read_filter(text)
            if chosen is None:
                return  # refused, and told why: the socket waits for a filter it can take
            self.tail_filter = chosen.tail_filter
            await self.send_json(chosen.frame)
        await self._start()

    async def _read_filter(self, text: str) -> ChosenFilter | None:
        """``text`` compiled as this tail's filter; None, with a ``filter_error`` frame saying why, when refused."""
        try:
            return tail_filter_compile(text, key=self.key, dlq=detect_dlq(self.key) is not None)
        except InvalidArgument as exc:
            message = exc.message
        except Exception as exc:  # noqa: BLE001 - whatever the compiler raises, the filter is refused
            log.warning("tail: filter %r not compiled: %r", text[:200], exc)
            message = f"This filter cannot be evaluated ({type(exc).__name__}); write it more simply."
        await self.send_json({"type": "status", "state": "filter_error", "filter": text, "message": message})
        return None

    async def _start(self) -> None:
        try:
            self.sub = await tail_hub().subscribe(self.conn, self.key, after=self.position, filter=self.tail_filter)
        except OpsError as exc:
            self.finished = True
            await self.send_json({"type": "status", "state": "error", "code": exc.code, "message": exc.message})
            await self.close(code=_CLOSE_CODES.get(exc.code, 4500))
            return
        self.pump_task = asyncio.get_running_loop().create_task(self._pump(self.sub))

    async def _pump(self, sub: Subscription) -> int | None:
        try:
            code = await sub.pump(self.send_text, socket=lambda: direct_socket(self.scope))
        except asyncio.CancelledError:
            raise
        except OpsError as exc:  # the replay could not be read
            code = _CLOSE_CODES.get(exc.code, 4500)
            await self.send_json({"type": "status", "state": "error", "code": exc.code, "message": exc.message})
        except OSError as exc:  # the client went away mid-send (uvicorn's ClientDisconnected)
            log.debug("tail: send failed: %s", exc)
            return None
        except Exception:
            log.exception("tail: pump failed")
            code = 4500
        if code == RESTART:
            return code
        self.finished = True
        await self.close(code=code)
        return code

    async def send_text(self, text: str) -> None:
        await self.send(text_data=text)

    async def receive(self, text_data: str | None = None, bytes_data: bytes | None = None, **kwargs: object) -> None:
        """``{"type": "filter", "filter": text}`` changes the filter (module docstring); pausing is closing,
        resuming is reconnecting with ``after``."""
        if not self.admitted or self.finished or self.ended:
            return
        try:
            content = json.loads(text_data) if text_data is not None else None
        except ValueError:
            content = None
        text = content.get("filter") if isinstance(content, dict) and content.get("type") == "filter" else None
        if not isinstance(text, str):
            await self.send_json({"type": "status", "state": "filter_error", "filter": None,
                                  "message": 'The tail takes one message: {"type": "filter", "filter": "<text>"}.'})
            return
        loop = asyncio.get_running_loop()
        wait = self.changed_at + FILTER_CHANGE_S - loop.time()
        if wait > 0:  # messages are handled one at a time: a flood of filters waits here, not on the loop
            await asyncio.sleep(wait)
        self.changed_at = loop.time()
        chosen = await self._read_filter(text) if text.strip() else None
        if text.strip() and chosen is None:
            return  # refused: the tail goes on as it was
        sub, task = self.sub, self.pump_task
        if sub is not None and task is not None:
            sub.restart()  # the pump stops once what it has queued is sent, and not mid-frame
            await asyncio.wait({task})  # (the session's re-check may cancel it meanwhile: not an error here)
            if task.cancelled() or task.result() != RESTART or self.ended:
                return  # it ended for another reason meanwhile: the socket is closing
            self.position = sub.position
            tail_hub().unsubscribe(sub)
            self.sub = self.pump_task = None
        self.tail_filter = chosen.tail_filter if chosen is not None else None
        await self.send_json(chosen.frame if chosen is not None else {
            "type": "status", "state": "filter", "filter": text, "query": "", "kind": "none", "read_as": None})
        await self._start()

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
