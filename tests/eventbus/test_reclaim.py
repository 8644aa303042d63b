"""Leases: entries of a dead consumer are reclaimed; a live handler's entry is not stolen."""

from __future__ import annotations

import asyncio
import json
import threading
import time

import pytest
import redis

from eventbus import Bus, Event, RetryPolicy
from tests.eventbus.conftest import running
from tests.polling import wait_for


def _ghost_reads(r: redis.Redis, stream: str, group: str, count: int) -> list[bytes]:
    """A consumer that reads and then dies: its entries stay pending under its name."""
    reply = r.xreadgroup(group, "ghost", {stream: ">"}, count=count)
    return [entry_id for entry_id, _ in reply[0][1]]


def test_entries_of_a_crashed_consumer_are_reclaimed(bus: Bus, r: redis.Redis) -> None:
    seen: list[Event] = []

    @bus.on("job", stream="jobs", group="g", start="0")
    def handle(event: Event) -> None:
        seen.append(event)

    bus.ensure_groups()
    bus.publish_many("jobs", [("job", n) for n in range(6)])
    ghost_ids = _ghost_reads(r, "jobs", "g", 6)
    # Two of them are deleted from the stream while pending (as MAXLEN trimming does).
    deleted = ghost_ids[1:3]
    r.xdel("jobs", *deleted)

    with running(bus, lease_ms=200) as worker:
        wait_for(lambda: len(seen) == 4 and r.xpending("jobs", "g")["pending"] == 0,
                 what="four events handled and nothing pending")
        consumer = worker.consumer

    assert sorted(event.data for event in seen) == [0, 3, 4, 5]
    # Read once by the ghost, claimed once by the worker: Redis counted two deliveries.
    assert [event.deliveries for event in seen] == [2, 2, 2, 2]
    # Redis 7 reports the deleted IDs in XAUTOCLAIM's third element and drops them from the PEL.
    metrics = [fields for _, fields in r.xrange("{jobs}:metrics")]
    reclaimed = {f[b"entry_id"] for f in metrics if f[b"event"] == b"reclaimed"}
    dropped = {f[b"entry_id"] for f in metrics if f[b"event"] == b"dropped"}
    assert reclaimed == set(ghost_ids) - set(deleted)
    assert dropped == set(deleted)
    assert all(f[b"consumer"] == consumer.encode() for f in metrics)


@pytest.mark.slow
def test_heartbeat_keeps_a_long_handlers_lease(bus: Bus, r: redis.Redis) -> None:
    lease_ms = 400
    runs: list[str] = []
    started = threading.Event()
    finish = threading.Event()

    @bus.on("report", stream="reports", group="g", start="0")
    async def long_report(event: Event) -> None:
        runs.append(event.id)
        started.set()
        while not finish.is_set():
            await asyncio.sleep(0.01)

    bus.publish("reports", "report")
    # Two workers in the same group, both reclaiming anything idle for more than the lease.
    with running(bus, lease_ms=lease_ms), running(bus, lease_ms=lease_ms):
        assert started.wait(timeout=10)
        begun = time.monotonic()
        # Let four leases pass while the handler runs, then look at what Redis says.
        wait_for(lambda: time.monotonic() - begun > 4 * lease_ms / 1000, timeout=5,
                 what="four leases to pass")
        assert len(runs) == 1
        [row] = r.xpending_range("reports", "g", min="-", max="+", count=10)
        assert row["times_delivered"] == 1, "another consumer claimed the entry"
        assert row["time_since_delivered"] < lease_ms, "the lease was not renewed"
        finish.set()
        wait_for(lambda: r.xpending("reports", "g")["pending"] == 0, what="the report entry to be acked")
    assert len(runs) == 1


def test_poison_entry_is_dead_lettered_after_too_many_deliveries(bus: Bus, r: redis.Redis) -> None:
    calls: list[int] = []

    @bus.on("job", stream="jobs", group="g", start="0", retry=RetryPolicy(max_deliveries=3))
    def handle(event: Event) -> None:
        calls.append(1)

    bus.ensure_groups()
    bus.publish("jobs", "job", {"n": 1})
    [entry_id] = _ghost_reads(r, "jobs", "g", 1)
    # Three more consumers took it and died (each XCLAIM counts a delivery).
    for name in ("ghost-2", "ghost-3"):
        r.xclaim("jobs", "g", name, 0, [entry_id])

    with running(bus, lease_ms=100):
        wait_for(lambda: r.xlen("{jobs}:dlq") == 1 and r.xpending("jobs", "g")["pending"] == 0,
                 what="the over-delivered entry to be dead-lettered")
    assert calls == []
    [(_, dead)] = r.xrange("{jobs}:dlq")
    assert dead[b"dlq_original_id"] == entry_id
    assert dead[b"dlq_error"].startswith(b"PoisonEvent: delivered 4 times")
    assert json.loads(dead[b"data"]) == {"n": 1}
