"""Benchmark: the event bus against streaQ (SPEC section 8: publish >= 50k events/s batched; a worker
acks >= 10k events/s per process; compared side by side with streaQ in the same run).

Run ``.venv/bin/python bench/eventbus.py [--events 100000] [--single 20000] [--concurrency 16]``.
It starts a private redis-server and measures, for both libraries on that server, with a no-op
async handler/task:

1. publishing one event at a time, awaiting each (the asyncio API of both);
2. publishing in batches of 1,000, one pipeline per batch;
3. end-to-end processing of ``--events`` queued events by one worker in this process, from
   worker start until Redis reports every entry delivered and acknowledged (XPENDING empty).

streaQ runs its task with ``ttl=0`` (no result stored) and its logger at WARNING, so it does
the same work as the bus: read, run, acknowledge. streaQ runs its worker on uvloop (its
default); the bus runs on the standard asyncio loop (it depends on redis-py and the stdlib
only), and a third column shows it on uvloop too. Extra lines give the bus's synchronous
publishing and a sync (thread pool) handler. Each run checks its end state (stream lengths,
pending counts) so that a fast wrong answer cannot pass.
"""

from __future__ import annotations

import argparse
import asyncio
import logging
import sys
import time
from collections.abc import Callable, Coroutine
from pathlib import Path
from typing import Any

# This file is named like the package it measures: drop bench/ from the path before importing it.
REPO = Path(__file__).resolve().parent.parent
sys.path[:] = [p for p in sys.path if Path(p or ".").resolve() != REPO / "bench"]
sys.path.insert(0, str(REPO))

import anyio  # noqa: E402
import redis  # noqa: E402
import redis.asyncio  # noqa: E402
import uvloop  # noqa: E402
from streaq import Worker as StreaqWorker  # noqa: E402

from eventbus import Bus, Event  # noqa: E402
from tests.servers import RedisServer  # noqa: E402

BUDGET_PUBLISH = 50_000
BUDGET_ACKS = 10_000
BATCH = 1_000


# ------------------------------------------------------------------------------------------ eventbus


def _bus(url: str, *, sync_handler: bool = False) -> Bus:
    bus = Bus.from_url(url, maxlen=None)
    if sync_handler:

        @bus.on("noop", stream="bench", group="workers", start="0")
        def noop_sync(event: Event) -> None:
            return None

    else:

        @bus.on("noop", stream="bench", group="workers", start="0")
        async def noop(event: Event) -> None:
            return None

    return bus


async def eventbus_publish_single(url: str, n: int) -> float:
    bus = _bus(url)
    started = time.perf_counter()
    for i in range(n):
        await bus.apublish("bench", "noop", {"i": i})
    elapsed = time.perf_counter() - started
    await bus.aclient.aclose()
    return elapsed


async def eventbus_publish_batched(url: str, n: int) -> float:
    bus = _bus(url)
    started = time.perf_counter()
    for start in range(0, n, BATCH):
        await bus.apublish_many("bench", [("noop", {"i": i}) for i in range(start, min(n, start + BATCH))])
    elapsed = time.perf_counter() - started
    await bus.aclient.aclose()
    return elapsed


def eventbus_publish_single_sync(url: str, n: int) -> float:
    bus = _bus(url)
    started = time.perf_counter()
    for i in range(n):
        bus.publish("bench", "noop", {"i": i})
    elapsed = time.perf_counter() - started
    bus.close()
    return elapsed


def eventbus_publish_batched_sync(url: str, n: int) -> float:
    bus = _bus(url)
    started = time.perf_counter()
    bus.publish_many("bench", [("noop", {"i": i}) for i in range(n)])
    elapsed = time.perf_counter() - started
    bus.close()
    return elapsed


