"""Progress streams: one small stream per task, replayable from any ID, then followed live.

The pattern of seed 000 (AskTable): a task appends ``start``, any number of ``delta`` and one
terminal ``done`` or ``error`` event to ``progress:{task_key}``; a subscriber replays what it
missed with XRANGE from an exclusive ID (the SSE ``Last-Event-ID``) and then follows with
XREAD BLOCK until it sees a terminal event. So a client that disconnects resumes exactly where
it stopped, on any server process, with no event lost or repeated.

Entry fields: ``event`` (the kind), ``data`` (JSON text) and ``ts`` (ms). Streams are capped with
MAXLEN ~, expire ``ttl`` seconds after the terminal event, and meanwhile ``idle_ttl`` seconds
after their last write, so a task whose process died does not leave its stream forever.
``start`` replaces any earlier run of the same task key (DEL and XADD in one step), so a
periodic task can reuse its key.

Each write is one Lua script over the one stream (``lua/progress_write.lua``): XADD and PEXPIRE
(and DEL at a start) happen together, on one server or on a Redis Cluster alike, where redis-py
has no MULTI. Readers use single-key XRANGE/XREAD, which a cluster client routes to the node.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from types import TracebackType
from typing import Any, cast

from . import keys
from .codec import dumps, loads, now_ms
from .connection import AsyncClient, SyncClient
from .replies import Rows, StreamsReply
from .scripts import source
from .text import id_order

START = "start"
DELTA = "delta"
DONE = "done"
ERROR = "error"
TERMINAL = frozenset({DONE, ERROR})


@dataclass(frozen=True, slots=True)
class ProgressOptions:
    maxlen: int = 10_000
    #: seconds the stream is kept after its terminal event
    ttl: float = 3_600.0
    #: seconds the stream is kept after any write (a task that died without a terminal event)
    idle_ttl: float = 86_400.0


@dataclass(frozen=True, slots=True)
class ProgressEvent:
    id: str
    event: str
    #: JSON text, as stored (what an SSE endpoint sends as is)
    data: str

    @property
    def terminal(self) -> bool:
        return self.event in TERMINAL

    def json(self) -> Any:
        return loads(self.data)


def _text(value: bytes | str | None, default: str = "") -> str:
    if value is None:
        return default
    return value.decode("utf-8", "replace") if isinstance(value, bytes) else value


def parse_entry(entry_id: bytes | str, fields: dict[Any, Any] | list[Any]) -> ProgressEvent:
    """An entry as redis-py parses it (fields as a dict) or as Redis sends it (a flat list)."""
    if not isinstance(fields, dict):
        fields = dict(zip(fields[::2], fields[1::2], strict=True))
    event = fields.get(b"event", fields.get("event"))
    data = fields.get(b"data", fields.get("data"))
    return ProgressEvent(id=_text(entry_id), event=_text(event), data=_text(data, "null"))


def normalize_after(after: str | None) -> str:
    """An exclusive start ID; the spellings of "from the beginning" all become ``0-0``."""
    if after is None or after in ("", "-", "0"):
        return "0-0"
    return after


def _fields(event: str, data: Any) -> dict[str, str]:
    return {keys.P_EVENT: event, keys.P_DATA: dumps(data), keys.P_TS: str(now_ms())}


def _write_args(options: ProgressOptions, event: str, data: Any, ttl: float, *, start: bool) -> list[Any]:
    args: list[Any] = ["1" if start else "0", options.maxlen, int(ttl * 1000)]
    for pair in _fields(event, data).items():
        args += pair
    return args


def _error_data(error: BaseException | str | Any) -> Any:
    if isinstance(error, BaseException):
        return {"message": f"{type(error).__name__}: {error}"[:1000]}
    if isinstance(error, str):
        return {"message": error[:1000]}
    return error


# Sync twin of AsyncProgress: the two differ only in their awaits.
class Progress:
    """Writes one task's progress stream (synchronous client). Also a context manager:
    ``with bus.progress("report:7") as p: p.delta(...)`` writes ``start``, then ``done``, or
    ``error`` if the block raises."""

    def __init__(self, client: SyncClient, key: str, options: ProgressOptions | None = None) -> None:
        self.client = client
        self.key = key
        self.options = options or ProgressOptions()
        self._write = client.register_script(source("progress_write"))

    def start(self, data: Any = None) -> str:
        args = _write_args(self.options, START, data, self.options.idle_ttl, start=True)
        return _text(self._write(keys=[self.key], args=args))

    def delta(self, data: Any) -> str:
        return self._append(DELTA, data, self.options.idle_ttl)

    def done(self, data: Any = None) -> str:
        return self._append(DONE, data, self.options.ttl)

    def error(self, error: BaseException | str | Any) -> str:
        return self._append(ERROR, _error_data(error), self.options.ttl)

    def _append(self, event: str, data: Any, ttl: float) -> str:
        return _text(self._write(keys=[self.key], args=_write_args(self.options, event, data, ttl, start=False)))

    def __enter__(self) -> Progress:
        self.start()
        return self

    def __exit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            self.done()
        else:
            self.error(exc)


class AsyncProgress:
    """The asyncio twin of :class:`Progress`."""

    def __init__(self, client: AsyncClient, key: str, options: ProgressOptions | None = None) -> None:
        self.client = client
        self.key = key
        self.options = options or ProgressOptions()
        self._write = client.register_script(source("progress_write"))

    async def start(self, data: Any = None) -> str:
        args = _write_args(self.options, START, data, self.options.idle_ttl, start=True)
        return _text(await self._write(keys=[self.key], args=args))

    async def delta(self, data: Any) -> str:
        return await self._append(DELTA, data, self.options.idle_ttl)

    async def done(self, data: Any = None) -> str:
        return await self._append(DONE, data, self.options.ttl)

    async def error(self, error: BaseException | str | Any) -> str:
        return await self._append(ERROR, _error_data(error), self.options.ttl)

    async def _append(self, event: str, data: Any, ttl: float) -> str:
        args = _write_args(self.options, event, data, ttl, start=False)
        return _text(await self._write(keys=[self.key], args=args))

    async def __aenter__(self) -> AsyncProgress:
        await self.start()
        return self

    async def __aexit__(
        self, exc_type: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        if exc is None:
            await self.done()
        else:
            await self.error(exc)


def _finished_at_or_before(last: list[Any], after: str) -> bool:
    """Whether the stream's newest entry is terminal and not after ``after``: nothing will follow."""
    if not last:
        return False
    entry = parse_entry(*last[0])
    return entry.terminal and id_order(entry.id) <= id_order(after)


