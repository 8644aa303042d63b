"""Buses the console did not write (SPEC sections 4, 6, 7): the real client libraries write to a real
redis-server, and the console's JSON API and pages must read back what they wrote.

One section per bus: FastStream 0.7 (its ``BinaryMessageFormatV1`` envelope, the only format it writes,
around JSON/text/bytes/msgpack bodies; a consumer group; non-ASCII headers), plain XADD (read by a
FastStream group and by a raw XREADGROUP), taskiq's ``RedisStreamBroker`` (JSON and msgpack serializers, a
group that read without acking), streaQ (a worker that finished some tasks and holds one), OmniDaemon (a
failing agent whose messages its own reclaim loop dead-letters; requeued through the API, inline and by
the bulk job, then consumed by OmniDaemon again).

Expected values come from Redis itself (XINFO, XPENDING, XRANGE through redis-py's own parsing) and from
what the test handed the library, never from the console's code. The libraries are async; they run in
an event loop on a helper thread (``aio``) so that Django's sync test client stays on the main thread.
Every wait is bounded and nothing asserts on timing.
"""

from __future__ import annotations

import asyncio
import concurrent.futures
import html
import json
import threading
import time
from collections.abc import Callable, Coroutine, Iterator
from typing import Any
from urllib.parse import quote

import msgpack
import pytest
import redis
from django.test import Client

from streams_app.redis_ops import client as redis_client

XSS = "<img src=x onerror=alert('xss')>"  # no double quote: JSON would show it as \"
WAIT = 20.0  # seconds: a generous bound for a library to do a few milliseconds of work


@pytest.fixture(autouse=True)
def _fresh_clients() -> Iterator[None]:
    redis_client.reset()
    yield
    redis_client.reset()


# ------------------------------------------------------------------------------------------ helpers


class LoopThread:
    """An asyncio event loop on a daemon thread, for the async libraries."""

    def __init__(self) -> None:
        self.loop = asyncio.new_event_loop()
        self.thread = threading.Thread(target=self.loop.run_forever, name="interop-loop", daemon=True)
        self.thread.start()

    def run(self, coro: Coroutine[Any, Any, Any], timeout: float = 60) -> Any:
        """Run ``coro`` on the loop and wait (bounded) for its result."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(timeout)

    def start(self, coro: Coroutine[Any, Any, Any]) -> concurrent.futures.Future:
        """Start ``coro`` on the loop; returns its concurrent future."""
        return asyncio.run_coroutine_threadsafe(coro, self.loop)

    def close(self) -> None:
        async def cancel_all() -> None:
            tasks = [t for t in asyncio.all_tasks() if t is not asyncio.current_task()]
            for task in tasks:
                task.cancel()
            await asyncio.gather(*tasks, return_exceptions=True)

        try:
            self.run(cancel_all(), timeout=10)
        finally:
            self.loop.call_soon_threadsafe(self.loop.stop)
            self.thread.join(10)
            self.loop.close()


@pytest.fixture
def aio() -> Iterator[LoopThread]:
    loop = LoopThread()
    yield loop
    loop.close()


@pytest.fixture
def url(redis_server, r: redis.Redis) -> str:
    """The monitored database's URL (db 0), emptied by ``r`` first, for the libraries to connect to."""
    return redis_server.url(0)


async def until(condition: Callable[[], Any], what: str, timeout: float = WAIT) -> None:
    """Await (bounded) until ``condition()`` is true; ``condition`` may be sync or async."""
    deadline = time.monotonic() + timeout
    while True:
        result = condition()
        if asyncio.iscoroutine(result):
            result = await result
        if result:
            return
        if time.monotonic() > deadline:
            raise AssertionError(f"timed out waiting for {what}")
        await asyncio.sleep(0.02)


def wait(condition: Callable[[], Any], what: str, timeout: float = WAIT) -> None:
    """The same, from the test's (sync) thread."""
    deadline = time.monotonic() + timeout
    while not condition():
        if time.monotonic() > deadline:
            pytest.fail(f"timed out waiting for {what}")
        time.sleep(0.02)


def seg(key: str | bytes) -> str:
    return quote(key.encode() if isinstance(key, str) else key, safe="")


def api(key: str, rest: str = "") -> str:
    return f"/api/v1/c/default/streams/{seg(key)}/{rest}"


def page(key: str, rest: str = "") -> str:
    return f"/c/default/streams/{seg(key)}/{rest}"


def get_json(client: Client, path: str) -> Any:
    response = client.get(path)
    assert response.status_code == 200, (path, response.content[:500])
    return response.json()


def get_html(client: Client, path: str) -> str:
    response = client.get(path)
    assert response.status_code == 200, (path, response.content[:500])
    return response.content.decode()


def text(value: bytes | None) -> str | None:
    return None if value is None else value.decode()


def entries_asc(client: Client, key: str) -> list[dict]:
    return get_json(client, api(key, "entries/?order=asc&count=1000"))["entries"]


