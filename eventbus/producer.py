"""Publishing events, and request/reply, on a synchronous or an asyncio client.

The two producers share everything but the I/O: argument building lives in module functions so
the sync and async classes stay thin mirrors of each other.

On a Redis Cluster every command here has one key, or (the unique publish) a script over the
stream and its ``{stream}:unique`` set, which share a slot; ``publish_many``'s pipeline is split
by node by redis-py. A pipeline sends ``EVALSHA`` as a plain command, not through redis-py's
``Script`` object: the asyncio cluster pipeline has no script support (awaiting a script on it
re-initialises the pipeline and drops what was queued), so the producer loads the script itself
(``SCRIPT LOAD`` reaches every primary) and re-runs, one by one, the few publishes a server
answered NOSCRIPT (restarted or failed over since): NOSCRIPT means the script did not run.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any, cast

from redis.exceptions import NoScriptError

from . import keys
from .codec import dumps, encode_event, loads, new_event_id, new_event_ids, now_ms
from .connection import AsyncClient, SyncClient, is_cluster_client
from .errors import DuplicateEvent, RequestFailed, RequestTimeout, SlotUnsafeStream
from .scripts import Scripts, source


@dataclass(frozen=True, slots=True)
class Message:
    """One event of a batch given to ``publish_many``."""

    type: str
    data: Any = None
    correlation_id: str | None = None
    reply_to: str | None = None
    unique_key: str | None = None


@dataclass(frozen=True, slots=True)
class PublishOptions:
    #: MAXLEN ~ applied on every XADD (``None``: never trim)
    maxlen: int | None = 100_000
    #: seconds a uniqueness key refuses duplicates
    unique_ttl: float = 86_400.0


def _xadd_head(stream: str, maxlen: int | None) -> tuple[Any, ...]:
    """XADD's arguments before an entry's fields: the same for every entry of a call.

    The command name and the key stay text: redis-py's cluster client looks both up to route the
    command; the rest is bytes, which redis-py sends as they are.
    """
    if maxlen is None:
        return ("XADD", stream, b"*")
    return ("XADD", stream, b"MAXLEN", b"~", b"%d" % maxlen, b"*")


def _unique_args(
    client: Any,
    stream: str,
    fields: list[bytes],
    unique_key: str,
    options: PublishOptions,
    maxlen: int | None,
) -> tuple[list[str], list[Any]]:
    if not keys.slot_safe(stream) and is_cluster_client(client):
        raise SlotUnsafeStream(stream, "take a publish with a unique_key")
    script_keys = [stream, keys.unique_key(stream)]
    args = [unique_key, int(options.unique_ttl * 1000), "" if maxlen is None else maxlen, *fields]
    return script_keys, args


def _message_fields(message: Message, *, event_id: bytes | None = None, ts: int | None = None) -> list[bytes]:
    return encode_event(
        message.type,
        message.data,
        event_id=event_id,
        ts=ts,
        correlation_id=message.correlation_id,
        reply_to=message.reply_to,
        unique_key=message.unique_key,
    )


def _queue_unique(pipe: Any, scripts: Scripts, script_keys: list[str], args: list[Any]) -> None:
    """Queue a unique publish on ``pipe`` as a raw EVALSHA (see the module docstring)."""
    pipe.execute_command("EVALSHA", scripts.publish_unique.sha, len(script_keys), *script_keys, *args)


def _queue_chunk(
    pipe: Any,
    producer: Producer | AsyncProducer,
    stream: str,
    maxlen: int | None,
    chunk: Sequence[Message | tuple[str, Any]],
) -> dict[int, tuple[list[str], list[Any]]]:
    """Queue one pipeline of publishes; return the unique ones by position, to re-run after a NOSCRIPT.

    This is ``publish_many``'s per-event loop, so it does per event only what differs between
    events: the XADD head, the timestamp (the chunk leaves in one round trip) and the random bytes
    of the event ids are made once per chunk, and a ``(type, data)`` tuple is encoded as it is,
    without a :class:`Message` built around it. The fields are :func:`encode_event`'s, as for
    ``publish``.
    """
    head = _xadd_head(stream, maxlen)
    ts = now_ms()
    event_ids = new_event_ids(len(chunk))
    scripted: dict[int, tuple[list[str], list[Any]]] = {}
    for n, item in enumerate(chunk):
        if isinstance(item, Message):
            fields = _message_fields(item, event_id=event_ids[n], ts=ts)
            if item.unique_key is not None:
                script_keys, args = _unique_args(
                    producer.client, stream, fields, item.unique_key, producer.options, maxlen
                )
                _queue_unique(pipe, producer.scripts, script_keys, args)
                scripted[n] = (script_keys, args)
                continue
        else:
            type_, data = item
            fields = encode_event(type_, data, event_id=event_ids[n], ts=ts)
        pipe.execute_command(*head, *fields)
    return scripted


def _first_error(results: list[Any]) -> None:
    for result in results:
        if isinstance(result, Exception):
            raise result


def _entry_id(raw: bytes | str | None) -> str | None:
    if raw is None:
        return None
    return raw.decode() if isinstance(raw, bytes) else raw


def reply_payload(result: Any) -> str:
    return dumps({"ok": True, "result": result})


def error_reply_payload(error: str) -> str:
    return dumps({"ok": False, "error": error})


def _reply_result(correlation_id: str, raw: bytes) -> Any:
    payload = loads(raw)
    if payload.get("ok"):
        return payload.get("result")
    raise RequestFailed(correlation_id, str(payload.get("error")))


_UNSET: Any = object()


# Sync twin of AsyncProducer: the two differ only in their awaits.
class Producer:
    """Publishes on a synchronous client: safe to share between threads."""

    def __init__(self, client: SyncClient, scripts: Scripts, options: PublishOptions) -> None:
        self.client = client
        self.scripts = scripts
        self.options = options
        self._loaded = False

    def publish(
        self,
        stream: str,
        type: str,
        data: Any = None,
        *,
        correlation_id: str | None = None,
        reply_to: str | None = None,
        unique_key: str | None = None,
        maxlen: int | None = _UNSET,
    ) -> str:
        """XADD one event; return its entry ID. Raise :class:`DuplicateEvent` if its ``unique_key`` is held."""
        maxlen = self.options.maxlen if maxlen is _UNSET else maxlen
        fields = encode_event(
            type, data, correlation_id=correlation_id, reply_to=reply_to, unique_key=unique_key
        )
        if unique_key is None:
            return _entry_id(self.client.execute_command(*_xadd_head(stream, maxlen), *fields))  # type: ignore[no-untyped-call, return-value]  # XADD without NOMKSTREAM always replies with the ID; execute_command is unannotated, and mypy applies untyped_calls_exclude to no union client
        script_keys, args = _unique_args(self.client, stream, fields, unique_key, self.options, maxlen)
        entry_id = _entry_id(self.scripts.publish_unique(keys=script_keys, args=args, client=self.client))
        if entry_id is None:
            raise DuplicateEvent(stream, unique_key)
        return entry_id

    def publish_many(
        self,
        stream: str,
        messages: Iterable[Message | tuple[str, Any]],
        *,
        maxlen: int | None = _UNSET,
        chunk: int = 1_000,
    ) -> list[str | None]:
        """XADD many events in pipelines of ``chunk``; ``None`` marks a refused duplicate.

        Not a transaction: after a connection error some of the batch may be published. Give
        each message a ``unique_key`` to make a retried batch safe.
        """
        maxlen = self.options.maxlen if maxlen is _UNSET else maxlen
        ids: list[str | None] = []
        batch = messages if isinstance(messages, list | tuple) else list(messages)
        for start in range(0, len(batch), chunk):
            pipe = self.client.pipeline(transaction=False)
            scripted = _queue_chunk(pipe, self, stream, maxlen, batch[start : start + chunk])
            if scripted and not self._loaded:
                self.client.script_load(source("publish_unique"))
                self._loaded = True
            results = pipe.execute(raise_on_error=False)
            for n, (script_keys, args) in scripted.items():
                if isinstance(results[n], NoScriptError):
                    results[n] = self.scripts.publish_unique(keys=script_keys, args=args, client=self.client)
            _first_error(results)
            ids += (_entry_id(raw) for raw in results)
        return ids

    def request(self, stream: str, type: str, data: Any = None, *, timeout: float = 5.0) -> Any:
        """Publish an event that asks for a reply and wait for it on ``reply:{correlation_id}``.

        Raise :class:`RequestTimeout` when no reply arrives in ``timeout`` seconds, and
        :class:`RequestFailed` when the handler gave up on it (the event was dead-lettered).
        """
        correlation_id = new_event_id()
        reply_to = keys.reply_key(correlation_id)
        self.publish(stream, type, data, correlation_id=correlation_id, reply_to=reply_to)
        got = cast("tuple[bytes, bytes] | None", self.client.blpop([reply_to], timeout=timeout))
        if got is None:
            raise RequestTimeout(stream, type, correlation_id, timeout)
        return _reply_result(correlation_id, got[1])


# Async twin of Producer: the two differ only in their awaits.
class AsyncProducer:
    """The asyncio twin of :class:`Producer`, for handlers and services running in an event loop."""

    def __init__(self, client: AsyncClient, scripts: Scripts, options: PublishOptions) -> None:
        self.client = client
        self.scripts = scripts
        self.options = options
        self._loaded = False

    async def publish(
        self,
        stream: str,
        type: str,
        data: Any = None,
        *,
        correlation_id: str | None = None,
        reply_to: str | None = None,
        unique_key: str | None = None,
        maxlen: int | None = _UNSET,
    ) -> str:
        maxlen = self.options.maxlen if maxlen is _UNSET else maxlen
        fields = encode_event(
            type, data, correlation_id=correlation_id, reply_to=reply_to, unique_key=unique_key
        )
        if unique_key is None:
            return _entry_id(await self.client.execute_command(*_xadd_head(stream, maxlen), *fields))  # type: ignore[return-value]  # XADD without NOMKSTREAM always replies with the ID
        script_keys, args = _unique_args(self.client, stream, fields, unique_key, self.options, maxlen)
        entry_id = _entry_id(
            await self.scripts.publish_unique(keys=script_keys, args=args, client=self.client)
        )
        if entry_id is None:
            raise DuplicateEvent(stream, unique_key)
        return entry_id

    async def publish_many(
        self,
        stream: str,
        messages: Iterable[Message | tuple[str, Any]],
        *,
        maxlen: int | None = _UNSET,
        chunk: int = 1_000,
    ) -> list[str | None]:
        maxlen = self.options.maxlen if maxlen is _UNSET else maxlen
        ids: list[str | None] = []
        batch = messages if isinstance(messages, list | tuple) else list(messages)
        for start in range(0, len(batch), chunk):
            pipe = self.client.pipeline(transaction=False)
            scripted = _queue_chunk(pipe, self, stream, maxlen, batch[start : start + chunk])
            if scripted and not self._loaded:
                await self.client.script_load(source("publish_unique"))
                self._loaded = True
            results = await pipe.execute(raise_on_error=False)
            for n, (script_keys, args) in scripted.items():
                if isinstance(results[n], NoScriptError):
                    results[n] = await self.scripts.publish_unique(
                        keys=script_keys, args=args, client=self.client
                    )
            _first_error(results)
            ids += (_entry_id(raw) for raw in results)
        return ids

    async def request(self, stream: str, type: str, data: Any = None, *, timeout: float = 5.0) -> Any:
        correlation_id = new_event_id()
        reply_to = keys.reply_key(correlation_id)
        await self.publish(stream, type, data, correlation_id=correlation_id, reply_to=reply_to)
        got = cast("tuple[bytes, bytes] | None", await self.client.blpop([reply_to], timeout=timeout))
        if got is None:
            raise RequestTimeout(stream, type, correlation_id, timeout)
        return _reply_result(correlation_id, got[1])
