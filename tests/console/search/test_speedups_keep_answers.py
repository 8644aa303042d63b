"""The two speed-ups (the raw-bytes prefilter and cutting decoded values down to the paths an expression
reads) never change an answer.

Each entry below is evaluated twice: by ``Query.matches`` (prefilter, lazy decoding, pruning) and by
the same CEL program on an activation this test builds itself, whole, from values it decodes with
``json.loads`` / ``msgpack.unpackb`` (it knows how it encoded each field). The entries are built to
trip a careless prefilter: JSON escapes, non-ASCII text, control characters, msgpack, literals that
appear only in another field or only in a key.
"""

from __future__ import annotations

import json
from typing import Any

import msgpack
import pytest

from streams_app.redis_ops.decoding import decode_value, decoded_value
from streams_app.redis_ops.types import Entry
from streams_app.search import compile_query
from streams_app.search.analysis import required_literals, root_paths, size_only_paths, tokenize

PAYLOADS: list[dict[str, Any]] = [
    {"type": "order.paid", "data": {"customer": {"id": 42, "name": "Ann"}, "items": [1, 2, 3, 4]}},
    {
        "type": "order\\u002epaid",
        "data": {"customer": {"id": 42.0}, "refund": {"amount": 3}},
    },  # a backslash in text
    # JSON written with escapes: its strings hold the literals only once decoded
    {
        "type": "order.refunded",
        "data": b'{"note": "order\\u002epaid", "customer": {"name": "Zo\\u00eb", "id": 42}}',
    },
    {"type": "order.created", "data": {"customer": {"id": "42"}, "note": "order.paid"}},  # literal elsewhere
    {"type": "café", "data": {"customer": {"name": "Zoë"}, "items": []}},
    {"type": "x\x01y", "data": {"order.paid": True}},  # a control character; the literal only as a key
    {"type": "order.paid", "data": "not json at all", "error": "upstream timeout"},
    {
        "type": "order.shipped",
        "data": {"customer": {"id": 7}, "items": [{"sku": "a"}] * 5},
        "error": "Timeout!",
    },
    {"type": "msgpack", "meta": {"region": "eu-west", "customer": {"id": 42}}},
    {
        "type": "exponent",
        "data": b'{"customer": {"id": 4.2e1}, "items": [0.042e3, 420e-1]}',
    },  # 42, spelled oddly
    {"type": "digits", "data": b'{"customer": {"id": 420}, "n": "42"}'},
]

EXPRESSIONS = [
    "data.customer.id == 42",
    'type == "order.paid"',
    'type in ["order.paid", "café"]',
    '"order.paid" == type',
    'error.contains("timeout")',
    'type == "order.paid" && data.customer.id == 42',
    'type == "order.paid" || has(data.refund)',
    '!(type == "order.paid")',
    "size(data.items) > 3",
    "has(data.refund)",
    'has(data.customer) && data.customer.name.startsWith("Z")',
    'meta.region == "eu-west" && meta.customer.id == 42',
    'data["order.paid"] == true',
    'data.note.endsWith("paid")',
    'data.note == "order.paid"',
    'data.customer.name in ["Zoë"]',
    '(type == "order.paid")',
    'type == "order.paid" ? true : false',
    "data.items.exists(i, i == 3)",
    'fields["type"] == "order.paid"',
    "data.customer.id in [7, 4.2e1]",
    "42 == data.customer.id",
    "data.items.exists(i, i == 42)",
    "meta.customer.id == 42",
    "data.n == 42",
    "data.customer.id == 0x2A",
    "size(data.items) > 3 && data.customer.id == 42",
    "size(data.customer) == 2",
    "size(data.note) > 3 && size(meta.customer) == 1",
    "size(data.items) == size(data.customer)",
]


