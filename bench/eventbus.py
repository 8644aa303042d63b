"""Benchmark: the event bus's publishing against raw redis-py, and its worker against streaQ (docs/performance.md#goals-and-floors).

Run ``.venv/bin/python bench/eventbus.py [--events 100000] [--single 10000] [--process-events 20000]
[--concurrency 16] [--repeat 5] [--process-repeat 3]``. It starts a private redis-server and measures,
on that server, in one run:

1. publishing one event at a time, awaiting each, against its floor: one awaited redis-py ``XADD``
   per event on a ``redis.asyncio`` client (the bus's asyncio API is what is measured);
2. ``apublish_many`` in batches of 1,000 against its floor: a non-transactional redis-py pipeline of
   the same 1,000 ``XADD``s per round trip;
3. end-to-end processing of queued events by one worker in this process, with a no-op async handler,
   from worker start until Redis reports every entry delivered and acknowledged, against streaQ
   doing the same (read, run, acknowledge; ``ttl=0`` so it stores no result) on the same Redis.

The floors write exactly what the bus writes: the same field names in the same order, the same JSON
bytes of ``data``, an id of the same form and a timestamp, and the same ``MAXLEN ~``. They are built
here, independently of the bus, before the clock starts, so a floor is only the cost of sending them;
after the run the bus's entries and the floor's are read back with XRANGE and compared, so that a
fast wrong answer cannot pass. Every goal figure is the median of ``--repeat`` runs (``--process-repeat``
for processing), each on a flushed database (processing: flushed, then filled with the same events).

Informational columns, measured once: the bus on uvloop (streaQ's default loop; the bus itself needs
only the stdlib loop) and streaQ's own publishing. Extra rows give the synchronous client against a
synchronous redis-py floor, and a sync (thread pool) handler. Last, a cProfile of one
``apublish_many`` run and one floor run shows, per event, where the time goes.

Goals (``bench/_summary.py`` rows): ``publish_many`` >= 0.7x its floor, one at a time >= 0.9x its
floor, process + ack >= 5x streaQ.
"""

from __future__ import annotations

import argparse
import asyncio
import cProfile
import json
import logging
import pstats
import statistics
import sys
import time
import uuid
from collections.abc import Callable, Coroutine
from dataclasses import dataclass, field
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

from bench._summary import at_least  # noqa: E402
from eventbus import Bus, Event  # noqa: E402
from tests.servers import RedisServer  # noqa: E402

BATCH = 1_000
#: The bus's default trimming (``Bus(maxlen=...)``), which it applies as ``MAXLEN ~``: the floors do too.
MAXLEN = 100_000
STREAM = "bench"

GOAL_MANY = 0.7
GOAL_SINGLE = 0.9
GOAL_PROCESS = 5.0


# ------------------------------------------------------------------------------------------ eventbus


def _bus(url: str, *, maxlen: int | None = MAXLEN, sync_handler: bool = False) -> Bus:
    bus = Bus.from_url(url, maxlen=maxlen)
    if sync_handler:

        @bus.on("noop", stream=STREAM, group="workers", start="0")
        def noop_sync(event: Event) -> None:
            return None

    else:

        @bus.on("noop", stream=STREAM, group="workers", start="0")
        async def noop(event: Event) -> None:
            return None

    return bus


async def eventbus_publish_single(url: str, n: int) -> float:
    bus = _bus(url)
    started = time.perf_counter()
    for i in range(n):
        await bus.apublish(STREAM, "noop", {"i": i})
    elapsed = time.perf_counter() - started
    await bus.aclient.aclose()
    return elapsed


async def eventbus_publish_batched(url: str, n: int, profile: cProfile.Profile | None = None) -> float:
    bus = _bus(url)
    started = time.perf_counter()
    if profile is not None:
        profile.enable()
    for start in range(0, n, BATCH):
        await bus.apublish_many(STREAM, [("noop", {"i": i}) for i in range(start, min(n, start + BATCH))])
    if profile is not None:
        profile.disable()
    elapsed = time.perf_counter() - started
    await bus.aclient.aclose()
    return elapsed


