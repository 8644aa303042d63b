"""FastStream 0.7 and plain XADD producers, read back through the console's JSON API and pages.

FastStream runs in the interop venv (``clients/faststream_side.py``). Its ``BinaryMessageFormatV1``
envelope (the only format it writes) around JSON, text, bytes and msgpack bodies, a consumer group whose
odd orders failed, non-ASCII headers, a message over the 64 KiB preview, and envelopes cut or padded;
then plain XADD streams read by a FastStream group and by a raw XREADGROUP. Expected values come from
Redis (XINFO, XPENDING, XRANGE through redis-py), from FastStream's own ``BinaryMessageFormatV1.parse``
and ``encode`` (run beside the library, their results sent back), and from what the test published.
"""

from __future__ import annotations

import base64
import json
import struct
from collections.abc import Callable
from pathlib import Path

import msgpack
import pytest
import redis
from django.test import Client

from eventbus.decoding import decode_value
from tests.console.helpers import stream_api, stream_url
from tests.console.interop.helpers import (
    XSS,
    LibraryProcess,
    assert_console_matches_redis,
    assert_escaped,
    console_streams,
    decoded_field,
    entries_asc,
    get_html,
    get_json,
    redis_streams,
)

#: Header sets a byte-count reader of FastStream's envelope gets wrong, encoded by FastStream itself.
HEADER_CASES = [
    {"x-a": "é"},  # 2-byte character, last header
    {"x-a": "é", "x-b": "after"},  # a header follows: a byte reader misreads it
    {"x-a": "日本語", "x-b": "中"},  # 3-byte characters
    {"x-a": "🚀🚀", "x-b": "x"},  # 4-byte characters
    {"x-ключ": "значение", "x-b": "b"},  # non-ASCII key
    {"x-a": "a" * 300 + "é", "x-b": "ü" * 200},  # lengths over 255
]
ENCODED = [
    {"message": "ééé", "headers": None, "correlation_id": "c-3"},  # cut inside the headers or a character
    {"message": "body", "headers": {"x-a": "b"}, "correlation_id": "c-2"},  # padded before the body
    *({"message": {"ok": True}, "headers": headers, "correlation_id": "c-1"} for headers in HEADER_CASES),
]


@pytest.fixture(scope="module")
def encoded(interop_python: Path, tmp_path_factory) -> list[bytes]:
    """FastStream's own bytes for each of :data:`ENCODED`, in order (one run of the library)."""
    process = LibraryProcess(interop_python, "faststream_side.py", "encode", "", cwd=tmp_path_factory.mktemp("fs"),
                             messages=ENCODED)
    try:
        raw = process.read()["raw"]
        process.finish()
    finally:
        process.kill()
    return [base64.b64decode(value) for value in raw]


def unb64(text: str) -> bytes:
    return base64.b64decode(text)


def test_faststream_envelopes_and_consumer_group(run_library: Callable, r: redis.Redis,
                                                 viewer_client: Client) -> None:
    """FastStream's default ``BinaryMessageFormatV1`` (the only format of FastStream 0.7): the console
    shows the envelope as headers + data, with the body decoded by its content type, and the consumer
    group that FastStream's subscriber made (odd orders failed, so they stay pending)."""
    orders = [{"n": i, "customer": f"café {XSS}", "items": ["a", i]} for i in range(4)]
    result = run_library("faststream_side.py", "envelopes_and_group", orders=orders, text=f"plain text {XSS}")
    handled, parsed = result["handled"], result["parsed"]
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
        body, headers = parsed[entry["id"]][field_name.decode()]  # FastStream's own reader, as a reference
        assert field["value"] == {"headers": headers, "data": orders[i], "data_format": "json"}
        assert json.loads(unb64(body)) == orders[i]
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


def test_faststream_non_ascii_headers_come_back_whole(run_library: Callable, r: redis.Redis,
                                                     viewer_client: Client) -> None:
    """FastStream writes a header's length as ``len(str)``, characters rather than bytes: the console
    reads such headers by characters (``data_start`` tells which reading is right), so the values are
    what was published, wherever the non-ASCII header sits, and the body is still decoded."""
    published = [
        ({"x-note": "naïve ✓ 日本", "x-after": "ascii"}, {"k": 1}),
        ({"x-émoji": "🚀 go"}, {"k": 2}),
        ({"x-accents": "é", "x-last": f"{XSS} ü"}, "tail"),
    ]
    run_library("faststream_side.py", "publish", stream="fs:notes", messages=[
        {"body": body, "headers": headers, "correlation_id": f"n{i}"} for i, (headers, body) in enumerate(published)
    ])
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


