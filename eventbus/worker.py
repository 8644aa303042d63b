"""The consumer-group worker: reads, runs handlers, acknowledges, retries, reclaims.

One worker is one asyncio task group in one process, and one consumer (named
``host-pid-random``) in each consumer group it runs. Its parts:

* a **reader** per group: ``XREADGROUP ... BLOCK`` over all of the group's streams, asking for
  no more entries than there is room for (``concurrency + prefetch`` minus what is held); on a
  Redis Cluster, where one XREADGROUP may only name keys of one hash slot, a reader per group and
  slot (each blocks on its own connection to that slot's node, so a group over many untagged
  streams holds one connection per stream; streams named with one ``{tag}`` share a reader);
* ``concurrency`` **runners** taking entries from a local queue and calling handlers (async
  handlers in the loop, sync ones in a thread pool of the same size);
* a **flusher** that sends, in one pipeline, the replies and XACKs of finished handlers and the
  metric events (each to its stream's ``{stream}:metrics``): one round trip however many entries
  finished meanwhile (one per node on a cluster, where redis-py splits the pipeline), so acks
  batch themselves under load and still go out at once when idle;
* a **maintenance** task that pumps due retries back into their streams, reclaims entries idle
  past the lease with XAUTOCLAIM (whose third reply element, from Redis 7, lists pending IDs
  already deleted from the stream: Redis drops those from the PEL, and we count them as
  ``dropped``), and heartbeats entries held longer than a third of the lease so that a long
  handler keeps its entry.

Guarantees: an entry is acknowledged only after its handler returned (or after it was moved, in
the same Lua script, to the retry set or the DLQ), so a crash at any point means redelivery,
never loss: delivery is at least once, and handlers must be idempotent (``event.id`` is stable
across retries and redeliveries).

Shutdown (SIGTERM, SIGINT, :meth:`Worker.stop`): readers stop after their current block,
entries fetched but not started are released (marked idle for a full lease, so any worker's next
reclaim takes them at once), running handlers get ``shutdown_timeout`` seconds to finish, then
async ones are cancelled and their entries released too. A second signal skips the wait.
"""

from __future__ import annotations

import asyncio
import contextlib
import logging
import os
import secrets
import signal
import socket
import time
import traceback
from collections import defaultdict
from collections.abc import Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from typing import Any, cast

import redis
import redis.asyncio
from redis.crc import key_slot

from . import keys, metrics
from .codec import Event, decode_event, field_retries, target_group
from .connection import REDIS_ERRORS, is_cluster_client
from .dlq import format_error, move_to_dlq
from .errors import MalformedEvent, Reject, SlotUnsafeStream
from .leases import Leases, reclaim
from .producer import error_reply_payload, reply_payload
from .replies import StreamsReply
from .retry import pump_due, schedule_retry
from .router import Handler, Subscription
from .scripts import Scripts

log = logging.getLogger("eventbus.worker")


def default_consumer_name() -> str:
    return f"{socket.gethostname()}-{os.getpid()}-{secrets.token_hex(3)}"


@dataclass(frozen=True, slots=True)
class WorkerConfig:
    #: handlers running at once
    concurrency: int = 8
    #: entries fetched beyond the running ones, so runners never wait on a round trip
    prefetch: int | None = None
    #: how long one XREADGROUP blocks; also bounds how long shutdown waits for readers
    block_ms: int = 1_000
    #: an entry idle (not acked, not heartbeated) this long is reclaimed by another worker
    lease_ms: int = 30_000
    #: how often due retries are moved back to their streams
    pump_interval: float = 0.25
    #: seconds running handlers get to finish at shutdown
    shutdown_timeout: float = 30.0
    #: MAXLEN ~ used when re-adding retries (the bus's publish setting)
    stream_maxlen: int | None = 100_000
    dlq_maxlen: int | None = None
    reply_ttl: float = 60.0
    metrics: bool = True
    metrics_interval: float = 1.0
    #: MAXLEN ~ of each stream's ``{stream}:metrics``
    metrics_maxlen: int = 10_000
    consumer: str | None = None

    def __post_init__(self) -> None:
        if self.concurrency < 1:
            raise ValueError("concurrency must be >= 1")
        if self.lease_ms < 100:
            raise ValueError("lease_ms must be >= 100")

    @property
    def capacity(self) -> int:
        return self.concurrency + (self.concurrency if self.prefetch is None else self.prefetch)


