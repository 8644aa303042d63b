"""The NDJSON records of an export (``streams_app.exports.formats``) against the standard library's own
reading of the same payloads."""

from __future__ import annotations

import json

import pytest

from eventbus.decoding import PREVIEW_LIMIT
from streams_app.exports.formats import NdjsonEncoder, ndjson_record
from streams_app.redis_ops.types import Entry

PAYLOADS = [
    b'{"order": 7, "items": [1, 2]}',
    b'  \n[1, "two", {"three": 3}]',  # leading whitespace
    b'{"x": NaN, "y": Infinity}',  # not JSON: the decoder keeps them as the strings they were
    b'{"unfinished": ',
    b'"a string"',  # JSON, but not an object or array: shown, not decoded
    b"123",
    b"{\xff\xfe}",  # not UTF-8
    b"[" + b"1," * (PREVIEW_LIMIT // 2) + b"1]",  # whole JSON past the preview limit
    b"plain text",
]


def expected_decoded(value: bytes) -> object:
    """What NDJSON's ``decoded`` holds for a value, by json.loads: whole objects and arrays only."""
    if len(value) > PREVIEW_LIMIT:
        return None
    try:
        text = value.decode("utf-8")
    except UnicodeDecodeError:
        return None
    if not text.lstrip(" \t\r\n").startswith(("{", "[")):
        return None
    try:
        return json.loads(text, parse_constant=str)
    except ValueError:
        return None


@pytest.mark.parametrize("value", PAYLOADS, ids=range(len(PAYLOADS)))
def test_only_whole_json_objects_and_arrays_are_decoded(value: bytes) -> None:
    entry = Entry(id="1767225600000-0", fields=((b"type", b"t"), (b"data", value)))
    line = NdjsonEncoder().page([entry])
    record = json.loads(line)
    assert record == json.loads(json.dumps(ndjson_record(entry)))
    want = expected_decoded(value)
    if want is None:
        assert "data" not in record.get("decoded", {})
    else:
        assert record["decoded"] == {"data": want}
    assert record["fields"]["type"] == "t"


def test_a_payload_nested_as_deep_as_the_decoder_goes_is_still_written() -> None:
    """Decoded, a value nested nearly as deep as the JSON decoder goes cannot be written inside its record
    (two levels deeper): the line then keeps the value in ``fields`` only, rather than failing the export."""

    def entry(depth: int) -> Entry:
        return Entry(id="1-0", fields=((b"data", b"[" * depth + b"]" * depth),))

    kept_out = 0
    for depth in range(1000, 900, -1):
        record = ndjson_record(entry(depth))
        line = NdjsonEncoder().page([entry(depth)])  # never raises
        assert line.endswith(b"\n") and line.count(b"\n") == 1
        if "decoded" in record and b'"decoded"' not in line:
            kept_out += 1
            assert json.loads(line)["fields"] == {"data": "[" * depth + "]" * depth}
    assert kept_out > 0  # some depths decode but do not fit in their record: the case this guards