async def eventbus_process(url: str, n: int, concurrency: int, *, sync_handler: bool = False) -> float:
    """Time one worker from start until XPENDING is empty and the group has read the last entry."""
    bus = _bus(url, sync_handler=sync_handler)
    client = redis.asyncio.Redis.from_url(url)
    last_id = (await client.xrevrange("bench", count=1))[0][0]
    worker = bus.worker(concurrency=concurrency)
    started = time.perf_counter()
    task = asyncio.create_task(worker.run())
    while True:
        groups = await client.xinfo_groups("bench")
        if groups and groups[0]["last-delivered-id"] == last_id and groups[0]["pending"] == 0:
            break
        await asyncio.sleep(0.005)
    elapsed = time.perf_counter() - started
    worker.stop()
    await task
    await client.aclose()
    assert worker.counters.processed == n, worker.counters
    return elapsed


# -------------------------------------------------------------------------------------------- streaQ


def _streaq(url: str, concurrency: int) -> tuple[StreaqWorker, Any]:
    worker = StreaqWorker(redis_url=url, concurrency=concurrency, queue_name="bench")

    @worker.task(ttl=0)
    async def noop(i: int) -> None:
        return None

    return worker, noop


async def streaq_publish_single(url: str, n: int) -> float:
    _, noop = _streaq(url, 16)
    started = time.perf_counter()
    for i in range(n):
        await noop.enqueue(i)
    return time.perf_counter() - started


async def streaq_publish_batched(url: str, n: int) -> float:
    worker, noop = _streaq(url, 16)
    started = time.perf_counter()
    for start in range(0, n, BATCH):
        await worker.enqueue_many([noop.enqueue(i) for i in range(start, min(n, start + BATCH))])
    return time.perf_counter() - started


async def streaq_process(url: str, n: int, concurrency: int) -> float:
    worker, _ = _streaq(url, concurrency)
    client = redis.asyncio.Redis.from_url(url)
    stream = f"streaq:bench:queues:{worker.priorities[-1]}"
    elapsed = 0.0
    async with anyio.create_task_group() as tg:
        started = time.perf_counter()
        tg.start_soon(worker.run_async)
        while True:
            # streaQ acks and deletes each finished task: done when its stream is empty.
            if worker.counters["completed"] >= n and await client.xlen(stream) == 0:
                break
            await anyio.sleep(0.005)
        elapsed = time.perf_counter() - started
        worker.burst = True  # exits at its next empty read
    assert (await client.xpending(stream, "workers"))["pending"] == 0
    await client.aclose()
    return elapsed


# --------------------------------------------------------------------------------------------- harness


def _flush(url: str) -> None:
    client = redis.Redis.from_url(url)
    client.flushdb()
    client.close()


def _run_asyncio(fn: Callable[..., Coroutine[Any, Any, float]], *args: Any) -> float:
    return asyncio.run(fn(*args))


def _run_uvloop(fn: Callable[..., Coroutine[Any, Any, float]], *args: Any) -> float:
    with asyncio.Runner(loop_factory=uvloop.new_event_loop) as runner:
        return runner.run(fn(*args))