def eventbus_publish_single_sync(url: str, n: int) -> float:
    bus = _bus(url)
    started = time.perf_counter()
    for i in range(n):
        bus.publish(STREAM, "noop", {"i": i})
    elapsed = time.perf_counter() - started
    bus.close()
    return elapsed


def eventbus_publish_batched_sync(url: str, n: int) -> float:
    bus = _bus(url)
    started = time.perf_counter()
    for start in range(0, n, BATCH):
        bus.publish_many(STREAM, [("noop", {"i": i}) for i in range(start, min(n, start + BATCH))])
    elapsed = time.perf_counter() - started
    bus.close()
    return elapsed


def fill_bus(url: str, n: int) -> None:
    bus = _bus(url, maxlen=None)
    bus.publish_many(STREAM, [("noop", {"i": i}) for i in range(n)])
    bus.close()


async def eventbus_process(url: str, n: int, concurrency: int, *, sync_handler: bool = False) -> float:
    """Time one worker from start until XPENDING is empty and the group has read the last entry."""
    bus = _bus(url, maxlen=None, sync_handler=sync_handler)
    client = redis.asyncio.Redis.from_url(url)
    last_id = (await client.xrevrange(STREAM, count=1))[0][0]
    worker = bus.worker(concurrency=concurrency)
    started = time.perf_counter()
    task = asyncio.create_task(worker.run())
    while True:
        groups = await client.xinfo_groups(STREAM)
        if groups and groups[0]["last-delivered-id"] == last_id and groups[0]["pending"] == 0:
            break
        await asyncio.sleep(0.005)
    elapsed = time.perf_counter() - started
    worker.stop()
    await task
    await client.aclose()
    assert worker.counters.processed == n, worker.counters
    return elapsed


# ----------------------------------------------------------------------------------- raw redis-py floors


