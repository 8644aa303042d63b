"""Payload decoding (JSON, msgpack, text, hex): the format ladder, its false-positive guards, truncation.

Decoding never raises, whatever the bytes. Expected values are spelled out literally (pretty-printed
JSON, spaced hex, sizes counted by hand); msgpack inputs are built with msgpack's packer, which shares no
code with the decoder's checks. The fuzz test starts from real FastStream envelopes
(``faststream_samples.py``), whose decoding is covered in ``test_decoding_faststream.py``.
"""

from __future__ import annotations

import json
import random

import msgpack
import pytest

from eventbus.decoding import Decoded, DecodedField, decode_fields, decode_value
from eventbus.text import display_text
from tests.console.redis_ops.faststream_samples import FS_JSON_DICT, FS_NON_ASCII_HEADER, FS_TEXT

FORMATS = {"json", "msgpack", "faststream", "text", "hex"}


# --- JSON ---------------------------------------------------------------------------------------------------


def test_json_object_is_pretty_printed() -> None:
    raw = b'{"order_id":7,"tags":["a","\xc3\xa9"],"nested":{"ok":true,"n":null}}'
    decoded = decode_value(raw)
    assert decoded == Decoded(
        format="json",
        value={"order_id": 7, "tags": ["a", "é"], "nested": {"ok": True, "n": None}},
        pretty='{\n  "order_id": 7,\n  "tags": [\n    "a",\n    "é"\n  ],\n  "nested": {\n'
        '    "ok": true,\n    "n": null\n  }\n}',
        size=62,
        truncated=False,
    )


def test_json_array_with_surrounding_whitespace() -> None:
    decoded = decode_value(b"  [1, 2]\n")
    assert (decoded.format, decoded.value, decoded.pretty) == ("json", [1, 2], "[\n  1,\n  2\n]")


@pytest.mark.parametrize(
    "raw", [b"hello", b"42", b"-1.5", b"true", b"null", b'"quoted"', b"{not json", b"[1,"]
)
def test_scalars_and_broken_json_are_text(raw: bytes) -> None:
    decoded = decode_value(raw)
    assert (decoded.format, decoded.value, decoded.pretty) == ("text", raw.decode(), raw.decode())


def test_json_needs_utf8() -> None:
    # valid JSON shape, but a Latin-1 byte: not UTF-8, so not JSON and not text
    decoded = decode_value(b'{"a": "\xe9"}')
    assert decoded.format == "hex"
    assert decoded.value == "7b2261223a2022e9227d"


def test_utf16_json_is_not_sniffed_as_json() -> None:
    # json.loads(bytes) would detect UTF-16; a stream value that is UTF-16 is binary to us
    assert decode_value('{"a": 1}'.encode("utf-16")).format == "hex"


def test_json_nan_becomes_a_string_so_the_api_can_serialise_it() -> None:
    decoded = decode_value(b'{"a": NaN, "b": -Infinity}')
    assert decoded.value == {"a": "NaN", "b": "-Infinity"}
    json.dumps(decoded.value, allow_nan=False)


def test_deeply_nested_json_does_not_raise() -> None:
    raw = b"[" * 20000 + b"]" * 20000
    decoded = decode_value(raw)
    assert decoded.format in {"text", "hex"}
    assert decoded.size == 40000


# --- msgpack ------------------------------------------------------------------------------------------------


def test_msgpack_map() -> None:
    raw = msgpack.packb({"user": "zoë", "ids": [1, 2], "ok": False, "ratio": 0.5})
    decoded = decode_value(raw)
    assert decoded.format == "msgpack"
    assert decoded.value == {"user": "zoë", "ids": [1, 2], "ok": False, "ratio": 0.5}
    assert decoded.pretty == (
        '{\n  "user": "zoë",\n  "ids": [\n    1,\n    2\n  ],\n  "ok": false,\n  "ratio": 0.5\n}'
    )
    assert decoded.size == len(raw)


