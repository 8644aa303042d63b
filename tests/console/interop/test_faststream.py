"""FastStream 0.7 and plain XADD producers, read back through the console's JSON API and pages.

FastStream's ``BinaryMessageFormatV1`` envelope (the only format it writes) around JSON, text, bytes
and msgpack bodies, a consumer group whose odd orders failed, non-ASCII headers, a message over the
64 KiB preview, and envelopes cut or padded; then plain XADD streams read by a FastStream group and by
a raw XREADGROUP. Expected values come from Redis (XINFO, XPENDING, XRANGE through redis-py), from
FastStream's own ``BinaryMessageFormatV1.parse`` and from what the test published.
"""

from __future__ import annotations

import json
from typing import Any

import msgpack
import pytest
import redis
from django.test import Client

from tests.console.helpers import stream_api, stream_url
from tests.console.interop.helpers import (
    WAIT,
    XSS,
    LoopThread,
    assert_console_matches_redis,
    assert_escaped,
    console_streams,
    decoded_field,
    entries_asc,
    get_html,
    get_json,
    redis_streams,
)
from tests.polling import until


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
                        what="FastStream's subscriber to handle the four orders", timeout=WAIT)

    aio.run(scenario())
    assert handled == orders

    # Streams, info, groups and pending against Redis.
    assert set(console_streams(viewer_client)) == redis_streams(r) == {"fs:orders", "fs:misc"}
    info = assert_console_matches_redis(viewer_client, r, "fs:orders")
    assert [g["name"] for g in info["groups"]] == ["billing"]
    assert_console_matches_redis(viewer_client, r, "fs:misc")
    pending = get_json(viewer_client, stream_api("fs:orders", "groups/billing/pending/"))
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
    stream_page = get_html(viewer_client, stream_url("fs:orders"))
    assert_escaped(stream_page, f"café {XSS}")
    assert "x-tenant: acme" in stream_page and "correlation_id: order-3" in stream_page
    assert_escaped(get_html(viewer_client, stream_url("fs:misc")), f"plain text {XSS}")
    group_page = get_html(viewer_client, stream_url("fs:orders", "groups/billing/"))
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
    assert_escaped(get_html(viewer_client, stream_url("fs:notes")), f"x-last: {XSS} ü")


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
    body = get_html(viewer_client, stream_url("fs:docs"))
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
                        what="FastStream to handle and ack the plain entries", timeout=WAIT)
        # The subscriber's last XREADGROUP BLOCK may outlive the broker by a moment on the server, and
        # Redis would hand it the next entry: wait until no client is blocked before adding it.
        await until(lambda: r.info("clients")["blocked_clients"] == 0, what="FastStream's blocking read to end",
                    timeout=WAIT)
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
    assert_escaped(get_html(viewer_client, stream_url("plain:orders")), XSS)
    assert "ship-1" in get_html(viewer_client, stream_url("plain:orders", "groups/shipping/"))

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
    assert_escaped(get_html(viewer_client, stream_url("plain:sensors")), XSS)
