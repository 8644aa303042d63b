"""Publishing: the entry format, JSON-safe data, trimming, batches, uniqueness."""

from __future__ import annotations

import asyncio
import json
import uuid
from datetime import UTC, date, datetime
from decimal import Decimal
from enum import Enum

import pytest
import redis

from eventbus import Bus, DuplicateEvent, Event, Message
from tests.eventbus.conftest import running, server_ms
from tests.polling import wait_for


class Colour(Enum):
    RED = "red"


def test_entry_fields(bus: Bus, r: redis.Redis) -> None:
    before = server_ms(r)
    entry_id = bus.publish("orders", "order.created", {"order_id": 7})
    after = server_ms(r)

    [(stored_id, fields)] = r.xrange("orders")
    assert stored_id.decode() == entry_id
    assert fields[b"type"] == b"order.created"
    assert json.loads(fields[b"data"]) == {"order_id": 7}
    assert len(fields[b"id"]) == 32 and int(fields[b"id"], 16) >= 0
    assert before <= int(fields[b"ts"]) <= after
    assert set(fields) == {b"type", b"data", b"id", b"ts"}


def test_json_safe_data(bus: Bus, r: redis.Redis) -> None:
    when = datetime(2026, 1, 2, 3, 4, 5, tzinfo=UTC)
    ident = uuid.UUID("12345678-1234-5678-1234-567812345678")
    bus.publish(
        "orders",
        "order.created",
        {
            "at": when,
            "day": date(2026, 1, 2),
            "total": Decimal("12.50"),
            "ref": ident,
            "blob": b"\x00\xffhi",
            "tags": ("a", "b"),
            "colour": Colour.RED,
        },
    )
    [(_, fields)] = r.xrange("orders")
    assert json.loads(fields[b"data"]) == {
        "at": "2026-01-02T03:04:05+00:00",
        "day": "2026-01-02",
        "total": "12.50",
        "ref": "12345678-1234-5678-1234-567812345678",
        "blob": "AP9oaQ==",
        "tags": ["a", "b"],
        "colour": "red",
    }


def test_unserializable_data_is_refused_before_anything_is_written(bus: Bus, r: redis.Redis) -> None:
    with pytest.raises(TypeError):
        bus.publish("orders", "order.created", {"x": object()})
    assert r.exists("orders") == 0


def test_maxlen_trims_approximately(url: str, r: redis.Redis) -> None:
    bus = Bus.from_url(url, maxlen=100)
    bus.publish_many("orders", [("tick", {"n": n}) for n in range(2_000)])
    length = r.xlen("orders")
    # "~" trims whole radix-tree nodes: at least maxlen stay, far fewer than were written.
    assert 100 <= length < 1_000
    bus.close()


def test_publish_many_returns_ids_in_order(bus: Bus, r: redis.Redis) -> None:
    ids = bus.publish_many("orders", [("a", 1), Message("b", 2, correlation_id="c-1"), ("c", 3)])
    stored = r.xrange("orders")
    assert ids == [entry_id.decode() for entry_id, _ in stored]
    assert [fields[b"type"] for _, fields in stored] == [b"a", b"b", b"c"]
    assert stored[1][1][b"correlation_id"] == b"c-1"


def test_unique_key_refuses_a_duplicate(bus: Bus, r: redis.Redis) -> None:
    first = bus.publish("orders", "order.created", {"n": 1}, unique_key="order-7")
    with pytest.raises(DuplicateEvent):
        bus.publish("orders", "order.created", {"n": 2}, unique_key="order-7")
    other = bus.publish("orders", "order.created", {"n": 3}, unique_key="order-8")

    stored = r.xrange("orders")
    assert [entry_id.decode() for entry_id, _ in stored] == [first, other]
    assert stored[0][1][b"_unique"] == b"order-7"

    assert bus.forget_unique("orders", "order-7") is True
    bus.publish("orders", "order.created", {"n": 4}, unique_key="order-7")
    assert r.xlen("orders") == 3


def test_unique_keys_in_a_batch(bus: Bus, r: redis.Redis) -> None:
    ids = bus.publish_many(
        "orders",
        [
            Message("a", unique_key="k1"),
            Message("b", unique_key="k1"),
            Message("c"),
            Message("d", unique_key="k2"),
        ],
    )
    assert ids[1] is None
    assert [i for i in ids if i is not None] == [entry_id.decode() for entry_id, _ in r.xrange("orders")]


def test_unique_key_expires_after_its_window(url: str, r: redis.Redis) -> None:
    bus = Bus.from_url(url, unique_ttl=0.2)
    bus.publish("orders", "a", unique_key="k")

    def accepted() -> bool:
        try:
            bus.publish("orders", "a", unique_key="k")
        except DuplicateEvent:
            return False
        return True

    wait_for(accepted, timeout=5, what="the key to expire and the publish to be accepted")
    assert r.xlen("orders") == 2
    # Expired keys are pruned, so the set only holds the live one.
    assert r.zcard("{orders}:unique") == 1
    bus.close()


def test_async_publish(bus: Bus, r: redis.Redis) -> None:
    async def publish() -> tuple[str, list[str | None]]:
        entry_id = await bus.apublish("orders", "order.created", {"n": 1})
        ids = await bus.apublish_many(
            "orders", [("a", 1), Message("b", unique_key="u"), Message("c", unique_key="u")]
        )
        with pytest.raises(DuplicateEvent):
            await bus.apublish("orders", "x", unique_key="u")
        await bus.aclient.aclose()
        return entry_id, ids

    entry_id, ids = asyncio.run(publish())
    stored = [stored_id.decode() for stored_id, _ in r.xrange("orders")]
    assert stored == [entry_id, ids[0], ids[1]]
    assert ids[2] is None