def decoded_field(entry: dict, name: str) -> dict:
    [field] = [f for f in entry["decoded"] if f["name"] == name]
    return field


def assert_console_matches_redis(client: Client, r: redis.Redis, key: str, *, is_dlq: bool = False) -> dict:
    """The stream's row in the streams list, its info and each group's pending entries, against Redis.

    Returns the stream-info body.
    """
    info = r.xinfo_stream(key)
    groups = r.xinfo_groups(key)
    first, last = info["first-entry"], info["last-entry"]
    expected_groups = [
        {
            "name": g["name"].decode(),
            "consumers": g["consumers"],
            "pending": g["pending"],
            "last_delivered_id": g["last-delivered-id"].decode(),
            "entries_read": g["entries-read"],
            "lag": g["lag"],
        }
        for g in groups
    ]
    expected = {
        "key": key,
        "length": info["length"],
        "first_id": text(first[0]) if first else None,
        "last_id": text(last[0]) if last else None,
        "last_generated_id": text(info["last-generated-id"]),
        "entries_added": info["entries-added"],
        "is_dlq": is_dlq,
        "groups": expected_groups,
    }
    body = get_json(client, api(key))
    assert {name: body[name] for name in expected} == expected

    rows = get_json(client, f"/api/v1/c/default/streams/?match={quote(key, safe='')}&count=1000")["streams"]
    assert [
        {name: row[name] for name in ("key", "length", "first_id", "last_id", "groups", "pending", "is_dlq")}
        for row in rows
    ] == [
        {
            "key": key,
            "length": info["length"],
            "first_id": expected["first_id"],
            "last_id": expected["last_id"],
            "groups": len(groups),
            "pending": sum(g["pending"] for g in groups),
            "is_dlq": is_dlq,
        }
    ]

    for g in groups:
        name = g["name"].decode()
        summary = r.xpending(key, name)
        rows = r.xpending_range(key, name, min="-", max="+", count=1000)
        pending = get_json(client, api(key, f"groups/{seg(name)}/pending/?count=1000"))
        assert pending["summary"] == {
            "count": summary["pending"],
            "min_id": text(summary["min"]),
            "max_id": text(summary["max"]),
            "consumers": {c["name"].decode(): c["pending"] for c in summary["consumers"]},
        }
        assert [(e["id"], e["consumer"], e["deliveries"], e["exists"]) for e in pending["entries"]] == [
            (
                row["message_id"].decode(),
                row["consumer"].decode(),
                row["times_delivered"],
                bool(r.xrange(key, row["message_id"], row["message_id"])),
            )
            for row in rows
        ]
        assert all(isinstance(e["idle_ms"], int) and e["idle_ms"] >= 0 for e in pending["entries"])
    return body


def assert_escaped(body: str, payload: str) -> None:
    """``payload`` shows on the page, escaped, and never raw."""
    assert html.escape(payload) in body
    assert payload not in body


def redis_streams(r: redis.Redis, match: str = "*") -> set[str]:
    return {key.decode() for key in r.scan_iter(match=match, _type="stream", count=1000)}


def console_streams(client: Client, match: str = "*") -> dict[str, dict]:
    rows = get_json(client, f"/api/v1/c/default/streams/?match={quote(match, safe='')}&count=1000")["streams"]
    return {row["key"]: row for row in rows}


# ----------------------------------------------------------------------------------------- FastStream