@dataclass(slots=True)
class _Delivery:
    sub: Subscription
    entry_id: str
    #: ``None`` when the entry was deleted from the stream while pending
    fields: dict[bytes, bytes] | None
    deliveries: int = 1


@dataclass(slots=True)
class _Counters:
    processed: int = 0
    failed: int = 0
    retried: int = 0
    dead_lettered: int = 0
    reclaimed: int = 0
    released: int = 0
    skipped: int = 0


class Worker:
    """Runs the handlers of some subscriptions until stopped. Build it with ``bus.worker()``."""

    def __init__(
        self,
        client_factory: Any,
        subscriptions: Sequence[Subscription],
        config: WorkerConfig | None = None,
    ) -> None:
        if not subscriptions:
            raise ValueError("A worker needs at least one subscription (register handlers with @bus.on).")
        self.config = config or WorkerConfig()
        self.subscriptions = list(subscriptions)
        self.consumer = self.config.consumer or default_consumer_name()
        self.counters = _Counters()
        self._client_factory = client_factory
        self._client: redis.asyncio.Redis | None = None
        self._cluster = False
        self._scripts: Scripts | None = None
        self._loop: asyncio.AbstractEventLoop | None = None
        self._stopping: asyncio.Event | None = None
        self._stop_requested = False

    # ----------------------------------------------------------------------------------- control

    def stop(self) -> None:
        """Ask the worker to shut down gracefully; a second call skips the wait. Thread-safe."""
        loop = self._loop
        if loop is None or loop.is_closed():
            self._stop_requested = True
            return
        loop.call_soon_threadsafe(self._on_stop)

    def _on_stop(self) -> None:
        assert self._stopping is not None
        if self._stopping.is_set():
            log.warning("second stop request: not waiting for running handlers")
            self._runners_done.set()
        self._stopping.set()
        self._room.set()

    async def run(self, *, handle_signals: bool = False) -> None:
        """Run until :meth:`stop` (or SIGTERM/SIGINT with ``handle_signals``)."""
        cfg = self.config
        self._loop = asyncio.get_running_loop()
        self._stopping = asyncio.Event()
        self._room = asyncio.Event()
        self._dirty = asyncio.Event()
        self._runners_done = asyncio.Event()
        self._queue: asyncio.Queue[_Delivery | None] = asyncio.Queue()
        self._outstanding = 0
        self._closing = False
        self._leases = Leases(self.consumer, cfg.lease_ms)
        self._acks: dict[tuple[str, str], list[str]] = defaultdict(list)
        self._replies: list[tuple[str, str]] = []
        self._metrics = metrics.MetricsBuffer(self.consumer, cfg.metrics_interval, cfg.metrics)
        self._threads = ThreadPoolExecutor(max_workers=cfg.concurrency, thread_name_prefix="eventbus-handler")
        self._client = self._client_factory(socket_timeout=cfg.block_ms / 1000 + 10)
        self._cluster = is_cluster_client(self._client)
        self._scripts = Scripts.register(self._client)
        if self._stop_requested:
            self._stopping.set()
        if handle_signals:
            for sig in (signal.SIGTERM, signal.SIGINT):
                self._loop.add_signal_handler(sig, self._on_stop)
        try:
            self._check_slots()
            await self._ensure_groups()
            log.info(
                "worker %s started: %s, concurrency %d",
                self.consumer,
                ", ".join(f"{s.group}@{s.stream}" for s in self.subscriptions),
                cfg.concurrency,
            )
            await self._serve()
        finally:
            if handle_signals:
                for sig in (signal.SIGTERM, signal.SIGINT):
                    self._loop.remove_signal_handler(sig)
            self._threads.shutdown(wait=False, cancel_futures=True)
            await self._client.aclose()
            log.info("worker %s stopped: %s", self.consumer, self.counters)

    def _check_slots(self) -> None:
        """On a cluster, refuse at start a stream whose retries and dead letters could never run."""
        if not self._cluster:
            return
        for sub in self.subscriptions:
            if not keys.slot_safe(sub.stream):
                raise SlotUnsafeStream(sub.stream, "be handled by a worker")

    async def _ensure_groups(self) -> None:
        assert self._client is not None
        for sub in self.subscriptions:
            await ensure_group(self._client, sub.stream, sub.group, sub.start)

    async def _serve(self) -> None:
        assert self._stopping is not None
        cfg = self.config
        # One XREADGROUP per group, or per group and hash slot on a cluster.
        by_read: dict[tuple[str, int], list[Subscription]] = defaultdict(list)
        for sub in self.subscriptions:
            slot = key_slot(sub.stream.encode()) if self._cluster else 0
            by_read[(sub.group, slot)].append(sub)
        readers = [asyncio.create_task(self._reader(group, subs)) for (group, _), subs in by_read.items()]
        runners = [asyncio.create_task(self._runner()) for _ in range(cfg.concurrency)]
        flusher = asyncio.create_task(self._flusher())
        maintenance = asyncio.create_task(self._maintenance())

        await self._stopping.wait()
        log.info("worker %s stopping", self.consumer)
        # Readers finish their current XREADGROUP rather than being cancelled mid-reply, which
        # would leave entries delivered to us that we never saw (pending until a lease expires).
        # Likewise maintenance finishes its step: a cancelled XAUTOCLAIM may still have claimed.
        await asyncio.gather(*readers, maintenance, return_exceptions=True)
        await self._release_unstarted()
        for _ in runners:
            self._queue.put_nowait(None)
        running = asyncio.gather(*runners, return_exceptions=True)
        done_or_forced = asyncio.ensure_future(self._runners_done.wait())
        waited: list[asyncio.Future[Any]] = [running, done_or_forced]
        await asyncio.wait(
            waited, timeout=cfg.shutdown_timeout, return_when="FIRST_COMPLETED"
        )
        done_or_forced.cancel()
        if not running.done():
            log.warning("worker %s: handlers still running after shutdown timeout, cancelling", self.consumer)
            for task in runners:
                task.cancel()
            await asyncio.gather(*runners, return_exceptions=True)
            await self._release_held()
        self._closing = True
        self._dirty.set()
        await asyncio.gather(flusher, return_exceptions=True)
        await self._flush(final=True)
        await self._delete_consumer()

    # ---------------------------------------------------------------------------------- reading

    async def _reader(self, group: str, subs: list[Subscription]) -> None:
        assert self._client is not None and self._stopping is not None
        streams = {sub.stream: ">" for sub in subs}
        by_stream = {sub.stream.encode(): sub for sub in subs}
        capacity = self.config.capacity
        backoff = 0.1
        while not self._stopping.is_set():
            room = capacity - self._outstanding
            if room <= 0:
                self._room.clear()
                await self._room.wait()
                continue
            try:
                reply = await self._client.xreadgroup(
                    group,
                    self.consumer,
                    streams,  # type: ignore[arg-type]  # redis-py types XREADGROUP's streams as str-keyed; bytes keys travel to Redis as they are
                    count=max(1, room // len(subs)),
                    block=self.config.block_ms,
                )
            except REDIS_ERRORS as exc:
                if str(exc).startswith("NOGROUP"):
                    # An operator deleted the stream or the group: recreate it rather than spin.
                    log.warning("group %s vanished (%s): recreating", group, exc)
                    with contextlib.suppress(*REDIS_ERRORS):
                        for sub in subs:
                            await ensure_group(self._client, sub.stream, sub.group, sub.start)
                        continue
                log.warning("reader %s: %s; retrying in %.1fs", group, exc, backoff)
                await _sleep_unless(self._stopping, backoff)
                backoff = min(backoff * 2, 5.0)
                continue
            backoff = 0.1
            for stream_name, entries in cast(StreamsReply, reply) or ():
                sub = by_stream[stream_name]
                for entry_id, fields in entries:
                    self._accept(sub, entry_id.decode(), fields, 1)

    def _accept(
        self, sub: Subscription, entry_id: str, fields: dict[bytes, bytes] | None, deliveries: int
    ) -> None:
        self._leases.hold((sub.stream, sub.group), entry_id)
        self._outstanding += 1
        self._queue.put_nowait(_Delivery(sub, entry_id, fields, deliveries))

    # ---------------------------------------------------------------------------------- running

    async def _runner(self) -> None:
        while True:
            delivery = await self._queue.get()
            if delivery is None:
                return
            try:
                await self._process(delivery)
            except asyncio.CancelledError:
                raise  # still held: released by the shutdown that cancelled it
            except Exception:
                # Redis unreachable while recording the outcome: the entry stays pending, and
                # is reclaimed (here or elsewhere) once its lease expires, so nothing is lost.
                # Stop holding it, or the heartbeat would renew that lease for ever. Keep the
                # runner alive.
                self._unhold(delivery.sub, delivery.entry_id)
                log.exception(
                    "could not record the outcome of %s on %s", delivery.entry_id, delivery.sub.stream
                )
            finally:
                self._outstanding -= 1
                self._room.set()

    async def _process(self, d: _Delivery) -> None:
        sub = d.sub
        if d.fields is None:
            self._ack(sub, d.entry_id)
            self._metrics.event(metrics.DROPPED, stream=sub.stream, group=sub.group, entry_id=d.entry_id)
            return
        aimed_at = target_group(d.fields)
        if aimed_at is not None and aimed_at != sub.group.encode():
            # A retry re-added for another group of this stream: not ours to run again.
            self.counters.skipped += 1
            self._ack(sub, d.entry_id)
            return
        try:
            event = decode_event(sub.stream, sub.group, d.entry_id, d.fields, deliveries=d.deliveries)
        except MalformedEvent as exc:
            await self._dead_letter(d, None, format_error(exc), "", field_retries(d.fields))
            return
        handler = sub.handler_for(event.type)
        if handler is None:
            self.counters.skipped += 1
            self._ack(sub, d.entry_id)
            return
        if d.deliveries > handler.retry.max_deliveries:
            error = (
                f"PoisonEvent: delivered {d.deliveries} times without being acknowledged "
                "(its handler crashes the worker or outlives the lease)"
            )
            await self._dead_letter(d, event, error, "", event.retries)
            return

        started = time.perf_counter()
        try:
            result = await self._call(handler, event)
            payload = reply_payload(result) if event.reply_to else None
        except asyncio.CancelledError:
            raise
        except Reject as exc:
            elapsed = (time.perf_counter() - started) * 1000
            await self._failed(d, event, handler, exc, traceback.format_exc(), elapsed, final=True)
        except Exception as exc:
            elapsed = (time.perf_counter() - started) * 1000
            await self._failed(d, event, handler, exc, traceback.format_exc(), elapsed, final=False)
        else:
            elapsed = (time.perf_counter() - started) * 1000
            if payload is not None:
                self._replies.append((event.reply_to, payload))  # type: ignore[arg-type]  # reply_to is set whenever a payload is returned (checked where the handler runs)
            self._ack(sub, d.entry_id)
            self.counters.processed += 1
            self._metrics.processed(sub.stream, sub.group, event.type, elapsed)

    async def _call(self, handler: Handler, event: Event) -> Any:
        if handler.is_async:
            if handler.timeout is None:
                return await handler.fn(event)
            async with asyncio.timeout(handler.timeout):
                return await handler.fn(event)
        assert self._loop is not None
        return await self._loop.run_in_executor(self._threads, handler.fn, event)

    async def _failed(
        self,
        d: _Delivery,
        event: Event,
        handler: Handler,
        exc: BaseException,
        tb: str,
        elapsed_ms: float,
        *,
        final: bool,
    ) -> None:
        assert self._scripts is not None
        error = format_error(exc)
        self.counters.failed += 1
        self._event_metric(metrics.FAILED, d, event, duration_ms=elapsed_ms, error=error)
        policy = handler.retry
        if final or event.retries >= policy.max_retries:
            await self._dead_letter(d, event, error, tb, event.retries)
            return
        delay_ms = int(policy.delay(event.retries) * 1000)
        due = await schedule_retry(
            self._scripts, **self._held(d), delay_ms=delay_ms, retries=event.retries + 1
        )
        if not self._settled(d, due, "its retry could be scheduled"):
            return
        self.counters.retried += 1
        self._event_metric(metrics.RETRIED, d, event)
        log.info(
            "%s %s failed (retry %d/%d in %.2fs): %s",
            event.type,
            event.id,
            event.retries + 1,
            policy.max_retries,
            delay_ms / 1000,
            error,
        )

    async def _dead_letter(
        self, d: _Delivery, event: Event | None, error: str, tb: str, retries: int
    ) -> None:
        assert self._scripts is not None
        new_id = await move_to_dlq(
            self._scripts,
            **self._held(d),
            error=error,
            traceback=tb,
            retries=retries,
            maxlen=self.config.dlq_maxlen,
        )
        if not self._settled(d, new_id, "it could be dead-lettered"):
            return
        self.counters.dead_lettered += 1
        self._event_metric(metrics.DEAD_LETTERED, d, event, error=error)
        log.error("%s on %s dead-lettered after %d retries: %s", d.entry_id, d.sub.stream, retries, error)
        if event is not None and event.reply_to:
            # Tell a waiting requester now rather than let it time out.
            self._replies.append((event.reply_to, error_reply_payload(error)))
            self._dirty.set()

    def _held(self, d: _Delivery) -> dict[str, Any]:
        """The pending entry of ``d`` as this consumer holds it: what both outcome scripts start from."""
        assert d.fields is not None
        return {
            "stream": d.sub.stream,
            "group": d.sub.group,
            "entry_id": d.entry_id,
            "consumer": self.consumer,
            "fields": d.fields,
        }

    def _settled(self, d: _Delivery, outcome: object, what: str) -> bool:
        """Stop holding ``d`` once its outcome script ran; False when the lease was lost first."""
        self._unhold(d.sub, d.entry_id)
        if outcome is None:
            log.warning("%s on %s: lease lost before %s", d.entry_id, d.sub.stream, what)
            return False
        return True

    def _event_metric(self, kind: str, d: _Delivery, event: Event | None, **extra: Any) -> None:
        """One per-event metric entry for ``d`` (``event`` is None when the entry could not be decoded)."""
        self._metrics.event(
            kind,
            stream=d.sub.stream,
            group=d.sub.group,
            type_=event.type if event else "",
            entry_id=d.entry_id,
            event_id=event.id if event else "",
            **extra,
        )

    # --------------------------------------------------------------------------- acks, flushing

    def _ack(self, sub: Subscription, entry_id: str) -> None:
        self._acks[(sub.stream, sub.group)].append(entry_id)
        self._dirty.set()

    def _unhold(self, sub: Subscription, entry_id: str) -> None:
        self._leases.drop((sub.stream, sub.group), entry_id)

    async def _flusher(self) -> None:
        interval = self.config.metrics_interval
        while not self._closing:
            await _sleep_unless(self._dirty, interval)
            self._dirty.clear()
            if not await self._flush():
                await asyncio.sleep(0.5)

    async def _flush(self, *, final: bool = False) -> bool:
        """Send replies, acks and metrics in one pipeline; on failure keep them for the next try."""
        assert self._client is not None
        acks, self._acks = self._acks, defaultdict(list)
        replies, self._replies = self._replies, []
        entries = self._metrics.drain(force=final)
        if not (acks or replies or entries):
            return True
        pipe = self._client.pipeline(transaction=False)
        reply_ttl_ms = int(self.config.reply_ttl * 1000)
        # Replies go first: a requester must never see its request acked yet unanswered.
        for key, payload in replies:
            pipe.rpush(key, payload)
            pipe.pexpire(key, reply_ttl_ms)
        for (stream, group), ids in acks.items():
            pipe.xack(stream, group, *ids)
        for entry in entries:
            key = keys.metrics_key(entry["stream"])
            pipe.xadd(key, entry, maxlen=self.config.metrics_maxlen, approximate=True)  # type: ignore[arg-type]  # redis-py's xadd wants an invariant dict of its own field type; this one holds str
        try:
            results = await pipe.execute(raise_on_error=False)
        except REDIS_ERRORS as exc:
            # Connection lost, or on a cluster a node down (CLUSTERDOWN) or a slot moving: whether
            # any of it ran is unknown, and acks and replies are safe to send again.
            log.warning(
                "flush failed (%s): keeping %d acks for the next try", exc, sum(map(len, acks.values()))
            )
            for pair, ids in acks.items():
                self._acks[pair][:0] = ids
            self._replies[:0] = replies
            return False
        for result in results:
            if isinstance(result, Exception):
                # NOGROUP after an operator deleted a group, say: nothing a retry would fix.
                log.warning("flush: %s", result)
        for pair, ids in acks.items():
            for entry_id in ids:
                self._leases.drop(pair, entry_id)
        return True

    # ----------------------------------------------------------------------------- maintenance

    async def _maintenance(self) -> None:
        assert self._stopping is not None
        cfg = self.config
        lease = cfg.lease_ms / 1000
        heartbeat_every = lease / 4
        reclaim_every = max(0.05, min(lease / 4, 5.0))
        cursors: dict[tuple[str, str], str] = {}
        next_pump = next_heartbeat = next_reclaim = 0.0
        while not self._stopping.is_set():
            now = time.monotonic()
            try:
                if now >= next_pump:
                    next_pump = now + cfg.pump_interval
                    await self._pump()
                if now >= next_heartbeat:
                    next_heartbeat = now + heartbeat_every
                    await self._leases.renew(self._scripts, older_than=lease / 3)
                if now >= next_reclaim:
                    next_reclaim = now + reclaim_every
                    await self._reclaim(cursors)
            except REDIS_ERRORS as exc:
                log.warning("maintenance: %s", exc)
            wake = min(next_pump, next_heartbeat, next_reclaim) - time.monotonic()
            await _sleep_unless(self._stopping, max(wake, 0.01))

    async def _pump(self) -> None:
        assert self._scripts is not None
        for stream in {sub.stream for sub in self.subscriptions}:
            await pump_due(self._scripts, stream, maxlen=self.config.stream_maxlen)

    async def _reclaim(self, cursors: dict[tuple[str, str], str]) -> None:
        assert self._client is not None
        for sub in self.subscriptions:
            room = self.config.capacity - self._outstanding
            if room <= 0:
                return
            key = (sub.stream, sub.group)
            step = await reclaim(
                self._client,
                stream=sub.stream,
                group=sub.group,
                consumer=self.consumer,
                min_idle_ms=self.config.lease_ms,
                cursor=cursors.get(key, "0-0"),
                count=min(room, 100),
            )
            cursors[key] = step.cursor
            for entry_id in step.deleted:
                self._metrics.event(metrics.DROPPED, stream=sub.stream, group=sub.group, entry_id=entry_id)
                log.warning("%s on %s was deleted while pending: dropped from the PEL", entry_id, sub.stream)
            for entry_id, fields, deliveries in step.claimed:
                if self._leases.holds(key, entry_id):
                    # Ours already (a heartbeat came late): it is queued or running here.
                    self._leases.hold(key, entry_id)
                    continue
                self.counters.reclaimed += 1
                self._metrics.event(metrics.RECLAIMED, stream=sub.stream, group=sub.group, entry_id=entry_id)
                self._accept(sub, entry_id, fields or None, deliveries)
            if step.claimed:
                log.info("reclaimed %d idle entries of %s/%s", len(step.claimed), sub.stream, sub.group)

    # -------------------------------------------------------------------------------- releasing

    async def _release_unstarted(self) -> None:
        """Hand back entries fetched but not started, so others need not wait out the lease."""
        unstarted: dict[tuple[str, str], list[str]] = defaultdict(list)
        while not self._queue.empty():
            item = self._queue.get_nowait()
            if item is not None:
                unstarted[(item.sub.stream, item.sub.group)].append(item.entry_id)
                self._outstanding -= 1
        await self._release(unstarted)

    async def _release_held(self) -> None:
        """After cancelling handlers: release whatever is still held and not acked."""
        acked = [(key, entry_id) for key, ids in self._acks.items() for entry_id in ids]
        await self._release(self._leases.unacked(acked))

    async def _release(self, entries: dict[tuple[str, str], list[str]]) -> None:
        assert self._scripts is not None
        if not any(entries.values()):
            return
        try:
            released = await self._leases.release(self._scripts, entries)
        except REDIS_ERRORS as exc:
            # They stay pending under this consumer and are reclaimed once the lease expires.
            log.warning("could not release unfinished entries: %s", exc)
            return
        self.counters.released += released
        log.info("released %d unfinished entries", released)

    async def _delete_consumer(self) -> None:
        assert self._scripts is not None
        for sub in self.subscriptions:
            try:
                await self._scripts.delete_consumer(keys=[sub.stream], args=[sub.group, self.consumer])
            except REDIS_ERRORS as exc:
                log.warning("could not remove consumer %s from %s: %s", self.consumer, sub.group, exc)


async def ensure_group(client: redis.asyncio.Redis, stream: str, group: str, start: str) -> bool:
    """Create ``group`` on ``stream`` (and the stream) at ``start``; False if it already existed."""
    try:
        await client.xgroup_create(stream, group, id=start, mkstream=True)
    except redis.ResponseError as exc:
        if "BUSYGROUP" in str(exc):
            return False
        raise
    return True


async def _sleep_unless(event: asyncio.Event, seconds: float) -> None:
    with contextlib.suppress(TimeoutError):
        await asyncio.wait_for(event.wait(), timeout=seconds)