# Sync twin of asubscribe: the two differ only in their awaits.
def subscribe(
    client: SyncClient,
    key: str | bytes,
    *,
    after: str | None = None,
    block_ms: int = 2_000,
    count: int = 100,
    keepalive: bool = False,
) -> Iterator[ProgressEvent | None]:
    """Yield the events after ``after`` (exclusive), then new ones, until a terminal event.

    Ends early when the stream does not exist (never started, or expired) or when it already
    ended at or before ``after`` (a client resuming after the terminal event). With
    ``keepalive``, yields ``None`` after each idle ``block_ms`` so a caller can write a heartbeat
    (an SSE comment) and find out that its client has gone.
    """
    last = normalize_after(after)
    while True:  # replay, a page at a time: O(log N + count) per page at any depth
        rows = cast(Rows, client.xrange(key, min=f"({last}", max="+", count=count))
        for row in rows:
            event = parse_entry(*row)
            last = event.id
            yield event
            if event.terminal:
                return
        if len(rows) < count:
            break
    if _finished_at_or_before(cast(Rows, client.xrevrange(key, "+", "-", count=1)), last):
        return
    while True:  # follow
        reply = cast(StreamsReply, client.xread({key: last}, count=count, block=block_ms))
        if not reply:
            if not client.exists(key):
                return
            if keepalive:
                yield None
            continue
        for row in reply[0][1]:
            event = parse_entry(*row)
            last = event.id
            yield event
            if event.terminal:
                return


# Async twin of subscribe: the two differ only in their awaits.
async def asubscribe(
    client: AsyncClient,
    key: str | bytes,
    *,
    after: str | None = None,
    block_ms: int = 2_000,
    count: int = 100,
    keepalive: bool = False,
) -> AsyncIterator[ProgressEvent | None]:
    """The asyncio twin of :func:`subscribe`."""
    last = normalize_after(after)
    while True:
        rows = cast(Rows, await client.xrange(key, min=f"({last}", max="+", count=count))
        for row in rows:
            event = parse_entry(*row)
            last = event.id
            yield event
            if event.terminal:
                return
        if len(rows) < count:
            break
    if _finished_at_or_before(cast(Rows, await client.xrevrange(key, "+", "-", count=1)), last):
        return
    while True:
        reply = cast(StreamsReply, await client.xread({key: last}, count=count, block=block_ms))
        if not reply:
            if not await client.exists(key):
                return
            if keepalive:
                yield None
            continue
        for row in reply[0][1]:
            event = parse_entry(*row)
            last = event.id
            yield event
            if event.terminal:
                return