def _encode(payload: dict[str, Any]) -> tuple[tuple[bytes, bytes], ...]:
    fields = []
    for name, value in payload.items():
        if name == "meta":
            raw = msgpack.packb(value)
        elif isinstance(value, bytes):
            raw = value
        elif isinstance(value, dict):
            raw = json.dumps(value, ensure_ascii=False).encode()
        else:
            raw = value.encode()
        fields.append((name.encode(), raw))
    return tuple(fields)


def _whole_activation(fields: tuple[tuple[bytes, bytes], ...]) -> dict[str, Any]:
    out: dict[str, Any] = {}
    for name, raw in fields:
        if name == b"meta":
            value: Any = msgpack.unpackb(raw)
        elif raw.startswith(b"{"):
            value = json.loads(raw)
        elif b"\x01" in raw:
            value = raw  # binary: shown as hex, bytes to CEL
        else:
            value = raw.decode()
        out[name.decode()] = value
    out["fields"] = dict(out)
    return out


@pytest.mark.parametrize("expression", EXPRESSIONS)
def test_matches_equals_a_whole_evaluation(expression: str) -> None:
    query = compile_query(expression)
    assert not query.is_text
    for n, payload in enumerate(PAYLOADS):
        fields = _encode(payload)
        entry = Entry(id=f"1700000000000-{n}", fields=fields)
        try:
            expected = query.program.execute(_whole_activation(fields)) is True
        except Exception:
            expected = False
        assert query.matches(entry) == expected, (expression, payload)


def test_the_analysis_gives_up_where_it_must() -> None:
    def literals(text: str) -> set[frozenset[str]]:
        return set(required_literals(tokenize(text), frozenset({"id"})))

    assert literals('type == "a" && x.y in ["b", "c"] && z.contains("d")') == {
        frozenset({"a"}),
        frozenset({"b", "c"}),
        frozenset({"d"}),
    }
    assert literals('type == "a" || x == "b"') == set()
    assert literals('type == "a" ? true : false') == set()
    assert literals('!(type == "a")') == set()
    assert literals('type != "a"') == set()
    assert literals('id == "1-0"') == set()  # not from a field's bytes
    assert literals('type == "a\\u0041"') == set()  # an escape: its value is not its text
    assert literals("type == r'raw'") == set()
    assert literals('type == "a" + "b"') == set()
    [[digits]] = [list(group) for group in required_literals(tokenize("x.y == 4.20e1"), frozenset())]
    assert [
        bool(digits.search(b)) for b in (b"42", b"4.2e1", b"0.042E3", b"420e-1", b"4", b"24", b"4-2")
    ] == [True, True, True, True, False, False, False]
    assert literals("x == 0") == set()  # zero has no significant digit
    assert root_paths(tokenize("has(data.a.b) && size(data.c) > 1 && data.d.e.startsWith('x')")) == {
        "data": frozenset({("a", "b"), ("c",), ("d", "e")})
    }
    assert root_paths(tokenize('data["a"] == 1 && data.b == 2'))["data"] is None
    assert root_paths(tokenize("size(data) > 1"))["data"] is None
    assert root_paths(tokenize("data.?a.orValue(1) == 1"))["data"] is None
    assert root_paths(tokenize('error.contains("x")'))["error"] is None
    assert size_only_paths(tokenize("size(data.a) > 1 && size(data.b) > 1 && data.b.c == 1")) == {
        "data": frozenset({("a",)})
    }


@pytest.mark.parametrize(
    "raw",
    [
        b'{"a": 1, "b": [1, 2.5, "x"]}',
        b"[1, 2]",
        b'{"a": NaN}',
        b"{not json",
        b"[\xff]",
        b'{"deep": ' * 3000 + b"1" + b"}" * 3000,
        msgpack.packb({"k": [1, b"\x00\xff"]}),
        b"plain text",
        b"\x00\x01",
        b"{" + b" " * (64 * 1024),
    ],
)
def test_search_decodes_as_the_pages_do(raw: bytes) -> None:
    """``decoded_value`` (the search's decode, without the display text) answers as ``decode_value``."""
    shown = decode_value(raw)
    assert decoded_value(raw) == (shown.format, shown.value)