def test_msgpack_values_are_made_jsonable() -> None:
    raw = msgpack.packb(
        [
            b"\x00\xffab",  # bin: shown as display text
            msgpack.ExtType(5, b"\x01\x02"),
            msgpack.Timestamp(seconds=1700000000, nanoseconds=0),
            float("nan"),
            {1: "int key", (1, 2): "array key", b"\xfe": "bin key"},
        ],
        use_bin_type=True,
    )
    decoded = decode_value(raw)
    assert decoded.format == "msgpack"
    assert decoded.value == [
        "\\x00\\xffab",
        {"ext": 5, "hex": "0102"},
        "2023-11-14T22:13:20+00:00",
        "nan",
        {"1": "int key", "[1,2]": "array key", "\\xfe": "bin key"},
    ]
    json.dumps(decoded.value, allow_nan=False)


def test_msgpack_str_with_invalid_utf8_is_escaped() -> None:
    # fixmap(1) { fixstr(1) "\xff": 1 }
    assert decode_value(b"\x81\xa1\xff\x01").value == {"\\xff": 1}


def test_short_text_is_not_msgpack() -> None:
    # ASCII bytes are msgpack positive fixints: "ab" is two values, never one whole map or array
    assert decode_value(b"ab").format == "text"
    assert decode_value(b"a").format == "text"


@pytest.mark.parametrize(
    "raw",
    [
        b"\x92\x01",  # array of 2 with one element: incomplete
        b"\x91\x01\x02",  # a complete array, then trailing data
        msgpack.packb(7),  # a bare int (the byte 0x07) is no container
        msgpack.packb("just a string"),  # nor is a bare str
    ],
)
def test_msgpack_only_for_whole_maps_and_arrays(raw: bytes) -> None:
    assert decode_value(raw).format == "hex"


# --- text and hex -------------------------------------------------------------------------------------------


def test_unicode_text() -> None:
    raw = "naïve café ✓ 日本\ttab\r\nline".encode()
    decoded = decode_value(raw)
    assert decoded == Decoded(
        "text", "naïve café ✓ 日本\ttab\r\nline", "naïve café ✓ 日本\ttab\r\nline", 33, False
    )


def test_empty_value_is_empty_text() -> None:
    assert decode_value(b"") == Decoded("text", "", "", 0, False)


def test_control_characters_make_hex() -> None:
    assert decode_value(b"ab\x00c") == Decoded("hex", "61620063", "61 62 00 63", 4, False)


def test_hex_is_spaced_sixteen_bytes_a_line() -> None:
    raw = bytes(range(0x80, 0x80 + 18))
    decoded = decode_value(raw)
    assert decoded.pretty == "80 81 82 83 84 85 86 87 88 89 8a 8b 8c 8d 8e 8f\n90 91"
    assert decoded.value == "808182838485868788898a8b8c8d8e8f9091"


def test_html_stays_data() -> None:
    assert decode_value(b"<script>alert(1)</script>") == Decoded(
        "text", "<script>alert(1)</script>", "<script>alert(1)</script>", 25, False
    )
    assert decode_value(b'{"x": "<b>&amp;</b>"}').value == {"x": "<b>&amp;</b>"}


# --- truncation ---------------------------------------------------------------------------------------------


def test_long_text_is_truncated_to_the_limit() -> None:
    decoded = decode_value(b"abcdefghij", limit=4)
    assert decoded == Decoded("text", "abcd", "abcd", 10, True)


def test_long_json_is_not_parsed() -> None:
    decoded = decode_value(b'{"a": 1, "b": 2}', limit=8)
    assert decoded == Decoded("text", '{"a": 1,', '{"a": 1,', 16, True)


def test_cut_inside_a_multibyte_character_keeps_text() -> None:
    # "éé" is c3 a9 c3 a9; a 3-byte prefix ends inside the second "é"
    assert decode_value("éé".encode(), limit=3) == Decoded("text", "é", "é", 4, True)


def test_long_binary_is_truncated_hex() -> None:
    decoded = decode_value(b"\xff" * 100, limit=3)
    assert decoded == Decoded("hex", "ffffff", "ff ff ff", 100, True)


def test_value_at_the_limit_is_whole() -> None:
    decoded = decode_value(b'{"a": 1}', limit=8)
    assert (decoded.format, decoded.truncated) == ("json", False)