def raw_fields(n: int) -> list[dict[bytes, bytes]]:
    """The entries the bus writes for ``("noop", {"i": i})``, made without it, ready to send.

    Names and order from the wire format (``type``, ``data``, ``id``, ``ts``: see ``eventbus.keys``),
    ``data`` as compact JSON by the stdlib, ``id`` a uuid4 hex, ``ts`` milliseconds.
    """
    ts = str(time.time_ns() // 1_000_000).encode()
    return [
        {
            b"type": b"noop",
            b"data": json.dumps({"i": i}, separators=(",", ":")).encode(),
            b"id": uuid.uuid4().hex.encode(),
            b"ts": ts,
        }
        for i in range(n)
    ]


async def raw_publish_single(url: str, n: int) -> float:
    entries = raw_fields(n)
    client = redis.asyncio.Redis.from_url(url)
    started = time.perf_counter()
    for fields in entries:
        await client.xadd(STREAM, fields, maxlen=MAXLEN, approximate=True)
    elapsed = time.perf_counter() - started
    await client.aclose()
    return elapsed


async def raw_publish_batched(url: str, n: int, profile: cProfile.Profile | None = None) -> float:
    entries = raw_fields(n)
    client = redis.asyncio.Redis.from_url(url)
    started = time.perf_counter()
    if profile is not None:
        profile.enable()
    for start in range(0, n, BATCH):
        pipe = client.pipeline(transaction=False)
        for fields in entries[start : start + BATCH]:
            pipe.xadd(STREAM, fields, maxlen=MAXLEN, approximate=True)
        await pipe.execute()
    if profile is not None:
        profile.disable()
    elapsed = time.perf_counter() - started
    await client.aclose()
    return elapsed


def raw_publish_single_sync(url: str, n: int) -> float:
    entries = raw_fields(n)
    client = redis.Redis.from_url(url)
    started = time.perf_counter()
    for fields in entries:
        client.xadd(STREAM, fields, maxlen=MAXLEN, approximate=True)
    elapsed = time.perf_counter() - started
    client.close()
    return elapsed


def raw_publish_batched_sync(url: str, n: int) -> float:
    entries = raw_fields(n)
    client = redis.Redis.from_url(url)
    started = time.perf_counter()
    for start in range(0, n, BATCH):
        pipe = client.pipeline(transaction=False)
        for fields in entries[start : start + BATCH]:
            pipe.xadd(STREAM, fields, maxlen=MAXLEN, approximate=True)
        pipe.execute()
    elapsed = time.perf_counter() - started
    client.close()
    return elapsed


# -------------------------------------------------------------------------------------------- streaQ


def _streaq(url: str, concurrency: int) -> tuple[StreaqWorker, Any]:
    worker = StreaqWorker(redis_url=url, concurrency=concurrency, queue_name=STREAM)

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
    stream = f"streaq:{STREAM}:queues:{worker.priorities[-1]}"
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


COLUMNS = ("eventbus", "raw redis-py", "eventbus uv", "streaQ")


@dataclass
class Cell:
    """One contender of a row: how to run it once, what to do before each run, and how often to run it."""

    run: Callable[[], float]
    prepare: Callable[[], None] | None = None
    repeat: int = 1
    check: Callable[[], None] | None = None  # after the first run, before the next flush


@dataclass
class Row:
    label: str
    count: int
    rates: dict[str, float | None] = field(default_factory=dict)


def measure(url: str, label: str, count: int, cells: dict[str, Cell]) -> Row:
    """Median rate of each cell; repetitions interleave the cells so that a burst of load hits them alike."""
    runs: dict[str, list[float]] = {name: [] for name in cells}
    for rep in range(max(cell.repeat for cell in cells.values())):
        for name, cell in cells.items():
            if rep >= cell.repeat:
                continue
            _flush(url)
            try:
                if cell.prepare is not None:
                    cell.prepare()
                runs[name].append(count / cell.run())
                if rep == 0 and cell.check is not None:
                    cell.check()
            except Exception as exc:
                if name != "streaQ":
                    raise
                # streaQ 5.1.0 breaks with coredis 6 (its pipelines are no longer awaitable):
                # report it and keep the bus's figures rather than lose the whole run.
                print(f"  streaQ failed: {type(exc).__name__}: {exc} (needs coredis<6)", file=sys.stderr)
                cells = {k: v for k, v in cells.items() if k != "streaQ"}
                break
    print(f"  measured: {label}", file=sys.stderr, flush=True)
    return Row(label, count, {name: statistics.median(r) if r else None for name, r in runs.items()})


class Entries:
    """Keeps the first entries a contender wrote, to compare the bus's with its floor's."""

    def __init__(self, url: str) -> None:
        self.url = url
        self.kept: dict[str, list[dict[bytes, bytes]]] = {}

    def keep(self, name: str) -> Callable[[], None]:
        def read() -> None:
            client = redis.Redis.from_url(self.url)
            self.kept[name] = [fields for _, fields in client.xrange(STREAM, count=BATCH)]
            client.close()

        return read

    def assert_same(self, ours: str, floor: str) -> None:
        """Same names in the same order, same ``type`` and ``data`` bytes, ids and times of the same form."""
        mine, theirs = self.kept[ours], self.kept[floor]
        assert len(mine) == len(theirs) > 0, (ours, len(mine), floor, len(theirs))
        for a, b in zip(mine, theirs, strict=True):
            assert list(a) == list(b), (list(a), list(b))
            assert (a[b"type"], a[b"data"]) == (b[b"type"], b[b"data"]), (a, b)
            assert uuid.UUID(a[b"id"].decode()).version == 4 and len(a[b"id"]) == len(b[b"id"]) == 32
            assert abs(int(a[b"ts"]) - int(b[b"ts"])) < 3_600_000, (a[b"ts"], b[b"ts"])


# --------------------------------------------------------------------------------- where the time goes


def _category(func: tuple[str, int, str]) -> str:
    filename, _, name = func
    if "/eventbus/" in filename or "/json/" in filename:
        return "bus: encode events, build commands"
    if "/redis/" in filename:
        if name in ("pack_command", "pack_commands", "encode"):
            return "redis-py: pack commands"
        return "redis-py: queue, send, parse replies"
    if "/asyncio/" in filename or "selectors" in filename or "socket" in filename:
        return "event loop, socket"
    return "other"


def time_split(stats: pstats.Stats) -> dict[str, float]:
    """Own time per category; a builtin's time goes to its callers' categories, pro rata."""
    split: dict[str, float] = {}
    for func, (_, _, tottime, _, callers) in stats.stats.items():  # type: ignore[attr-defined]  # pstats.Stats.stats is set by its loader and missing from typeshed
        if func[0] == "~" and callers:
            total = sum(c[2] for c in callers.values()) or 1.0
            for caller, c in callers.items():
                category = _category(caller)
                split[category] = split.get(category, 0.0) + tottime * c[2] / total
        else:
            category = _category(func) if func[0] != "~" else "other"
            split[category] = split.get(category, 0.0) + tottime
    return split


def where_the_time_goes(url: str, n: int, measured: Row) -> None:
    """Profile one ``apublish_many`` run and one floor run; print microseconds per event by stage.

    The profiler adds a fixed cost to every Python call, so its totals are larger than the measured
    ones and redis-py's many small calls are inflated most: read the split, and the line below it.
    """
    splits: dict[str, dict[str, float]] = {}
    for name, fn in (("apublish_many", eventbus_publish_batched), ("raw pipeline", raw_publish_batched)):
        _flush(url)
        profile = cProfile.Profile()
        _run_asyncio(fn, url, n, profile)
        splits[name] = time_split(pstats.Stats(profile))
    categories = sorted(
        {c for split in splits.values() for c in split}, key=lambda c: -splits["apublish_many"].get(c, 0)
    )
    print(
        f"\nwhere the time goes, publish batches of {BATCH} (cProfile, µs per event; the profiler inflates Python calls):"
    )
    print(f"  {'':<42}{'apublish_many':>15}{'raw pipeline':>15}")
    for category in categories:
        values = [splits[name].get(category, 0.0) / n * 1e6 for name in splits]
        print(f"  {category:<42}{values[0]:>15.2f}{values[1]:>15.2f}")
    totals = [sum(split.values()) / n * 1e6 for split in splits.values()]
    print(f"  {'total':<42}{totals[0]:>15.2f}{totals[1]:>15.2f}")
    ours, floor = measured.rates["eventbus"], measured.rates["raw redis-py"]
    if ours and floor:
        print(f"  {'measured, unprofiled (median)':<42}{1e6 / ours:>15.2f}{1e6 / floor:>15.2f}")


# ---------------------------------------------------------------------------------------------- main


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--events", type=int, default=100_000, help="events for the batched publish")
    parser.add_argument("--single", type=int, default=10_000, help="events for the one-at-a-time publish")
    parser.add_argument("--process-events", type=int, default=20_000, help="events for process + ack")
    parser.add_argument("--concurrency", type=int, default=16)
    parser.add_argument("--repeat", type=int, default=5, help="runs of each publish figure (median)")
    parser.add_argument("--process-repeat", type=int, default=3, help="runs of each process figure (median)")
    parser.add_argument("--no-profile", action="store_true", help="skip where-the-time-goes")
    args = parser.parse_args()
    logging.getLogger("streaq").setLevel(logging.WARNING)
    logging.getLogger("eventbus").setLevel(logging.WARNING)

    n, single, processed, concurrency = args.events, args.single, args.process_events, args.concurrency
    reps, process_reps = args.repeat, args.process_repeat
    server = RedisServer().start()
    url = server.url(0)
    entries = Entries(url)
    rows: list[Row] = []
    try:
        rows.append(
            measure(
                url,
                "publish, one at a time (await each)",
                single,
                {
                    "eventbus": Cell(
                        lambda: _run_asyncio(eventbus_publish_single, url, single),
                        repeat=reps,
                        check=entries.keep("single"),
                    ),
                    "raw redis-py": Cell(
                        lambda: _run_asyncio(raw_publish_single, url, single),
                        repeat=reps,
                        check=entries.keep("single floor"),
                    ),
                    "eventbus uv": Cell(lambda: _run_uvloop(eventbus_publish_single, url, single)),
                    "streaQ": Cell(lambda: _run_streaq(streaq_publish_single, url, single)),
                },
            )
        )
        entries.assert_same("single", "single floor")
        rows.append(
            measure(
                url,
                f"publish_many, batches of {BATCH}",
                n,
                {
                    "eventbus": Cell(
                        lambda: _run_asyncio(eventbus_publish_batched, url, n),
                        repeat=reps,
                        check=entries.keep("many"),
                    ),
                    "raw redis-py": Cell(
                        lambda: _run_asyncio(raw_publish_batched, url, n),
                        repeat=reps,
                        check=entries.keep("many floor"),
                    ),
                    "eventbus uv": Cell(lambda: _run_uvloop(eventbus_publish_batched, url, n)),
                    "streaQ": Cell(lambda: _run_streaq(streaq_publish_batched, url, n)),
                },
            )
        )
        entries.assert_same("many", "many floor")
        rows.append(
            measure(
                url,
                f"process + ack, no-op async handler, concurrency {concurrency}",
                processed,
                {
                    "eventbus": Cell(
                        lambda: _run_asyncio(eventbus_process, url, processed, concurrency),
                        prepare=lambda: fill_bus(url, processed),
                        repeat=process_reps,
                    ),
                    "eventbus uv": Cell(
                        lambda: _run_uvloop(eventbus_process, url, processed, concurrency),
                        prepare=lambda: fill_bus(url, processed),
                    ),
                    "streaQ": Cell(
                        lambda: _run_streaq(streaq_process, url, processed, concurrency),
                        prepare=lambda: _run_streaq(streaq_publish_batched, url, processed),
                        repeat=process_reps,
                    ),
                },
            )
        )
        rows.append(
            measure(
                url,
                "sync client: publish, one at a time",
                single,
                {
                    "eventbus": Cell(lambda: eventbus_publish_single_sync(url, single), repeat=reps),
                    "raw redis-py": Cell(lambda: raw_publish_single_sync(url, single), repeat=reps),
                },
            )
        )
        rows.append(
            measure(
                url,
                f"sync client: publish_many, batches of {BATCH}",
                n,
                {
                    "eventbus": Cell(lambda: eventbus_publish_batched_sync(url, n), repeat=reps),
                    "raw redis-py": Cell(lambda: raw_publish_batched_sync(url, n), repeat=reps),
                },
            )
        )
        rows.append(
            measure(
                url,
                f"process + ack, no-op sync handler (threads), concurrency {concurrency}",
                processed,
                {
                    "eventbus": Cell(
                        lambda: asyncio.run(eventbus_process(url, processed, concurrency, sync_handler=True)),
                        prepare=lambda: fill_bus(url, processed),
                    )
                },
            )
        )
        if not args.no_profile:
            where_the_time_goes(url, n, rows[1])
    finally:
        server.cleanup()

    def rate(value: float | None) -> str:
        return "-" if value is None else f"{value:,.0f}"

    print()
    header = f"{'events/s (median)':<66}" + "".join(f"{c:>14}" for c in COLUMNS)
    print(header)
    print("-" * len(header))
    for row in rows:
        print(f"{row.label:<66}" + "".join(f"{rate(row.rates.get(c)):>14}" for c in COLUMNS))
    print(
        f"(eventbus and raw redis-py: medians of {reps} runs, process + ack of {process_reps}; "
        "eventbus uv: asyncio on uvloop; streaQ on uvloop)"
    )

    single_row, many_row, process_row = rows[0].rates, rows[1].rates, rows[2].rates
    ok = at_least("publish_many", many_row["eventbus"] or 0.0, many_row["raw redis-py"] or 0.0, GOAL_MANY)
    ok &= at_least(
        "publish one at a time", single_row["eventbus"] or 0.0, single_row["raw redis-py"] or 0.0, GOAL_SINGLE
    )
    ok &= at_least(
        "process + ack vs streaQ",
        process_row["eventbus"] or 0.0,
        process_row.get("streaQ") or 0.0,
        GOAL_PROCESS,
    )
    return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