def test_faststream_envelopes_and_consumer_group(aio: LoopThread, url: str, r: redis.Redis,
                                                 viewer_client: Client) -> None:
    """FastStream's default ``BinaryMessageFormatV1`` (the only format of FastStream 0.7): the console
    shows the envelope as headers + data, with the body decoded by its content type, and the consumer
    group that FastStream's subscriber made (odd orders failed, so they stay pending)."""
    from faststream.redis import BinaryMessageFormatV1, RedisBroker, StreamSub

    orders = [{"n": i, "customer": f"café {XSS}", "items": ["a", i]} for i in range(4)]
    handled: list[dict] = []

    async def scenario() -> None:
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
            await broker.publish(f"plain text {XSS}", stream="fs:misc", correlation_id="txt")
            await broker.publish(b"\x00\x01\xfe\xff", stream="fs:misc", correlation_id="bin")
            await broker.publish(msgpack.packb({"sku": "X-1", "qty": 3}), stream="fs:misc",
                                 headers={"content-type": "application/msgpack"}, correlation_id="mp")
            await broker.publish([1, "two", None], stream="fs:misc", correlation_id="list")
            await until(lambda: len(handled) == 4 and r.xpending("fs:orders", "billing")["pending"] == 2
                        and r.xinfo_groups("fs:orders")[0]["entries-read"] == 4,
                        "FastStream's subscriber to handle the four orders")

    aio.run(scenario())
    assert handled == orders

    # Streams, info, groups and pending against Redis.
    assert set(console_streams(viewer_client)) == redis_streams(r) == {"fs:orders", "fs:misc"}
    info = assert_console_matches_redis(viewer_client, r, "fs:orders")
    assert [g["name"] for g in info["groups"]] == ["billing"]
    assert_console_matches_redis(viewer_client, r, "fs:misc")
    pending = get_json(viewer_client, api("fs:orders", "groups/billing/pending/"))
    ids = [entry_id.decode() for entry_id, _ in r.xrange("fs:orders")]
    assert [e["id"] for e in pending["entries"]] == [ids[1], ids[3]]  # the declined (odd) orders
    assert {e["consumer"] for e in pending["entries"]} == {"billing-1"}

    # Entries: each FastStream field decodes to its headers and the very dict that was published.
    raw = {entry_id.decode(): fields for entry_id, fields in r.xrange("fs:orders")}
    entries = entries_asc(viewer_client, "fs:orders")
    assert [e["id"] for e in entries] == ids
    for i, entry in enumerate(entries):
        [(field_name, value)] = raw[entry["id"]].items()
        field = decoded_field(entry, field_name.decode())
        assert field["format"] == "faststream"
        body, headers = BinaryMessageFormatV1.parse(value)  # FastStream's own reader, as a reference
        assert field["value"] == {"headers": headers, "data": orders[i], "data_format": "json"}
        assert json.loads(body) == orders[i]
        assert headers["correlation_id"] == f"order-{i}" and headers["x-tenant"] == "acme"
        assert headers["content-type"] == "application/json"

    misc = entries_asc(viewer_client, "fs:misc")
    got = {}
    for entry in misc:
        [field] = entry["decoded"]
        assert field["format"] == "faststream"
        got[field["value"]["headers"]["correlation_id"]] = (field["value"]["data"], field["value"]["data_format"])
    assert got == {
        "txt": (f"plain text {XSS}", "text"),
        "bin": ("0001feff", "hex"),
        "mp": ({"sku": "X-1", "qty": 3}, "msgpack"),
        "list": ([1, "two", None], "json"),
    }

    # Pages: the payload is visible and escaped; the group page shows the group, its consumer, its PEL.
    stream_page = get_html(viewer_client, page("fs:orders"))
    assert_escaped(stream_page, f"café {XSS}")
    assert "x-tenant: acme" in stream_page and "correlation_id: order-3" in stream_page
    assert_escaped(get_html(viewer_client, page("fs:misc")), f"plain text {XSS}")
    group_page = get_html(viewer_client, page("fs:orders", "groups/billing/"))
    assert "billing-1" in group_page
    assert ids[1] in group_page and ids[3] in group_page


def test_faststream_non_ascii_headers_come_back_whole(aio: LoopThread, url: str, r: redis.Redis,
                                                     viewer_client: Client) -> None:
    """FastStream writes a header's length as ``len(str)``, characters rather than bytes: the console
    reads such headers by characters (``data_start`` tells which reading is right), so the values are
    what was published, wherever the non-ASCII header sits, and the body is still decoded."""
    from faststream.redis import RedisBroker

    published = [
        ({"x-note": "naïve ✓ 日本", "x-after": "ascii"}, {"k": 1}),
        ({"x-émoji": "🚀 go"}, {"k": 2}),
        ({"x-accents": "é", "x-last": f"{XSS} ü"}, "tail"),
    ]

    async def scenario() -> None:
        async with RedisBroker(url, logger=None) as broker:
            for i, (headers, body) in enumerate(published):
                await broker.publish(body, stream="fs:notes", headers=headers, correlation_id=f"n{i}")

    aio.run(scenario())
    entries = entries_asc(viewer_client, "fs:notes")
    assert len(entries) == len(published)
    for i, (entry, (headers, body)) in enumerate(zip(entries, published, strict=True)):
        [field] = entry["decoded"]
        assert field["format"] == "faststream"
        value = field["value"]
        assert value["data"] == body
        assert {name: value["headers"][name] for name in headers} == headers
        assert value["headers"]["correlation_id"] == f"n{i}"
    assert_escaped(get_html(viewer_client, page("fs:notes")), f"x-last: {XSS} ü")


