"""Failures: retry counts, the backoff schedule, the dead-letter queue and what lands in it."""

from __future__ import annotations

import asyncio
import random
import threading

import pytest
import redis

from eventbus import Bus, Event, Reject, RetryPolicy
from eventbus.dlq import trim_traceback
from eventbus.scripts import Scripts
from tests.eventbus.conftest import group_info, running, server_ms
from tests.polling import wait_for


def test_retry_policy_delays() -> None:
    policy = RetryPolicy(base=1.0, multiplier=2.0, cap=10.0, jitter=0.5)
    rng = random.Random(7)
    for retries, ceiling in [(0, 1.0), (1, 2.0), (2, 4.0), (3, 8.0), (4, 10.0), (50, 10.0), (10_000, 10.0)]:
        for _ in range(200):
            delay = policy.delay(retries, rng)
            assert ceiling * 0.5 <= delay <= ceiling
    no_jitter = RetryPolicy(base=0.25, jitter=0.0)
    assert [no_jitter.delay(n) for n in range(4)] == [0.25, 0.5, 1.0, 2.0]
    with pytest.raises(ValueError):
        RetryPolicy(jitter=1.5)


def test_exhausted_retries_go_to_the_dlq_with_the_failure(bus: Bus, r: redis.Redis) -> None:
    attempts: list[Event] = []

    @bus.on(
        "order.created",
        stream="orders",
        group="billing",
        start="0",
        max_retries=3,
        retry=RetryPolicy(base=0.01),
    )
    def charge(event: Event) -> None:
        attempts.append(event)
        raise RuntimeError(f"card declined for order {event.data['order_id']}")

    before = server_ms(r)
    bus.publish("orders", "order.created", {"order_id": 7})
    with running(bus):
        wait_for(lambda: r.xlen("{orders}:dlq") == 1, what="the order to be dead-lettered")
        wait_for(lambda: r.xpending("orders", "billing")["pending"] == 0, what="nothing pending for billing")
    after = server_ms(r)

    # One attempt and three retries, each a new entry carrying the retry count and the group.
    assert len(attempts) == 4
    entries = r.xrange("orders")
    assert len(entries) == 4
    assert [fields.get(b"_retries") for _, fields in entries] == [None, b"1", b"2", b"3"]
    assert [fields.get(b"_group") for _, fields in entries] == [None, b"billing", b"billing", b"billing"]
    assert len({fields[b"id"] for _, fields in entries}) == 1, "retries keep the event id"
    assert [event.retries for event in attempts] == [0, 1, 2, 3]
    assert [event.deliveries for event in attempts] == [1, 2, 3, 4]
    assert r.zcard("{orders}:retry") == 0

    last_id, last_fields = entries[-1]
    [(_, dead)] = r.xrange("{orders}:dlq")
    for name, value in last_fields.items():
        assert dead[name] == value, name
    assert dead[b"dlq_original_stream"] == b"orders"
    assert dead[b"dlq_original_id"] == last_id
    assert dead[b"dlq_group"] == b"billing"
    assert dead[b"dlq_error"] == b"RuntimeError: card declined for order 7"
    assert b"Traceback" in dead[b"dlq_traceback"] and b"in charge" in dead[b"dlq_traceback"]
    assert dead[b"dlq_retries"] == b"3"
    assert before <= int(dead[b"dlq_failed_at"]) <= after
    assert set(dead) - set(last_fields) == {
        b"dlq_original_stream",
        b"dlq_original_id",
        b"dlq_group",
        b"dlq_error",
        b"dlq_traceback",
        b"dlq_retries",
        b"dlq_failed_at",
    }


def test_a_transient_failure_is_retried_until_it_succeeds(bus: Bus, r: redis.Redis) -> None:
    attempts: list[Event] = []

    @bus.on("email.send", stream="emails", group="mailer", start="0", retry=RetryPolicy(base=0.01))
    async def send(event: Event) -> None:
        attempts.append(event)
        if len(attempts) < 3:
            raise TimeoutError("smtp timeout")

    bus.publish("emails", "email.send", {"to": "ada@example.com"})
    with running(bus):
        wait_for(lambda: len(attempts) == 3 and r.xpending("emails", "mailer")["pending"] == 0,
                 what="three attempts and nothing pending")
    assert r.exists("{emails}:dlq") == 0
    assert [event.retries for event in attempts] == [0, 1, 2]
    assert r.xlen("emails") == 3