def test_faststream_message_over_64_kib_shows_headers_and_body_start(run_library: Callable, r: redis.Redis,
                                                                     viewer_client: Client) -> None:
    """A FastStream message bigger than the 64 KiB preview: its headers and the start of its body are
    shown (not a hex dump of the envelope's binary prefix), marked truncated, with the raw download."""
    document = {"title": f"big {XSS}", "text": "é" * 40_000}  # 80 KB of UTF-8
    parsed = run_library("faststream_side.py", "publish", stream="fs:docs", messages=[
        {"body": document, "headers": {"x-kind": "report"}, "correlation_id": "doc-1"},
    ])["parsed"]
    [(entry_id, fields)] = r.xrange("fs:docs")
    [(field_name, raw)] = fields.items()
    [entry] = entries_asc(viewer_client, "fs:docs")
    field = decoded_field(entry, field_name.decode())
    assert (field["format"], field["truncated"], field["size"]) == ("faststream", True, len(raw))
    value = field["value"]
    assert value["headers"] == {"correlation_id": "doc-1", "content-type": "application/json", "x-kind": "report"}
    assert value["data_format"] == "text"
    body_bytes = unb64(parsed[entry_id.decode()][field_name.decode()][0])  # FastStream's own reader
    assert json.loads(body_bytes) == document
    assert body_bytes.decode().startswith(value["data"]) and len(value["data"]) > 30_000
    download = viewer_client.get(field["raw_url"])
    assert download.status_code == 200 and download.content == raw
    body = get_html(viewer_client, stream_url("fs:docs"))
    assert "x-kind: report" in body and "Shown: the first 64 KiB" in body
    assert_escaped(body, f"big {XSS}")


def test_faststream_prefix_cut_inside_the_headers_or_a_character(encoded: list[bytes]) -> None:
    """Cut before ``data_start``: no envelope to show, hex. Cut inside a body character: the body's
    start up to the last whole character, as text."""
    raw = encoded[0]
    data_start = struct.unpack_from(">I", raw, 14)[0]
    assert decode_value(raw, limit=data_start - 1).format == "hex"
    cut = decode_value(raw, limit=data_start + 3)  # "é" + the first byte of the second "é"
    assert (cut.format, cut.truncated, cut.size) == ("faststream", True, len(raw))
    assert (cut.value["data"], cut.value["data_format"]) == ("é", "text")
    assert cut.value["headers"] == {"correlation_id": "c-3", "content-type": "text/plain"}


@pytest.mark.parametrize("case", range(len(HEADER_CASES)))
def test_faststream_encoder_headers_decode_exactly(encoded: list[bytes], case: int) -> None:
    """The bytes of FastStream's own encoder, for header values that a byte-count reader gets wrong."""
    headers, raw = HEADER_CASES[case], encoded[2 + case]
    decoded = decode_value(raw)
    assert decoded.format == "faststream"
    assert decoded.value == {
        "headers": {"correlation_id": "c-1", "content-type": "application/json", **headers},
        "data": {"ok": True},
        "data_format": "json",
    }


def test_faststream_header_block_short_of_data_start_keeps_the_byte_reading(encoded: list[bytes]) -> None:
    """Neither reading ends at ``data_start`` (a writer that pads before the body): the headers as
    byte counts read them, the body from ``data_start``."""
    raw = encoded[1]
    data_start = struct.unpack_from(">I", raw, 14)[0]
    padded = raw[:14] + struct.pack(">I", data_start + 2) + raw[18:data_start] + b"\x00\x00" + raw[data_start:]
    assert decode_value(padded).value == {
        "headers": {"correlation_id": "c-2", "content-type": "text/plain", "x-a": "b"},
        "data": "body",
        "data_format": "text",
    }


def test_plain_xadd_streams_with_a_faststream_group_and_a_raw_group(run_library: Callable, r: redis.Redis,
                                                                  viewer_client: Client) -> None:
    """Producers that XADD plain fields. ``plain:orders`` (text and JSON fields) is consumed by a
    FastStream subscriber group, which acks what it handled; one entry arrives after it stopped.
    ``plain:sensors`` holds binary fields (msgpack, raw bytes, which FastStream cannot consume: it turns
    a plain entry into JSON) and is read by a redis-py XREADGROUP that does not ack."""
    handled = run_library("faststream_side.py", "plain_group", orders=[
        {"type": "order.created", "data": json.dumps({"id": 1, "note": XSS})},
        {"type": "order.paid", "data": json.dumps({"id": 1, "amount": 12.5})},
    ], late={"type": "order.cancelled", "data": json.dumps({"id": 1}), "n": "42"})["handled"]
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