def test_faststream_message_over_64_kib_shows_headers_and_body_start(aio: LoopThread, url: str,
                                                                     r: redis.Redis,
                                                                     viewer_client: Client) -> None:
    """A FastStream message bigger than the 64 KiB preview: its headers and the start of its body are
    shown (not a hex dump of the envelope's binary prefix), marked truncated, with the raw download."""
    from faststream.redis import BinaryMessageFormatV1, RedisBroker

    document = {"title": f"big {XSS}", "text": "é" * 40_000}  # 80 KB of UTF-8

    async def scenario() -> None:
        async with RedisBroker(url, logger=None) as broker:
            await broker.publish(document, stream="fs:docs", headers={"x-kind": "report"}, correlation_id="doc-1")

    aio.run(scenario())
    [(entry_id, fields)] = r.xrange("fs:docs")
    [(field_name, raw)] = fields.items()
    [entry] = entries_asc(viewer_client, "fs:docs")
    field = decoded_field(entry, field_name.decode())
    assert (field["format"], field["truncated"], field["size"]) == ("faststream", True, len(raw))
    value = field["value"]
    assert value["headers"] == {"correlation_id": "doc-1", "content-type": "application/json", "x-kind": "report"}
    assert value["data_format"] == "text"
    body_bytes, _ = BinaryMessageFormatV1.parse(raw)  # FastStream's own reader, as a reference
    assert json.loads(body_bytes) == document
    assert body_bytes.decode().startswith(value["data"]) and len(value["data"]) > 30_000
    download = viewer_client.get(field["raw_url"])
    assert download.status_code == 200 and download.content == raw
    body = get_html(viewer_client, page("fs:docs"))
    assert "x-kind: report" in body and "Shown: the first 64 KiB" in body
    assert_escaped(body, f"big {XSS}")


def test_faststream_prefix_cut_inside_the_headers_or_a_character(aio: LoopThread) -> None:
    """Cut before ``data_start``: no envelope to show, hex. Cut inside a body character: the body's
    start up to the last whole character, as text."""
    import struct

    from faststream.redis import BinaryMessageFormatV1

    from streams_app.redis_ops.decoding import decode_value

    raw = aio.run(BinaryMessageFormatV1.encode(message="ééé", reply_to=None, headers=None, correlation_id="c-3"))
    data_start = struct.unpack_from(">I", raw, 14)[0]
    assert decode_value(raw, limit=data_start - 1).format == "hex"
    cut = decode_value(raw, limit=data_start + 3)  # "é" + the first byte of the second "é"
    assert (cut.format, cut.truncated, cut.size) == ("faststream", True, len(raw))
    assert (cut.value["data"], cut.value["data_format"]) == ("é", "text")
    assert cut.value["headers"] == {"correlation_id": "c-3", "content-type": "text/plain"}


@pytest.mark.parametrize(
    "headers",
    [
        {"x-a": "é"},  # 2-byte character, last header
        {"x-a": "é", "x-b": "after"},  # a header follows: a byte reader misreads it
        {"x-a": "日本語", "x-b": "中"},  # 3-byte characters
        {"x-a": "🚀🚀", "x-b": "x"},  # 4-byte characters
        {"x-ключ": "значение", "x-b": "b"},  # non-ASCII key
        {"x-a": "a" * 300 + "é", "x-b": "ü" * 200},  # lengths over 255
    ],
)
def test_faststream_encoder_headers_decode_exactly(aio: LoopThread, headers: dict[str, str]) -> None:
    """The bytes of FastStream's own encoder, for header values that a byte-count reader gets wrong."""
    from faststream.redis import BinaryMessageFormatV1

    from streams_app.redis_ops.decoding import decode_value

    raw = aio.run(BinaryMessageFormatV1.encode(message={"ok": True}, reply_to=None, headers=headers,
                                               correlation_id="c-1"))
    decoded = decode_value(raw)
    assert decoded.format == "faststream"
    assert decoded.value == {
        "headers": {"correlation_id": "c-1", "content-type": "application/json", **headers},
        "data": {"ok": True},
        "data_format": "json",
    }


def test_faststream_header_block_short_of_data_start_keeps_the_byte_reading(aio: LoopThread) -> None:
    """Neither reading ends at ``data_start`` (a writer that pads before the body): the headers as
    byte counts read them, the body from ``data_start``."""
    import struct

    from faststream.redis import BinaryMessageFormatV1

    from streams_app.redis_ops.decoding import decode_value

    raw = aio.run(BinaryMessageFormatV1.encode(message="body", reply_to=None, headers={"x-a": "b"},
                                               correlation_id="c-2"))
    data_start = struct.unpack_from(">I", raw, 14)[0]
    padded = raw[:14] + struct.pack(">I", data_start + 2) + raw[18:data_start] + b"\x00\x00" + raw[data_start:]
    assert decode_value(padded).value == {
        "headers": {"correlation_id": "c-2", "content-type": "text/plain", "x-a": "b"},
        "data": "body",
        "data_format": "text",
    }


# ------------------------------------------------------------------------- plain XADD, FastStream consumer


