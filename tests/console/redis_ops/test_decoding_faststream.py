"""Decoding FastStream envelopes (binary message format v1): headers, body formats, and malformed envelopes.

The inputs are the bytes FastStream 0.6.7's own encoder produced (``faststream_samples.py``), and the
expected headers and bodies are the arguments that encoder was given, spelled out literally; an envelope
cut or corrupted must come back as plain hex of its bytes.
"""

from __future__ import annotations

import pytest

from eventbus.decoding import decode_value
from tests.console.redis_ops.faststream_samples import (
    FS_BYTES,
    FS_EMPTY,
    FS_JSON_DICT,
    FS_LIST,
    FS_MSGPACK_BODY,
    FS_NON_ASCII_HEADER,
    FS_TEXT,
)


def test_fixtures_are_the_library_bytes() -> None:
    # guard against a typo in the hex of faststream_samples.py: FastStream's body always starts at data_start
    assert FS_JSON_DICT[-36:] == b'{"order_id": 7, "items": ["a", "b"]}'
    assert FS_NON_ASCII_HEADER.endswith(b'{"name": "caf\\u00e9"}')


def test_faststream_json_body() -> None:
    decoded = decode_value(FS_JSON_DICT)
    assert decoded.format == "faststream"
    assert decoded.value == {
        "headers": {"correlation_id": "cid-1", "content-type": "application/json"},
        "data": {"order_id": 7, "items": ["a", "b"]},
        "data_format": "json",
    }
    assert decoded.pretty == (
        "correlation_id: cid-1\ncontent-type: application/json\n\n"
        '{\n  "order_id": 7,\n  "items": [\n    "a",\n    "b"\n  ]\n}'
    )
    assert decoded.size == len(FS_JSON_DICT)


def test_faststream_text_body_with_reply_to_and_custom_header() -> None:
    assert decode_value(FS_TEXT).value == {
        "headers": {
            "correlation_id": "cid-2",
            "content-type": "text/plain",
            "reply_to": "replies",
            "x-trace": "t1",
        },
        "data": "hello world",
        "data_format": "text",
    }


def test_faststream_binary_and_empty_bodies() -> None:
    assert decode_value(FS_BYTES).value == {
        "headers": {"correlation_id": "cid-3"},
        "data": "0001ff",
        "data_format": "hex",
    }
    assert decode_value(FS_EMPTY).value == {
        "headers": {"correlation_id": "cid-4"},
        "data": "",
        "data_format": "text",
    }


def test_faststream_json_list_and_msgpack_bodies() -> None:
    assert decode_value(FS_LIST).value["data"] == [1, 2, 3]
    body = decode_value(FS_MSGPACK_BODY).value
    assert body["headers"]["content-type"] == "application/msgpack"
    assert (body["data"], body["data_format"]) == ({"k": 1}, "msgpack")


def test_faststream_miscounted_non_ascii_header_is_read_by_characters() -> None:
    # the header's length is 4 (characters of "café", 5 bytes): read as characters, the header block
    # ends exactly at data_start, so the value comes back whole
    assert decode_value(FS_NON_ASCII_HEADER).value == {
        "headers": {"correlation_id": "c5", "content-type": "application/json", "who": "café"},
        "data": {"name": "café"},
        "data_format": "json",
    }


@pytest.mark.parametrize(
    "raw",
    [
        FS_JSON_DICT[:17],  # cut inside the fixed part
        FS_JSON_DICT[:8] + b"\x00\x02" + FS_JSON_DICT[10:],  # version 2
        FS_JSON_DICT[:14] + b"\x00\x00\xff\xff" + FS_JSON_DICT[18:],  # data_start past the end
        FS_JSON_DICT[:10] + b"\x00\x00\x00\x02" + FS_JSON_DICT[14:],  # headers_start inside the prefix
        FS_JSON_DICT[:18] + b"\x00\x09" + FS_JSON_DICT[20:],  # 9 headers announced, 2 present
    ],
)
def test_malformed_faststream_envelopes_fall_back_to_hex(raw: bytes) -> None:
    decoded = decode_value(raw)
    assert decoded.format == "hex"
    assert decoded.value == raw.hex()
