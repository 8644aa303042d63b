"""The worker's normal path: delivery to the right handlers, acks only after they return."""

from __future__ import annotations

import threading

import pytest
import redis

from eventbus import Bus, Event
from tests.eventbus.conftest import group_info, running
from tests.polling import wait_for


def test_sync_and_async_handlers_get_decoded_events(bus: Bus, r: redis.Redis) -> None:
    seen: list[Event] = []

    @bus.on("order.created", stream="orders", group="billing", start="0")
    def charge(event: Event) -> None:
        seen.append(event)

    @bus.on("order.created", stream="orders", group="email", start="0")
    async def notify(event: Event) -> None:
        seen.append(event)

    entry_id = bus.publish("orders", "order.created", {"order_id": 7}, correlation_id="corr-1")
    [(_, fields)] = r.xrange("orders")

    with running(bus):
        wait_for(lambda: len(seen) == 2, what="both groups to handle the event")
        wait_for(lambda: r.xpending("orders", "billing")["pending"] == 0, what="nothing pending for billing")
        wait_for(lambda: r.xpending("orders", "email")["pending"] == 0, what="nothing pending for email")

    assert {event.group for event in seen} == {"billing", "email"}
    for event in seen:
        assert event.id == fields[b"id"].decode()
        assert event.type == "order.created"
        assert event.data == {"order_id": 7}
        assert event.entry_id == entry_id
        assert event.stream == "orders"
        assert event.ts == int(fields[b"ts"])
        assert event.correlation_id == "corr-1"
        assert (event.retries, event.deliveries) == (0, 1)


def test_no_ack_before_the_handler_returns(bus: Bus, r: redis.Redis) -> None:
    started, release = threading.Event(), threading.Event()
    quick: list[int] = []

    @bus.on("slow", stream="jobs", group="g", start="0")
    def slow(event: Event) -> None:
        started.set()
        assert release.wait(timeout=20)

    @bus.on("quick", stream="jobs", group="g", start="0")
    def fast(event: Event) -> None:
        quick.append(event.data)

    slow_id = bus.publish("jobs", "slow")
    with running(bus, concurrency=4):
        assert started.wait(timeout=10)
        # Acks of later, quick events go out while the slow handler still runs: the flusher is
        # working, and still the slow entry must be pending.
        bus.publish_many("jobs", [("quick", n) for n in range(5)])
        wait_for(lambda: len(quick) == 5 and r.xpending("jobs", "g")["pending"] == 1,
                 what="the quick events acked while the slow one runs")
        [row] = r.xpending_range("jobs", "g", min="-", max="+", count=10)
        assert row["message_id"].decode() == slow_id

        release.set()
        wait_for(lambda: r.xpending("jobs", "g")["pending"] == 0, what="the slow event to be acked")


def test_worker_runs_only_the_chosen_groups(bus: Bus, r: redis.Redis) -> None:
    ran: list[str] = []

    @bus.on("order.created", stream="orders", group="billing", start="0")
    def charge(event: Event) -> None:
        ran.append("billing")

    @bus.on("order.created", stream="orders", group="shipping", start="0")
    def ship(event: Event) -> None:
        ran.append("shipping")

    bus.ensure_groups()
    bus.publish_many("orders", [("order.created", n) for n in range(3)])
    with running(bus, {"billing"}):
        wait_for(lambda: r.xpending("orders", "billing")["pending"] == 0 and len(ran) == 3,
                 what="billing to handle the three orders")

    assert ran == ["billing"] * 3
    groups = {g["name"].decode(): g for g in r.xinfo_groups("orders")}
    assert groups["billing"]["entries-read"] == 3
    assert groups["shipping"]["last-delivered-id"] == b"0-0" and groups["shipping"]["lag"] == 3


def test_unknown_group_is_an_error(bus: Bus) -> None:
    @bus.on("a", stream="s", group="g")
    def handler(event: Event) -> None: ...

    with pytest.raises(ValueError, match="nope"):
        bus.worker({"nope"})


def test_start_position_is_explicit(bus: Bus, r: redis.Redis) -> None:
    early: list[int] = []
    late: list[int] = []

    @bus.on("tick", stream="ticks", group="from-start", start="0")
    def everything(event: Event) -> None:
        early.append(event.data)

    @bus.on("tick", stream="ticks", group="from-now", start="$")
    def new_only(event: Event) -> None:
        late.append(event.data)

    bus.publish("ticks", "tick", 1)
    bus.ensure_groups()
    bus.publish("ticks", "tick", 2)
    with running(bus):
        wait_for(lambda: len(early) == 2 and len(late) == 1, what="both handlers in order")
    assert sorted(early) == [1, 2]
    assert late == [2]


def test_one_group_over_several_streams(bus: Bus, r: redis.Redis) -> None:
    seen: list[tuple[str, str]] = []

    @bus.on("order.created", stream="orders", group="audit", start="0")
    @bus.on("payment.captured", stream="payments", group="audit", start="0")
    def audit(event: Event) -> None:
        seen.append((event.stream, event.type))

    bus.publish("orders", "order.created")
    bus.publish("payments", "payment.captured")
    with running(bus):
        wait_for(lambda: len(seen) == 2, what="one event of each stream")
    assert sorted(seen) == [("orders", "order.created"), ("payments", "payment.captured")]


def test_types_without_a_handler_are_acknowledged_and_skipped(bus: Bus, r: redis.Redis) -> None:
    seen: list[str] = []

    @bus.on("wanted", stream="mixed", group="g", start="0")
    def wanted(event: Event) -> None:
        seen.append(event.type)

    bus.publish_many("mixed", [("unwanted", 1), ("wanted", 2), ("other", 3)])
    with running(bus):
        wait_for(lambda: group_info(r, "mixed", "g").get("entries-read") == 3,
                 what="the group to read all three")
        wait_for(lambda: r.xpending("mixed", "g")["pending"] == 0, what="nothing pending")
    assert seen == ["wanted"]


def test_catch_all_handler(bus: Bus, r: redis.Redis) -> None:
    seen: list[str] = []

    @bus.on("*", stream="mixed", group="g", start="0")
    def anything(event: Event) -> None:
        seen.append(event.type)

    bus.publish_many("mixed", [("a", 1), ("b", 2)])
    with running(bus):
        wait_for(lambda: len(seen) == 2, what="both event types")
    assert sorted(seen) == ["a", "b"]


def test_a_clean_stop_removes_the_consumer(bus: Bus, r: redis.Redis) -> None:
    @bus.on("a", stream="s", group="g", start="0")
    def handler(event: Event) -> None: ...

    bus.publish("s", "a")
    with running(bus) as worker:
        wait_for(lambda: group_info(r, "s", "g").get("entries-read") == 1, what="the group to read the entry")
        wait_for(lambda: r.xpending("s", "g")["pending"] == 0, what="nothing pending")
        assert [c["name"].decode() for c in r.xinfo_consumers("s", "g")] == [worker.consumer]
    assert r.xinfo_consumers("s", "g") == []


def test_duplicate_registration_is_refused(bus: Bus) -> None:
    @bus.on("a", stream="s", group="g")
    def first(event: Event) -> None: ...

    with pytest.raises(ValueError, match="already has a handler"):

        @bus.on("a", stream="s", group="g")
        def second(event: Event) -> None: ...
