"""Request/reply over ``reply:{correlation_id}``."""

from __future__ import annotations

import asyncio
from decimal import Decimal

import pytest
import redis

from eventbus import Bus, Event, RequestFailed, RequestTimeout
from tests.eventbus.conftest import running


def test_request_gets_the_handlers_return_value(bus: Bus, r: redis.Redis) -> None:
    seen: list[Event] = []

    @bus.on("price.quote", stream="quotes", group="pricing", start="0")
    async def quote(event: Event) -> dict[str, object]:
        seen.append(event)
        return {"sku": event.data["sku"], "total": Decimal("9.90") * event.data["qty"]}

    with running(bus):
        reply = bus.request("quotes", "price.quote", {"sku": "kbd", "qty": 3}, timeout=10)

    assert reply == {"sku": "kbd", "total": "29.70"}
    [event] = seen
    assert event.reply_to == f"reply:{event.correlation_id}"
    # The reply list was consumed; nothing is left behind.
    assert r.exists(event.reply_to) == 0


def test_async_request(bus: Bus) -> None:
    @bus.on("ping", stream="rpc", group="pong", start="0")
    def pong(event: Event) -> str:
        return f"pong {event.data}"

    async def ask() -> str:
        try:
            return await bus.arequest("rpc", "ping", 1, timeout=10)
        finally:
            await bus.aclient.aclose()

    with running(bus):
        assert asyncio.run(ask()) == "pong 1"


def test_request_times_out_without_a_worker(bus: Bus, r: redis.Redis) -> None:
    with pytest.raises(RequestTimeout) as caught:
        bus.request("quotes", "price.quote", {"sku": "kbd"}, timeout=0.2)
    assert caught.value.correlation_id
    # The request itself was published and waits for a worker.
    [(_, fields)] = r.xrange("quotes")
    assert fields[b"correlation_id"].decode() == caught.value.correlation_id
    assert fields[b"reply_to"].decode() == f"reply:{caught.value.correlation_id}"


def test_a_dead_lettered_request_fails_fast(bus: Bus, r: redis.Redis) -> None:
    @bus.on("price.quote", stream="quotes", group="pricing", start="0", max_retries=0)
    def quote(event: Event) -> None:
        raise LookupError("unknown sku")

    with running(bus), pytest.raises(RequestFailed, match="LookupError: unknown sku"):
        bus.request("quotes", "price.quote", {"sku": "nope"}, timeout=10)
    assert r.xlen("{quotes}:dlq") == 1