def test_default_limit_is_64_kib() -> None:
    raw = b'["' + b"x" * (64 * 1024) + b'"]'
    decoded = decode_value(raw)
    assert (decoded.format, decoded.truncated, decoded.size, len(decoded.value)) == (
        "text",
        True,
        65540,
        65536,
    )


def test_a_huge_value_is_not_parsed_whole() -> None:
    raw = b"[" + b"1," * (10 * 1024 * 1024) + b"1]"
    decoded = decode_value(raw)
    assert (decoded.format, decoded.truncated, decoded.size) == ("text", True, len(raw))
    assert len(decoded.value) == 64 * 1024


# --- helpers ------------------------------------------------------------------------------------------------


def test_display_text_escapes_invalid_utf8() -> None:
    assert display_text(b"caf\xc3\xa9 \xff\xfe:dlq") == "café \\xff\\xfe:dlq"
    assert display_text(b"") == ""


def test_decode_fields_keeps_order_and_repeated_names() -> None:
    fields = [(b"type", b"order.created"), (b"\xffname", b'{"a": 1}'), (b"type", b"\x00")]
    assert decode_fields(fields) == [
        DecodedField("type", b"type", 0, Decoded("text", "order.created", "order.created", 13, False)),
        DecodedField("\\xffname", b"\xffname", 1, Decoded("json", {"a": 1}, '{\n  "a": 1\n}', 8, False)),
        DecodedField("type", b"type", 2, Decoded("hex", "00", "00", 1, False)),
    ]


def test_decode_fields_accepts_redis_py_dicts_and_a_limit() -> None:
    decoded = decode_fields({b"data": b"abcdef", b"id": b"7"}, limit=2)
    assert [(f.name, f.decoded.value, f.decoded.truncated) for f in decoded] == [
        ("data", "ab", True),
        ("id", "7", False),
    ]


# --- robustness ---------------------------------------------------------------------------------------------


def _check(decoded: Decoded, raw: bytes, limit: int) -> None:
    assert decoded.format in FORMATS
    assert decoded.size == len(raw)
    assert decoded.truncated is (len(raw) > limit)
    assert isinstance(decoded.pretty, str)
    json.dumps(decoded.value, allow_nan=False)


def test_fuzz_never_raises() -> None:
    rng = random.Random(20240611)
    seeds = [
        FS_JSON_DICT,
        FS_TEXT,
        FS_NON_ASCII_HEADER,
        msgpack.packb({"a": [1, b"x", 2.5]}),
        b'{"a": [1, 2]}',
    ]
    for _ in range(4000):
        choice = rng.random()
        if choice < 0.4:
            raw = rng.randbytes(rng.randrange(0, 80))
        elif choice < 0.6:
            # a container lead byte then noise: the msgpack path
            raw = bytes([rng.choice([0x80, 0x8F, 0x90, 0x9F, 0xDC, 0xDE])]) + rng.randbytes(
                rng.randrange(0, 40)
            )
        else:
            # a real value with a few bytes flipped or cut: the FastStream and JSON paths
            raw = bytearray(rng.choice(seeds))
            for _ in range(rng.randrange(1, 4)):
                raw[rng.randrange(len(raw))] = rng.randrange(256)
            raw = bytes(raw[: rng.randrange(len(raw) + 1)])
        limit = rng.choice([0, 1, 7, 64, 64 * 1024])
        _check(decode_value(raw, limit=limit), raw, limit)


def test_odd_inputs_do_not_raise() -> None:
    assert decode_value("a str from a decode_responses client").format == "text"
    assert decode_value(bytearray(b'{"a": 1}')).value == {"a": 1}
    assert decode_value(memoryview(b"\xff")).value == "ff"
    assert decode_value(b"abc", limit=-5) == Decoded("text", "", "", 3, True)


def test_msgpack_timestamp_out_of_datetime_range() -> None:
    raw = msgpack.packb([msgpack.Timestamp(seconds=2**40, nanoseconds=5)])
    decoded = decode_value(raw)
    assert decoded.value == ["Timestamp(seconds=1099511627776, nanoseconds=5)"]
