"""FastStream's ``RedisBroker`` and its ``BinaryMessageFormatV1``, for tests/console/interop/test_faststream.py.

Scenarios publish and consume as the test describes them, and write back what FastStream's handlers
received and what FastStream's own reader (``BinaryMessageFormatV1.parse``) makes of the stored bytes,
as the test's reference; ``encode`` writes FastStream's encoding of given messages.
"""

from __future__ import annotations

from typing import Any

import msgpack
import redis
from _wire import WAIT, b64, emit, main

from tests.polling import until


def parsed_entries(r: redis.Redis, stream: str) -> dict[str, dict[str, list]]:
    """Every entry of ``stream`` as FastStream's own reader parses it: {id: {field: [body, headers]}}."""
    from faststream.redis import BinaryMessageFormatV1

    parsed = {}
    for entry_id, fields in r.xrange(stream):
        parsed[entry_id.decode()] = {}
        for name, value in fields.items():
            body, headers = BinaryMessageFormatV1.parse(value)
            parsed[entry_id.decode()][name.decode()] = [b64(body), headers]
    return parsed


async def envelopes_and_group(url: str, *, orders: list[dict], text: str) -> None:
    """Orders to ``fs:orders`` consumed by group ``billing`` (odd ones fail); text, bytes, msgpack and a
    JSON list to ``fs:misc``."""
    from faststream.redis import RedisBroker, StreamSub

    r = redis.Redis.from_url(url)
    handled: list[dict] = []
    broker = RedisBroker(url, logger=None)

    @broker.subscriber(stream=StreamSub("fs:orders", group="billing", consumer="billing-1"))
    async def charge(body: dict) -> None:
        handled.append(body)
        if body["n"] % 2:
            raise RuntimeError("card declined")

    async with broker:
        await broker.start()
        for i, order in enumerate(orders):
            await broker.publish(order, stream="fs:orders", headers={"x-tenant": "acme"},
                                 correlation_id=f"order-{i}")
        await broker.publish(text, stream="fs:misc", correlation_id="txt")
        await broker.publish(b"\x00\x01\xfe\xff", stream="fs:misc", correlation_id="bin")
        await broker.publish(msgpack.packb({"sku": "X-1", "qty": 3}), stream="fs:misc",
                             headers={"content-type": "application/msgpack"}, correlation_id="mp")
        await broker.publish([1, "two", None], stream="fs:misc", correlation_id="list")
        await until(lambda: len(handled) == len(orders) and r.xpending("fs:orders", "billing")["pending"] == 2
                    and r.xinfo_groups("fs:orders")[0]["entries-read"] == len(orders),
                    what="FastStream's subscriber to handle the orders", timeout=WAIT)
    emit(handled=handled, parsed=parsed_entries(r, "fs:orders"))


async def publish(url: str, *, stream: str, messages: list[dict[str, Any]]) -> None:
    """Each of ``messages`` (body, headers, correlation_id) published to ``stream``; FastStream's reading.

    A message with ``msgpack`` instead of ``body`` publishes that value packed by msgpack."""
    from faststream.redis import RedisBroker

    async with RedisBroker(url, logger=None) as broker:
        for message in messages:
            body = msgpack.packb(message["msgpack"]) if "msgpack" in message else message["body"]
            await broker.publish(body, stream=stream, headers=message.get("headers"),
                                 correlation_id=message["correlation_id"])
    emit(parsed=parsed_entries(redis.Redis.from_url(url), stream))


async def encode(url: str, *, messages: list[dict[str, Any]]) -> None:
    """FastStream's own bytes for each of ``messages`` (message, headers, correlation_id)."""
    from faststream.redis import BinaryMessageFormatV1

    emit(raw=[
        b64(await BinaryMessageFormatV1.encode(message=m["message"], reply_to=None, headers=m["headers"],
                                               correlation_id=m["correlation_id"]))
        for m in messages
    ])


async def plain_group(url: str, *, orders: list[dict[str, str]], late: dict[str, str]) -> None:
    """Plain XADD entries to ``plain:orders`` handled and acked by FastStream group ``shipping``; one
    more (``late``) added once FastStream has stopped reading."""
    from faststream.redis import RedisBroker, StreamSub

    r = redis.Redis.from_url(url)
    handled: list[Any] = []
    broker = RedisBroker(url, logger=None)

    @broker.subscriber(stream=StreamSub("plain:orders", group="shipping", consumer="ship-1"))
    async def ship(body: Any) -> None:
        handled.append(body)

    async with broker:
        await broker.start()
        for fields in orders:
            r.xadd("plain:orders", fields)
        await until(lambda: len(handled) == len(orders) and r.xpending("plain:orders", "shipping")["pending"] == 0
                    and r.xinfo_groups("plain:orders")[0]["entries-read"] == len(orders),
                    what="FastStream to handle and ack the plain entries", timeout=WAIT)
    # The subscriber's last XREADGROUP BLOCK may outlive the broker by a moment on the server, and
    # Redis would hand it the next entry: wait until no client is blocked before adding it.
    await until(lambda: r.info("clients")["blocked_clients"] == 0, what="FastStream's blocking read to end",
                timeout=WAIT)
    r.xadd("plain:orders", late)
    emit(handled=handled)


if __name__ == "__main__":
    main({"envelopes_and_group": envelopes_and_group, "publish": publish, "encode": encode,
          "plain_group": plain_group})