def test_backoff_schedule_in_the_retry_set(bus: Bus, r: redis.Redis) -> None:
    """Due times are checked against Redis's clock, not by timing the test."""
    policy = RetryPolicy(base=60.0, multiplier=2.0, jitter=0.5)
    attempts: list[int] = []

    @bus.on("job", stream="jobs", group="g", start="0", retry=policy)
    def fail(event: Event) -> None:
        attempts.append(event.retries)
        raise RuntimeError("down")

    bus.publish("jobs", "job")
    with running(bus):
        for retry, ceiling_ms in enumerate([60_000, 120_000, 240_000]):
            before = server_ms(r)
            if retry:
                # Make the scheduled retry due now; the pump re-adds it and the handler fails again.
                [member] = r.zrange("{jobs}:retry", 0, -1)
                r.zadd("{jobs}:retry", {member: before})
            wait_for(lambda retry=retry: len(attempts) == retry + 1 and r.zcard("{jobs}:retry") == 1,
                     what=f"attempt {retry + 1} and its retry scheduled")
            after = server_ms(r)
            [(_, due)] = r.zrange("{jobs}:retry", 0, -1, withscores=True)
            assert before + ceiling_ms * 0.5 <= due <= after + ceiling_ms
    assert attempts == [0, 1, 2]


def test_reject_skips_the_remaining_retries(bus: Bus, r: redis.Redis) -> None:
    attempts: list[int] = []

    @bus.on("payment.captured", stream="payments", group="ledger", start="0")
    def book(event: Event) -> None:
        attempts.append(1)
        raise Reject("currency XTS cannot be booked")

    bus.publish("payments", "payment.captured", {"currency": "XTS"})
    with running(bus):
        wait_for(lambda: r.xlen("{payments}:dlq") == 1, what="the rejected payment to be dead-lettered")
    assert attempts == [1]
    [(_, dead)] = r.xrange("{payments}:dlq")
    assert dead[b"dlq_error"] == b"Reject: currency XTS cannot be booked"
    assert dead[b"dlq_retries"] == b"0"
    assert r.xpending("payments", "ledger")["pending"] == 0


def test_malformed_entries_are_dead_lettered_at_once(bus: Bus, r: redis.Redis) -> None:
    @bus.on("*", stream="raw", group="g", start="0")
    def anything(event: Event) -> None:
        raise AssertionError("never called")

    binary_id = r.xadd("raw", {"payload": b"\xff\xfe not an event"})
    r.xadd("raw", {"type": "x", "data": "{not json"})
    with running(bus):
        wait_for(lambda: r.xlen("{raw}:dlq") == 2 and r.xpending("raw", "g")["pending"] == 0,
                 what="both malformed entries to be dead-lettered")
    errors = [fields[b"dlq_error"] for _, fields in r.xrange("{raw}:dlq")]
    assert all(error.startswith(b"MalformedEvent") for error in errors)
    # Runners work concurrently: the two dead letters may land in either order.
    by_origin = {fields[b"dlq_original_id"]: fields for _, fields in r.xrange("{raw}:dlq")}
    assert by_origin[binary_id][b"payload"] == b"\xff\xfe not an event"


def test_a_retry_is_seen_only_by_the_group_that_failed(bus: Bus, r: redis.Redis) -> None:
    billing: list[int] = []
    shipping: list[int] = []

    @bus.on("order.created", stream="orders", group="billing", start="0", retry=RetryPolicy(base=0.01))
    def charge(event: Event) -> None:
        billing.append(event.retries)
        if event.retries == 0:
            raise RuntimeError("gateway timeout")

    @bus.on("order.created", stream="orders", group="shipping", start="0")
    def ship(event: Event) -> None:
        shipping.append(event.retries)

    bus.publish("orders", "order.created", {"order_id": 1})
    with running(bus):
        wait_for(lambda: billing == [0, 1] and r.xlen("orders") == 2, what="billing's retry")
        wait_for(
            lambda: r.xpending("orders", "billing")["pending"] == 0
            and r.xpending("orders", "shipping")["pending"] == 0,
            what="nothing pending for billing or shipping",
        )
        wait_for(lambda: group_info(r, "orders", "shipping").get("entries-read") == 2,
                 what="shipping to read both entries")
    assert shipping == [0]