def test_plain_xadd_streams_with_a_faststream_group_and_a_raw_group(aio: LoopThread, url: str, r: redis.Redis,
                                                                  viewer_client: Client) -> None:
    """Producers that XADD plain fields. ``plain:orders`` (text and JSON fields) is consumed by a
    FastStream subscriber group, which acks what it handled; one entry arrives after it stopped.
    ``plain:sensors`` holds binary fields (msgpack, raw bytes, which FastStream cannot consume: it turns
    a plain entry into JSON) and is read by a redis-py XREADGROUP that does not ack."""
    from faststream.redis import RedisBroker, StreamSub

    handled: list[Any] = []

    async def scenario() -> None:
        broker = RedisBroker(url, logger=None)

        @broker.subscriber(stream=StreamSub("plain:orders", group="shipping", consumer="ship-1"))
        async def ship(body: Any) -> None:
            handled.append(body)

        async with broker:
            await broker.start()
            r.xadd("plain:orders", {"type": "order.created", "data": json.dumps({"id": 1, "note": XSS})})
            r.xadd("plain:orders", {"type": "order.paid", "data": json.dumps({"id": 1, "amount": 12.5})})
            await until(lambda: len(handled) == 2 and r.xpending("plain:orders", "shipping")["pending"] == 0
                        and r.xinfo_groups("plain:orders")[0]["entries-read"] == 2,
                        "FastStream to handle and ack the plain entries")
        # The subscriber's last XREADGROUP BLOCK may outlive the broker by a moment on the server, and
        # Redis would hand it the next entry: wait until no client is blocked before adding it.
        await until(lambda: r.info("clients")["blocked_clients"] == 0, "FastStream's blocking read to end")
        r.xadd("plain:orders", {"type": "order.cancelled", "data": json.dumps({"id": 1}), "n": "42"})

    aio.run(scenario())
    assert handled == [{"id": 1, "note": XSS}, {"id": 1, "amount": 12.5}]
    info = assert_console_matches_redis(viewer_client, r, "plain:orders")
    assert info["groups"][0]["lag"] == 1
    entries = entries_asc(viewer_client, "plain:orders")
    assert [{f["name"]: (f["format"], f["value"]) for f in e["decoded"]} for e in entries] == [
        {"type": ("text", "order.created"), "data": ("json", {"id": 1, "note": XSS})},
        {"type": ("text", "order.paid"), "data": ("json", {"id": 1, "amount": 12.5})},
        {"type": ("text", "order.cancelled"), "data": ("json", {"id": 1}), "n": ("text", "42")},
    ]
    assert entries[0]["fields"] == {"type": "order.created", "data": json.dumps({"id": 1, "note": XSS},
                                                                                separators=(",", ":"))}
    assert_escaped(get_html(viewer_client, page("plain:orders")), XSS)
    assert "ship-1" in get_html(viewer_client, page("plain:orders", "groups/shipping/"))

    r.xadd("plain:sensors", {"reading": msgpack.packb({"t": 21.5, "tags": ["a", XSS]}), "raw": b"\xff\x00\x80"})
    r.xadd("plain:sensors", {"reading": msgpack.packb([1, 2, 3]), "unit": "°C"})
    r.xgroup_create("plain:sensors", "archiver", id="0")
    r.xreadgroup("archiver", "arch-1", {"plain:sensors": ">"}, count=1)
    assert_console_matches_redis(viewer_client, r, "plain:sensors")
    sensors = entries_asc(viewer_client, "plain:sensors")
    assert [{f["name"]: (f["format"], f["value"]) for f in e["decoded"]} for e in sensors] == [
        {"reading": ("msgpack", {"t": 21.5, "tags": ["a", XSS]}), "raw": ("hex", "ff0080")},
        {"reading": ("msgpack", [1, 2, 3]), "unit": ("text", "°C")},
    ]
    assert_escaped(get_html(viewer_client, page("plain:sensors")), XSS)


# ------------------------------------------------------------------------------------------------ taskiq


