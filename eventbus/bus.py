"""The :class:`Bus`: the one object an application builds, registers handlers on, and publishes with."""

from __future__ import annotations

import asyncio
import threading
import weakref
from collections.abc import Callable, Iterable, Iterator
from dataclasses import replace
from typing import Any, TypeVar

import redis
import redis.asyncio

from . import keys
from .connection import AsyncClient, Connector, SyncClient
from .producer import _UNSET, AsyncProducer, Message, Producer, PublishOptions
from .progress import AsyncProgress, Progress, ProgressEvent, ProgressOptions, subscribe
from .retry import RetryPolicy
from .router import Router
from .scripts import Scripts
from .worker import Worker, WorkerConfig

F = TypeVar("F", bound=Callable[..., Any])


class Bus:
    """An event bus on one Redis database, or on one Redis Cluster.

    The URL may say which (``?cluster=yes`` or ``?cluster=no``); otherwise the first client asks
    the server once (see :mod:`eventbus.connection`). On a cluster, publishing, workers, retries,
    dead letters, unique keys, request/reply and progress streams work for streams in any slot:
    a stream's own keys are named into its slot (:mod:`eventbus.keys`).

    Building a ``Bus`` opens no connection: clients are created on first use, the synchronous one
    shared by all threads, an asyncio one per event loop.

    ``maxlen`` trims every stream the bus publishes to (MAXLEN ~, so Redis trims whole nodes
    cheaply); entries a slow group has not read yet are trimmed too, so size it to the backlog
    you are willing to keep. ``dlq_maxlen`` caps dead-letter streams (default: never trimmed,
    dead letters wait for an operator). ``unique_ttl`` is how long a uniqueness key refuses
    duplicates; ``reply_ttl`` how long an unread reply is kept. ``metrics=False`` stops the
    metric events; ``metrics_maxlen`` caps each stream's ``{stream}:metrics`` (about 2.8 hours of
    one group and event type, whose successes are written once a second). ``redis_kwargs`` go to
    redis-py (responses are always bytes, in RESP2; on a cluster, options its cluster client does not take
    are left out).
    """

    def __init__(
        self,
        url: str = "redis://localhost:6379/0",
        *,
        maxlen: int | None = 100_000,
        unique_ttl: float = 86_400.0,
        dlq_maxlen: int | None = None,
        reply_ttl: float = 60.0,
        metrics: bool = True,
        metrics_maxlen: int = 10_000,
        progress_prefix: str = "progress:",
        progress: ProgressOptions | None = None,
        redis_kwargs: dict[str, Any] | None = None,
    ) -> None:
        self.url = url
        self.router = Router()
        self.publish_options = PublishOptions(maxlen=maxlen, unique_ttl=unique_ttl)
        self.dlq_maxlen = dlq_maxlen
        self.reply_ttl = reply_ttl
        self.metrics = metrics
        self.metrics_maxlen = metrics_maxlen
        self.progress_prefix = progress_prefix
        self.progress_options = progress or ProgressOptions()
        self._redis_kwargs = {
            "socket_keepalive": True,
            "socket_connect_timeout": 5.0,
            # no read timeout, as redis-py 5 had: a BLOCK (block_ms, a progress read) may outlast
            # redis-py 8's default of 5 s; keepalive and the health check find a dead peer
            "socket_timeout": None,
            "health_check_interval": 30,
            **(redis_kwargs or {}),
            "decode_responses": False,
            # RESP2: the bus reads raw execute_command replies as RESP2 arrays; redis-py 8 defaults to RESP3
            "protocol": 2,
        }
        self.connector = Connector(url, self._redis_kwargs)
        self._lock = threading.Lock()
        self._client: SyncClient | None = None
        self._producer: Producer | None = None
        self._async: weakref.WeakKeyDictionary[asyncio.AbstractEventLoop, AsyncProducer] = (
            weakref.WeakKeyDictionary()
        )

    @classmethod
    def from_url(cls, url: str, **options: Any) -> Bus:
        return cls(url, **options)

    # ------------------------------------------------------------------------------- clients

    @property
    def cluster(self) -> bool:
        """Whether the bus runs on a Redis Cluster (asks the server once when the URL does not say)."""
        return self.connector.cluster

    @property
    def client(self) -> SyncClient:
        """The synchronous client (bytes in, bytes out): ``RedisCluster`` on a cluster."""
        return self._sync().client

    def _sync(self) -> Producer:
        if self._producer is None:
            with self._lock:
                if self._producer is None:
                    client = self.connector.sync_client()
                    self._client = client
                    self._producer = Producer(client, Scripts.register(client), self.publish_options)
        return self._producer

    def _async_producer(self) -> AsyncProducer:
        # redis.asyncio connections belong to the loop that opened them: one client per loop.
        loop = asyncio.get_running_loop()
        producer = self._async.get(loop)
        if producer is None:
            client = self.async_client_factory()
            producer = self._async[loop] = AsyncProducer(
                client, Scripts.register(client), self.publish_options
            )
        return producer

    def async_client_factory(self, **overrides: Any) -> AsyncClient:
        """A new asyncio client on the bus's database (an asyncio ``RedisCluster`` on a cluster)."""
        return self.connector.async_client(**overrides)

    @property
    def aclient(self) -> AsyncClient:
        """The asyncio client of the running loop."""
        return self._async_producer().client

    def close(self) -> None:
        if self._client is not None:
            self._client.close()
        self._client = self._producer = None

    # ------------------------------------------------------------------------------ handlers

    def on(
        self,
        type: str,
        *,
        stream: str,
        group: str,
        start: str = "$",
        max_retries: int | None = None,
        retry: RetryPolicy | None = None,
        timeout: float | None = None,
    ) -> Callable[[F], F]:
        """Register a handler of ``type`` events on ``stream`` for consumer group ``group``.

        ``type="*"`` catches every type the group has no specific handler for. ``start`` is where
        the group begins when a worker first creates it: ``"$"`` (only events published from
        then on: the safe choice for a new group on a busy stream) or ``"0"`` (everything
        still in the stream). ``max_retries`` overrides ``retry.max_retries`` (default 5).
        ``timeout`` cancels an async handler that runs longer (counted as a failure).
        """
        policy = retry or RetryPolicy()
        if max_retries is not None:
            policy = replace(policy, max_retries=max_retries)

        def register(fn: F) -> F:
            self.router.add(
                fn, type=type, stream=stream, group=group, start=start, retry=policy, timeout=timeout
            )
            return fn

        return register

    # ---------------------------------------------------------------------------- publishing

    # Sync twin of apublish below: the two keep one signature.
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
        """Publish one event; return its entry ID.

        With ``unique_key``, raise :class:`~eventbus.errors.DuplicateEvent` if an event with the
        same key was published to ``stream`` within ``unique_ttl`` seconds.
        """
        return self._sync().publish(
            stream,
            type,
            data,
            correlation_id=correlation_id,
            reply_to=reply_to,
            unique_key=unique_key,
            maxlen=maxlen,
        )

    def publish_many(
        self, stream: str, messages: Iterable[Message | tuple[str, Any]], *, maxlen: int | None = _UNSET
    ) -> list[str | None]:
        """Publish a batch in pipelines (one round trip per 1,000); ``None`` marks a refused duplicate."""
        return self._sync().publish_many(stream, messages, maxlen=maxlen)

    def request(self, stream: str, type: str, data: Any = None, *, timeout: float = 5.0) -> Any:
        """Publish and wait for the handler's return value (see :class:`~eventbus.producer.Producer`)."""
        return self._sync().request(stream, type, data, timeout=timeout)

    # Async twin of publish above: the two keep one signature.
    async def apublish(
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
        return await self._async_producer().publish(
            stream,
            type,
            data,
            correlation_id=correlation_id,
            reply_to=reply_to,
            unique_key=unique_key,
            maxlen=maxlen,
        )

    async def apublish_many(
        self, stream: str, messages: Iterable[Message | tuple[str, Any]], *, maxlen: int | None = _UNSET
    ) -> list[str | None]:
        return await self._async_producer().publish_many(stream, messages, maxlen=maxlen)

    async def arequest(self, stream: str, type: str, data: Any = None, *, timeout: float = 5.0) -> Any:
        return await self._async_producer().request(stream, type, data, timeout=timeout)

    def forget_unique(self, stream: str, unique_key: str) -> bool:
        """Release a uniqueness key before its window ends; True if it was held."""
        return bool(self.client.zrem(keys.unique_key(stream), unique_key))

    # ------------------------------------------------------------------------------ progress

    def progress(self, task_key: str) -> Progress:
        """The progress stream of ``task_key``, to write to."""
        return Progress(self.client, keys.progress_key(task_key, self.progress_prefix), self.progress_options)

    def aprogress(self, task_key: str) -> AsyncProgress:
        return AsyncProgress(
            self.aclient, keys.progress_key(task_key, self.progress_prefix), self.progress_options
        )

    def subscribe(
        self, task_key: str, *, after: str | None = None, block_ms: int = 2_000
    ) -> Iterator[ProgressEvent]:
        """Replay ``task_key``'s progress after ``after`` (exclusive), then follow it to its end."""
        key = keys.progress_key(task_key, self.progress_prefix)
        for event in subscribe(self.client, key, after=after, block_ms=block_ms):
            if event is not None:
                yield event

    # ------------------------------------------------------------------------------- workers

    def worker(self, groups: Iterable[str] | None = None, *, concurrency: int = 8, **config: Any) -> Worker:
        """A worker for ``groups`` (all registered groups when ``None``); see :class:`WorkerConfig`."""
        settings = WorkerConfig(
            concurrency=concurrency,
            stream_maxlen=self.publish_options.maxlen,
            dlq_maxlen=self.dlq_maxlen,
            reply_ttl=self.reply_ttl,
            metrics=self.metrics,
            metrics_maxlen=self.metrics_maxlen,
            **config,
        )
        return Worker(self.async_client_factory, self.router.subscriptions(groups), settings)

    def run(self, groups: Iterable[str] | None = None, *, concurrency: int = 8, **config: Any) -> None:
        """Run a worker in this thread until SIGTERM or SIGINT (or, off the main thread, forever)."""
        worker = self.worker(groups, concurrency=concurrency, **config)
        handle_signals = threading.current_thread() is threading.main_thread()
        asyncio.run(worker.run(handle_signals=handle_signals))

    def ensure_groups(self, groups: Iterable[str] | None = None) -> None:
        """Create the consumer groups (and streams) now, e.g. before publishing in tests or deploys.

        Workers do this at start too; a group that already exists keeps its position.
        """
        for sub in self.router.subscriptions(groups):
            try:
                self.client.xgroup_create(sub.stream, sub.group, id=sub.start, mkstream=True)
            except redis.ResponseError as exc:
                if "BUSYGROUP" not in str(exc):
                    raise