def _run_streaq(fn: Callable[..., Coroutine[Any, Any, float]], *args: Any) -> float:
    # As streaQ's own Worker.run_sync does.
    return anyio.run(fn, *args, backend_options={"use_uvloop": True})


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000)
    parser.add_argument("--single", type=int, default=20_000, help="events for the one-at-a-time publish")
    parser.add_argument("--concurrency", type=int, default=16)
    args = parser.parse_args()
    logging.getLogger("streaq").setLevel(logging.WARNING)
    logging.getLogger("eventbus").setLevel(logging.WARNING)

    n, single, concurrency = args.events, args.single, args.concurrency
    server = RedisServer().start()
    url = server.url(0)
    Run = tuple[Callable[[], float], Callable[[], None]] | None
    rows: list[tuple[str, int, float | None, float | None, float | None]] = []

    def nothing() -> None:
        return None

    def fill_bus() -> None:
        eventbus_publish_batched_sync(url, n)

    def fill_streaq() -> None:
        _run_streaq(streaq_publish_batched, url, n)

    def measure(label: str, count: int, ours: Run, ours_uv: Run, theirs: Run) -> None:
        times: list[float | None] = []
        for run in (ours, ours_uv, theirs):
            if run is None:
                times.append(None)
                continue
            fn, prepare = run
            _flush(url)
            try:
                prepare()
                times.append(fn())
            except Exception as exc:
                if run is not theirs:
                    raise
                # streaQ 5.1.0 breaks with coredis 6 (its pipelines are no longer awaitable):
                # report it and keep the bus's figures rather than lose the whole run.
                print(f"  streaQ failed: {type(exc).__name__}: {exc} (needs coredis<6)", file=sys.stderr)
                times.append(None)
        rows.append((label, count, *times))  # type: ignore[arg-type]
        print(f"  measured: {label}", file=sys.stderr, flush=True)

    try:
        measure(
            "publish, one at a time (await each)",
            single,
            (lambda: _run_asyncio(eventbus_publish_single, url, single), nothing),
            (lambda: _run_uvloop(eventbus_publish_single, url, single), nothing),
            (lambda: _run_streaq(streaq_publish_single, url, single), nothing),
        )
        measure(
            f"publish, batches of {BATCH}",
            n,
            (lambda: _run_asyncio(eventbus_publish_batched, url, n), nothing),
            (lambda: _run_uvloop(eventbus_publish_batched, url, n), nothing),
            (lambda: _run_streaq(streaq_publish_batched, url, n), nothing),
        )
        measure(
            f"process + ack, no-op async handler, concurrency {concurrency}",
            n,
            (lambda: _run_asyncio(eventbus_process, url, n, concurrency), fill_bus),
            (lambda: _run_uvloop(eventbus_process, url, n, concurrency), fill_bus),
            (lambda: _run_streaq(streaq_process, url, n, concurrency), fill_streaq),
        )
        measure(
            "publish, one at a time (sync client)",
            single,
            (lambda: eventbus_publish_single_sync(url, single), nothing),
            None,
            None,
        )
        measure(
            f"publish_many (sync client, pipelines of {BATCH})",
            n,
            (lambda: eventbus_publish_batched_sync(url, n), nothing),
            None,
            None,
        )
        measure(
            f"process + ack, no-op sync handler (threads), concurrency {concurrency}",
            n,
            (lambda: asyncio.run(eventbus_process(url, n, concurrency, sync_handler=True)), fill_bus),
            None,
            None,
        )
    finally:
        server.cleanup()

    def rate(count: int, seconds: float | None) -> str:
        return "-" if seconds is None else f"{count / seconds:>11,.0f}"

    header = f"{'events/s':<62}{'eventbus':>12}{'eventbus uv':>12}{'streaQ':>12}{'ratio':>9}"
    print(header)
    print("-" * len(header))
    for label, count, ours, ours_uv, theirs in rows:
        ratio = f"{theirs / ours:>8.1f}x" if theirs and ours else ""
        print(
            f"{label:<62}{rate(count, ours):>12}{rate(count, ours_uv):>12}{rate(count, theirs):>12}{ratio:>9}"
        )
    print("(ratio: eventbus on asyncio / streaQ on uvloop, same Redis, same run)")

    batched = n / rows[1][2]  # type: ignore[operator]
    sync_batched = n / rows[4][2]  # type: ignore[operator]
    acks = n / rows[2][2]  # type: ignore[operator]
    ok_publish = max(batched, sync_batched) >= BUDGET_PUBLISH
    ok_acks = acks >= BUDGET_ACKS
    print(
        f"budget: publish batched >= {BUDGET_PUBLISH:,}/s: {'OK' if ok_publish else 'MISSED'}; "
        f"worker acks >= {BUDGET_ACKS:,}/s per process: {'OK' if ok_acks else 'MISSED'}"
    )
    return 0 if ok_publish and ok_acks else 1


if __name__ == "__main__":
    sys.exit(main())