def test_taskiq_stream_broker_json_and_msgpack(aio: LoopThread, url: str, r: redis.Redis,
                                               viewer_client: Client) -> None:
    """taskiq's ``RedisStreamBroker``: tasks kicked with the JSON serializer (the default) and with
    ``MSGPackSerializer``; the broker's own ``listen()`` reads two tasks for its group and acks one."""
    from taskiq.serializers import MSGPackSerializer
    from taskiq_redis import RedisStreamBroker

    kicked: dict[str, list[str]] = {"taskiq:jobs": [], "taskiq:packed": []}

    async def scenario() -> None:
        broker = RedisStreamBroker(url, queue_name="taskiq:jobs", consumer_group_name="taskiq-workers",
                                   consumer_name="worker-a", xread_count=2, xread_block=100)

        @broker.task(task_name="billing.charge")
        async def charge(order_id: int, amount: float, note: str = "") -> None:
            return None

        await broker.startup()
        try:
            for i in range(4):
                kicked["taskiq:jobs"].append((await charge.kiq(i, 9.5 + i)).task_id)
            task = await charge.kicker().with_labels(origin=XSS).kiq(order_id=99, amount=1.0, note="naïve")
            kicked["taskiq:jobs"].append(task.task_id)
            messages = broker.listen()
            first = await messages.__anext__()
            await messages.__anext__()  # read, not acked: stays pending
            await first.ack()
            await messages.aclose()
        finally:
            await broker.shutdown()

        packed = RedisStreamBroker(url, queue_name="taskiq:packed", consumer_group_name="taskiq-workers")
        packed.with_serializer(MSGPackSerializer())

        @packed.task(task_name="reports.build")
        async def build(day: str, *, full: bool) -> None:
            return None

        await packed.startup()
        try:
            kicked["taskiq:packed"].append((await build.kiq("2026-01-31", full=True)).task_id)
        finally:
            await packed.shutdown()

    aio.run(scenario())

    assert redis_streams(r) == {"taskiq:jobs", "taskiq:packed"}
    assert {key: row["is_dlq"] for key, row in console_streams(viewer_client).items()} == {
        "taskiq:jobs": False, "taskiq:packed": False,
    }
    info = assert_console_matches_redis(viewer_client, r, "taskiq:jobs")
    [group] = info["groups"]
    assert (group["name"], group["consumers"], group["pending"], group["entries_read"], group["lag"]) == (
        "taskiq-workers", 1, 1, 2, 3,
    )
    ids = [entry_id.decode() for entry_id, _ in r.xrange("taskiq:jobs")]
    pending = get_json(viewer_client, api("taskiq:jobs", "groups/taskiq-workers/pending/"))
    assert [(e["id"], e["consumer"]) for e in pending["entries"]] == [(ids[1], "worker-a")]
    assert_console_matches_redis(viewer_client, r, "taskiq:packed")

    # JSON tasks: field "data", decoded to taskiq's message with the arguments that were kicked.
    entries = entries_asc(viewer_client, "taskiq:jobs")
    values = [decoded_field(e, "data") for e in entries]
    assert {v["format"] for v in values} == {"json"}
    assert [v["value"]["task_id"] for v in values] == kicked["taskiq:jobs"]
    assert {v["value"]["task_name"] for v in values} == {"billing.charge"}
    assert [v["value"]["args"] for v in values[:4]] == [[i, 9.5 + i] for i in range(4)]
    assert values[4]["value"]["kwargs"] == {"order_id": 99, "amount": 1.0, "note": "naïve"}
    assert values[4]["value"]["labels"] == {"origin": XSS}

    # msgpack tasks: decoded as msgpack, equal to what msgpack itself unpacks from Redis.
    [(packed_id, packed_fields)] = r.xrange("taskiq:packed")
    [entry] = entries_asc(viewer_client, "taskiq:packed")
    field = decoded_field(entry, "data")
    assert field["format"] == "msgpack"
    assert field["value"] == msgpack.unpackb(packed_fields[b"data"])
    assert field["value"]["task_id"] == kicked["taskiq:packed"][0]
    assert (field["value"]["task_name"], field["value"]["args"], field["value"]["kwargs"]) == (
        "reports.build", ["2026-01-31"], {"full": True},
    )

    assert_escaped(get_html(viewer_client, page("taskiq:jobs")), XSS)
    assert "reports.build" in get_html(viewer_client, page("taskiq:packed"))
    group_page = get_html(viewer_client, page("taskiq:jobs", "groups/taskiq-workers/"))
    assert "worker-a" in group_page and ids[1] in group_page


# ------------------------------------------------------------------------------------------------ streaQ


def test_streaq_worker_streams(aio: LoopThread, url: str, r: redis.Redis, viewer_client: Client) -> None:
    """streaQ 5.1: tasks enqueued, a real worker runs; finished tasks are acked and deleted from the
    stream, a held one is pending on the worker's consumer in group ``workers``."""
    import anyio
    from streaq import Worker

    class ThreadWorker(Worker):
        """streaQ's worker minus its SIGINT/SIGTERM handler: signals only reach the main thread and
        this worker runs on the test's loop thread. It is stopped the way streaQ's ``burst`` does."""

        async def signal_handler(self, scope: Any) -> None:
            await anyio.sleep_forever()

    release = threading.Event()
    worker = ThreadWorker(redis_url=url, queue_name="shop", concurrency=2)

    @worker.task()
    async def add(a: int, b: int) -> int:
        return a + b

    @worker.task()
    async def hold(note: str) -> str:
        with anyio.fail_after(WAIT):
            while not release.is_set():
                await anyio.sleep(0.02)
        return note

    async def enqueue() -> list[str]:
        tasks = [await add.enqueue(1, 2), await add.enqueue(3, 4), await hold.enqueue(XSS)]
        return [t.id for t in tasks]

    task_ids = aio.run(enqueue())
    [stream] = redis_streams(r, "streaq:*")
    assert r.xlen(stream) == 3
    queued = entries_asc(viewer_client, stream)
    assert [decoded_field(e, "task_id")["value"] for e in queued] == task_ids
    assert {decoded_field(e, "task_id")["format"] for e in queued} == {"text"}

    running = aio.start(worker.run_async())
    try:
        wait(lambda: r.xlen(stream) == 1 and r.xpending(stream, "workers")["pending"] == 1,
             "the streaQ worker to finish two tasks and hold the third")
        assert set(console_streams(viewer_client)) == redis_streams(r)  # sorted sets and strings left out
        info = assert_console_matches_redis(viewer_client, r, stream)
        assert [(g["name"], g["pending"]) for g in info["groups"]] == [("workers", 1)]
        [entry] = entries_asc(viewer_client, stream)
        assert entry["fields"] == {"task_id": task_ids[2]}
        [held] = get_json(viewer_client, api(stream, "groups/workers/pending/"))["entries"]
        assert (held["id"], held["consumer"], held["exists"]) == (entry["id"], worker.id, True)
        assert worker.id in get_html(viewer_client, page(stream, "groups/workers/"))
        assert task_ids[2] in get_html(viewer_client, page(stream))
    finally:
        release.set()
        wait(lambda: r.xlen(stream) == 0, "the worker to finish the held task")
        worker.burst = True
        running.result(WAIT)
    info = assert_console_matches_redis(viewer_client, r, stream)
    assert info["length"] == 0 and info["entries_added"] == 3 and info["groups"][0]["pending"] == 0