def _without_id_and_ts(fields: dict[bytes, bytes]) -> list[tuple[bytes, bytes]]:
    return [(name, value) for name, value in fields.items() if name not in (b"id", b"ts")]


def _assert_fresh_event_ids(entries: list[tuple[bytes, dict[bytes, bytes]]]) -> None:
    event_ids = [fields[b"id"].decode() for _, fields in entries]
    for event_id in event_ids:
        parsed = uuid.UUID(event_id)  # the stdlib's reading, not the bus's
        assert (parsed.hex, parsed.version, parsed.variant) == (event_id, 4, uuid.RFC_4122)
    assert len(set(event_ids)) == len(event_ids)


def test_publish_many_writes_what_publish_writes(bus: Bus, r: redis.Redis) -> None:
    data = {"n": 1, "name": "café ✓", "at": datetime(2026, 1, 2, tzinfo=UTC), "total": Decimal("1.5")}
    kinds = [
        {},
        {"correlation_id": "c-1", "reply_to": "reply:c-1"},
        {"unique_key": "u-1"},
    ]
    before = server_ms(r)
    for stream, kwargs in zip(("one-a", "one-b", "one-c"), kinds, strict=True):
        bus.publish(stream, "order.created", data, **kwargs)
    bus.publish_many("many", [Message("order.created", data, **kwargs) for kwargs in kinds[:2]])
    bus.publish_many("many-u", [Message("order.created", data, unique_key="u-1")])
    bus.publish_many("tuples", [("order.created", data)])
    after = server_ms(r)

    singles = [r.xrange(stream)[0] for stream in ("one-a", "one-b", "one-c")]
    batched = [*r.xrange("many"), *r.xrange("many-u")]
    # Same names in the same order and the same bytes, but for the id and the time of each event.
    assert [_without_id_and_ts(f) for _, f in batched] == [_without_id_and_ts(f) for _, f in singles]
    assert [list(f) for _, f in batched] == [list(f) for _, f in singles]
    assert r.xrange("tuples")[0][1].keys() == singles[0][1].keys()
    assert _without_id_and_ts(r.xrange("tuples")[0][1]) == _without_id_and_ts(singles[0][1])
    assert (
        singles[0][1][b"data"]
        == json.dumps(
            {"n": 1, "name": "café ✓", "at": "2026-01-02T00:00:00+00:00", "total": "1.5"},
            separators=(",", ":"),
            ensure_ascii=False,
        ).encode()
    )
    every = [*singles, *batched, *r.xrange("tuples")]
    _assert_fresh_event_ids(every)
    assert all(before <= int(fields[b"ts"]) <= after for _, fields in every)


def test_publish_many_in_chunks_from_a_generator(bus: Bus, r: redis.Redis) -> None:
    """2,500 events go in three pipelines; unique keys are refused across them."""
    messages = (
        Message("tick", {"n": n}, unique_key=f"k{n % 1000}") if n % 500 == 0 else ("tick", {"n": n})
        for n in range(2_500)
    )
    ids = bus.publish_many("orders", messages)

    stored = r.xrange("orders")
    # 0 and 500 take k0 and k500; 1000, 1500 and 2000 repeat them and are refused.
    assert [n for n, entry_id in enumerate(ids) if entry_id is None] == [1_000, 1_500, 2_000]
    assert [i for i in ids if i is not None] == [entry_id.decode() for entry_id, _ in stored]
    assert [json.loads(fields[b"data"])["n"] for _, fields in stored] == [
        n for n in range(2_500) if n not in (1_000, 1_500, 2_000)
    ]
    _assert_fresh_event_ids(stored)


def test_async_publish_many_writes_what_sync_publish_many_writes(bus: Bus, r: redis.Redis) -> None:
    batch = [("a", {"x": [1, 2]}), Message("b", None, correlation_id="c", reply_to="reply:c")]
    bus.publish_many("sync", batch)

    async def publish() -> None:
        await bus.apublish_many("async", batch)
        await bus.aclient.aclose()

    asyncio.run(publish())
    sync, async_ = r.xrange("sync"), r.xrange("async")
    assert [_without_id_and_ts(f) for _, f in async_] == [_without_id_and_ts(f) for _, f in sync]
    _assert_fresh_event_ids([*sync, *async_])


def test_handlers_see_the_same_event_either_way(bus: Bus, r: redis.Redis) -> None:
    seen: list[tuple[str, object, str | None, str | None]] = []

    @bus.on("*", stream="orders", group="g", start="0")
    def record(event: Event) -> None:
        seen.append((event.type, event.data, event.correlation_id, event.unique_key))

    bus.publish("orders", "one", {"n": 1}, correlation_id="c-1", unique_key="u-1")
    bus.publish_many(
        "orders", [Message("many", {"n": 1}, correlation_id="c-1", unique_key="u-2"), ("t", [1])]
    )
    with running(bus, metrics_interval=0.05):
        wait_for(lambda: len(seen) == 3 and r.xpending("orders", "g")["pending"] == 0, what="three events")
        metrics = lambda: [f for _, f in r.xrange("{orders}:metrics") if f[b"event"] == b"processed"]  # noqa: E731
        wait_for(
            lambda: sum(int(f[b"count"]) for f in metrics()) == r.xlen("orders"), what="every event counted"
        )
    assert sorted(seen, key=str) == sorted(
        [("one", {"n": 1}, "c-1", "u-1"), ("many", {"n": 1}, "c-1", "u-2"), ("t", [1], None, None)], key=str
    )