def test_a_handler_timeout_counts_as_a_failure(bus: Bus, r: redis.Redis) -> None:
    never = threading.Event()

    @bus.on("job", stream="jobs", group="g", start="0", max_retries=0, timeout=0.05)
    async def hang(event: Event) -> None:
        while not never.is_set():
            await asyncio.sleep(0.01)

    bus.publish("jobs", "job")
    with running(bus):
        wait_for(lambda: r.xlen("{jobs}:dlq") == 1, what="the timed-out job to be dead-lettered")
    [(_, dead)] = r.xrange("{jobs}:dlq")
    assert dead[b"dlq_error"].startswith(b"TimeoutError")


def test_concurrent_pumps_re_add_each_retry_exactly_once(bus: Bus, r: redis.Redis) -> None:
    @bus.on("job", stream="jobs", group="g", start="0", retry=RetryPolicy(base=3600))
    def fail(event: Event) -> None:
        raise RuntimeError("later")

    bus.publish_many("jobs", [("job", n) for n in range(200)])
    with running(bus):
        wait_for(lambda: r.zcard("{jobs}:retry") == 200 and r.xpending("jobs", "g")["pending"] == 0,
                 what="200 retries scheduled and nothing pending")
    originals = {fields[b"id"] for _, fields in r.xrange("jobs")}
    # Everything is due now; four pumps race over it in small steps.
    r.zadd("{jobs}:retry", dict.fromkeys(r.zrange("{jobs}:retry", 0, -1), 0))
    scripts = Scripts.register(r)

    def pump() -> None:
        while scripts.pump_retries(keys=["{jobs}:retry", "jobs"], args=[7, ""]):
            pass

    threads = [threading.Thread(target=pump) for _ in range(4)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(timeout=30)
    readded = [fields for _, fields in r.xrange("jobs")][200:]
    assert r.zcard("{jobs}:retry") == 0
    assert len(readded) == 200
    assert sorted(fields[b"id"] for fields in readded) == sorted(originals)
    assert {fields[b"_retries"] for fields in readded} == {b"1"}


def test_tracebacks_are_trimmed_to_their_end() -> None:
    text = "Traceback (most recent call last):\n" + "".join(
        f'  File "f{i}.py", line {i}\n' for i in range(2000)
    )
    text += "ValueError: the cause\n"
    trimmed = trim_traceback(text, limit=1_000)
    assert len(trimmed) <= 1_000
    assert trimmed.endswith("ValueError: the cause\n")
    assert trimmed.startswith("… (")
    assert trim_traceback("short", limit=1_000) == "short"


def test_an_outcome_redis_refused_to_record_is_reclaimed_not_held_forever(
    bus: Bus, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    # Scheduling the retry fails once (Redis unreachable for a moment): the entry is still
    # pending, and must be handed over to reclaim rather than heartbeated by its holder forever.
    import eventbus.worker

    real = eventbus.worker.schedule_retry  # type: ignore[attr-defined]  # the test patches the name the worker calls
    calls: list[str] = []

    async def flaky(*args: object, **kwargs: object) -> int | None:
        calls.append(str(kwargs["entry_id"]))
        if len(calls) == 1:
            raise redis.ConnectionError("connection reset")
        return await real(*args, **kwargs)

    monkeypatch.setattr(eventbus.worker, "schedule_retry", flaky)
    attempts: list[int] = []

    @bus.on("job", stream="jobs", group="g", start="0", retry=RetryPolicy(base=0.01))
    def once_bad(event: Event) -> None:
        attempts.append(event.deliveries)
        if len(attempts) == 1:
            raise RuntimeError("transient")

    bus.publish("jobs", "job")
    with running(bus, lease_ms=300):
        wait_for(lambda: len(attempts) == 2, timeout=5, what="the reclaimed second attempt")
        wait_for(lambda: r.xpending("jobs", "g")["pending"] == 0, what="nothing pending")
    # The second run is the same entry, reclaimed after its lease: Redis counted two deliveries.
    assert attempts == [1, 2]
    assert r.zcard("{jobs}:retry") == 0