# -------------------------------------------------------------------------------------------- OmniDaemon


def _omnidaemon_bus_class(monkeypatch, tmp_path) -> type:
    # Importing omnidaemon creates its JSON store directory in the working directory unless told
    # otherwise (python-decouple reads the environment at import time).
    monkeypatch.setenv("JSON_STORAGE_DIR", str(tmp_path / "omnidaemon"))
    from omnidaemon.event_bus.redis_stream_bus import RedisStreamEventBus

    return RedisStreamEventBus


def test_omnidaemon_dead_letters_requeued_and_consumed_again(aio: LoopThread, url: str, r: redis.Redis,
                                                             viewer_client: Client, operator_client: Client,
                                                             monkeypatch, tmp_path) -> None:
    """OmniDaemon's ``RedisStreamEventBus``: an agent whose callback fails has its messages reclaimed,
    retried and dead-lettered to ``omni-dlq:{group}`` by OmniDaemon itself. The console lists and parses
    that DLQ and requeues its entries (one by ID inline, the rest with the bulk job) to
    ``original_stream`` with ``data`` = the failed message's JSON; OmniDaemon's agent then consumes the
    requeued messages like any other."""
    from streams_app.jobs import runner as jobs

    bus_class = _omnidaemon_bus_class(monkeypatch, tmp_path)
    topic, agent = "file.uploaded", "file-processor"
    stream, group = f"omni-stream:{topic}", f"group:{topic}:{agent}"
    dlq = f"omni-dlq:{group}"
    failing = {f"task-{n}": {"filename": f"café {XSS} {n}.pdf", "fail": True} for n in (2, 3, 4)}
    consumed: list[dict] = []

    def make_bus():
        # reclaim at once and after one retry, so the DLQ is reached in a few loop turns
        return bus_class(redis_url=url, reclaim_interval=0.02, default_reclaim_idle_ms=1, default_dlq_retry_limit=1)

    async def fail_then_dead_letter() -> None:
        bus = make_bus()

        async def process(payload: dict) -> None:
            if payload["content"].get("fail"):
                raise RuntimeError(f"cannot parse {XSS}")

        try:
            await bus.subscribe(topic, agent, process)
            await bus.publish({"topic": topic, "id": "task-1", "payload": {"content": {"filename": "ok.pdf"}},
                               "correlation_id": "req-1"})
            for task_id, content in failing.items():
                await bus.publish({"topic": topic, "id": task_id, "payload": {"content": content},
                                   "correlation_id": f"req-{task_id}"})
            await until(lambda: r.xlen(dlq) == 3 and r.xpending(stream, group)["pending"] == 0,
                        "OmniDaemon to dead-letter the failing messages")
        finally:
            await bus.close()

    aio.run(fail_then_dead_letter())

    # Streams list: OmniDaemon's stream, its metrics stream and its DLQ, only the DLQ flagged.
    assert set(console_streams(viewer_client)) == redis_streams(r) == {stream, dlq, "omni-metrics"}
    assert_console_matches_redis(viewer_client, r, stream)
    assert_console_matches_redis(viewer_client, r, "omni-metrics")
    assert_console_matches_redis(viewer_client, r, dlq, is_dlq=True)

    original_ids = {json.loads(f[b"data"])["task_id"]: i.decode() for i, f in r.xrange(stream)}
    dead = {i.decode(): json.loads(f[b"data"]) for i, f in r.xrange(dlq)}
    by_task = {doc["failed_message"]["task_id"]: dlq_id for dlq_id, doc in dead.items()}
    assert set(by_task) == set(failing)
    for task_id, dlq_id in by_task.items():
        assert dead[dlq_id]["original_id"] == original_ids[task_id]
        assert dead[dlq_id]["failed_message"]["content"] == failing[task_id]

    [listed] = get_json(viewer_client, "/api/v1/c/default/dlq/")["dlqs"]
    assert {name: listed[name] for name in ("key", "convention", "depth", "source_streams")} == {
        "key": dlq, "convention": "omnidaemon", "depth": 3, "source_streams": [stream],
    }
    parsed = get_json(viewer_client, f"/api/v1/c/default/dlq/{seg(dlq)}/")["entries"]
    assert [p["id"] for p in parsed] == [i.decode() for i, _ in r.xrevrange(dlq)]  # newest first
    for entry in parsed:
        doc = dead[entry["id"]]
        assert {name: entry[name] for name in ("convention", "original_stream", "original_id", "group",
                                                "error", "retries", "failed_at_ms")} == {
            "convention": "omnidaemon",
            "original_stream": stream,
            "original_id": doc["original_id"],
            "group": group,
            "error": doc["error"],
            "retries": doc["retry_count"],
            "failed_at_ms": round(doc["failed_at"] * 1000),
        }
        assert entry["payload"] == [{"name": "data", "format": "json", "value": doc["failed_message"],
                                     "truncated": False}]

    # The stream entries decode to OmniDaemon's JSON envelope; pages show them escaped.
    entries = entries_asc(viewer_client, stream)
    assert [decoded_field(e, "data")["value"] for e in entries] == [json.loads(f[b"data"]) for _, f in r.xrange(stream)]
    assert_escaped(get_html(viewer_client, page(stream)), f"café {XSS} 2.pdf")
    assert agent in get_html(viewer_client, page(stream, f"groups/{seg(group)}/"))
    dlq_page = get_html(viewer_client, f"/c/default/dlq/{seg(dlq)}/")
    for content in failing.values():
        assert_escaped(dlq_page, content["filename"])

    # Requeue one by ID: a viewer may not; an operator moves it back to original_stream, once.
    path = f"/api/v1/c/default/dlq/{seg(dlq)}/requeue"
    first = by_task["task-2"]
    refused = viewer_client.post(path, data=json.dumps({"ids": [first]}), content_type="application/json")
    assert refused.status_code == 403 and r.xlen(dlq) == 3
    response = operator_client.post(path, data=json.dumps({"ids": [first]}), content_type="application/json")
    assert response.status_code == 200, response.content
    body = response.json()
    [requeued] = body["requeued"]
    assert (requeued["dlq_id"], requeued["stream"], body["missing"]) == (first, stream, [])
    again = operator_client.post(path, data=json.dumps({"ids": [first]}), content_type="application/json")
    assert again.json()["missing"] == [first] and r.xlen(dlq) == 2

    # The rest with the bulk job ("all up to the newest on screen"), run as the Celery worker would.
    newest = r.xrevrange(dlq, count=1)[0][0].decode()
    response = operator_client.post(path, data=json.dumps({"all": True, "up_to": newest}),
                                    content_type="application/json")
    assert response.status_code == 202, response.content
    jobs.job_run(response.json()["job"])
    assert get_json(viewer_client, f"/api/v1/jobs/{response.json()['job']}")["state"] == "done"
    assert r.xlen(dlq) == 0

    requeued_entries = [(i.decode(), f) for i, f in r.xrange(stream)][len(original_ids):]
    assert sorted(f[b"_requeued_from"].decode() for _, f in requeued_entries) == sorted(dead)
    for _, fields in requeued_entries:
        assert set(fields) == {b"data", b"_requeued_from"}
        assert json.loads(fields[b"data"]) == dead[fields[b"_requeued_from"].decode()]["failed_message"]
    assert_console_matches_redis(viewer_client, r, stream)

    # OmniDaemon's agent (now fixed) consumes the requeued messages from where its group left off.
    async def consume_requeued() -> None:
        bus = make_bus()

        async def process(payload: dict) -> None:
            consumed.append(payload)

        try:
            await bus.subscribe(topic, agent, process)
            await until(lambda: len(consumed) == 3 and r.xpending(stream, group)["pending"] == 0
                        and r.xinfo_groups(stream)[0]["last-delivered-id"].decode() == requeued_entries[-1][0],
                        "OmniDaemon to consume the requeued messages")
        finally:
            await bus.close()

    aio.run(consume_requeued())
    assert sorted(p["task_id"] for p in consumed) == sorted(failing)
    for payload in consumed:
        assert payload["content"] == failing[payload["task_id"]]
        failed_message = dead[by_task[payload["task_id"]]]["failed_message"]
        assert {k: v for k, v in payload.items() if k != "processing_consumer"} == failed_message
    assert_console_matches_redis(viewer_client, r, stream)
    assert_console_matches_redis(viewer_client, r, dlq, is_dlq=True)
