"""The speed-ups (the raw-bytes prefilter, cutting decoded values down to the paths an expression reads,
and evaluating the commonest expressions in plain Python) never change an answer.

Each entry below is evaluated twice: by ``Query.matches`` (prefilter, lazy decoding, pruning) and by
the same CEL program on an activation this test builds itself, whole, from values it decodes with
``json.loads`` / ``msgpack.unpackb`` (it knows how it encoded each field). The entries are built to
trip a careless prefilter: JSON escapes, non-ASCII text, control characters, msgpack, literals that
appear only in another field or only in a key; and to trip the plain-Python evaluator
(:mod:`eventbus.search.fast`): ints against doubles, missing keys, nulls, bools, unicode (``size`` of a
string), big ints, JSON escapes that decode to surrogates. The evaluator is also checked alone, against
the CEL library on the same values, over expressions and values that hypothesis generates.
"""

from __future__ import annotations

import json
from typing import Any

import cel
import msgpack
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventbus.decoding import decode_value, decoded_value
from eventbus.search.analysis import required_literals, root_paths, size_only_paths, tokenize
from eventbus.search.fast import ERROR, Unknown, compile_fast
from streams_app.redis_ops.types import Entry
from streams_app.search import compile_query

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
    # the plain-Python evaluator's edge cases
    {"type": "nulls", "data": {"customer": None, "items": None, "total": None, "note": None, "flag": None}},
    {"type": "bools", "data": {"customer": {"id": True}, "flag": False, "total": 1, "items": [True, 1]}},
    {"type": "floats", "data": {"customer": {"id": 42.5}, "total": 100.0, "items": [1.0, 2, 3.5, 4]}},
    {"type": "big", "data": {"customer": {"id": 2**63}, "total": 9007199254740993, "items": [2**70]}},
    {"type": "négatif", "data": {"customer": {"id": -42}, "total": -0.0, "note": "zoë 😀", "items": "abcd"}},
    {
        "type": "",
        "data": {"customer": {"id": "42", "tags": {"vip": 1}}, "items": {"a": 1, "b": 2, "c": 3, "d": 4}},
    },
    {"type": "nested", "data": {"customer": {"id": 42, "address": {"city": "Zürich"}}, "items": [[1], [2]]}},
    {"type": "escaped", "data": b'{"note": "\\ud83d\\ude00 caf\\u00e9", "customer": {"id": 42}}'},
    # digits a number needle does not show: these parse to 42.0 and 100.0
    {
        "type": "rounded",
        "data": b'{"customer": {"id": 41.99999999999999999}, "total": 100.00000000000000001}',
    },
    {"type": "order.paid", "data": b"[1, 2, 3]"},
    {"type": "order.paid", "data": b"42"},
    {"data": {"customer": {"id": 42}, "total": 250.0, "items": [1, 2, 3, 4, 5]}},
    {"type": "msgpack", "meta": {"region": "eu", "customer": {"id": 42.0, "vip": True}, "n": [1, None]}},
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
    # the plain-Python evaluator: every operator, on every edge case above
    "size(data.items) > 3 && data.total > 100.0",
    "data.total >= 100 || data.total < 0",
    "data.total == 100",
    "data.total != 100",
    "data.total == 9007199254740992.0",
    "data.total < 9007199254740993",
    "data.customer.id == 42.0",
    "data.customer.id != 42",
    "data.customer.id > 41.9 && data.customer.id <= 42",
    "data.customer.id == true",
    'data.customer.id == "42"',
    "data.customer.id == -42",
    "data.customer == null",
    "data.customer != null",
    "data.customer.id == null",
    "!has(data.customer)",
    "has(data.customer.id) || has(data.flag)",
    "has(data.customer.address.city)",
    "data.flag == false",
    "!data.flag",
    "(data.flag)",
    "data.flag || data.total > 0",
    "data.flag && data.total > 0",
    "size(data.note) == 10",
    "size(data.note) > 3",
    "data.note.size() >= 4",
    "size(type) == 7",
    "size(data.items) == 4",
    'data.note.contains("😀")',
    'data.note.startsWith("zo")',
    'data.note.endsWith("é")',
    'data.customer.address.city == "Zürich"',
    'type < "order.q" && type >= "order"',
    'type > "m"',
    "data.items.size() == 2 || data.items == null",
    "1 in data.items",
    "2.0 in data.items",
    "true in data.items",
    '"a" in data.items',
    '"vip" in data.customer.tags',
    "data.customer.id in [42, 7]",
    'data.customer.id in ["42", null, true]',
    "type in []",
    "data.missing == 1 || true",
    "data.missing == 1 && false",
    "data.missing == 1 || data.customer.id == 42",
    "!(data.missing == 1)",
    "nosuchfield == 1 || type == 'order.paid'",
    "type == type",
    "data.total > data.customer.id",
    "data.customer.id < 0 || data.customer.id > 100",
    "data == null || size(data) > 2",
    "meta.customer.vip && meta.customer.id == 42",
    "meta.n.size() == 2 && 1 in meta.n",
    "fields.type == 'order.paid' && has(fields.data)",
    "size(fields) >= 2",
    "data.note == 'order.paid' || data.note == 'zoë 😀'",
    "(data.total > 100.0 || data.total == null) && !(type == 'big')",
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
    assert literals("x == 9007199254740993") == set()  # 16 digits: 9007199254740992.0 equals it
    assert literals("x == 1e-320") == set()  # subnormal: few digits, many spellings
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


def test_a_string_cel_cannot_hold_is_an_error_only_where_it_is_read() -> None:
    """JSON's ``"\\ud800"`` decodes to a lone surrogate, which the CEL library refuses to convert: an
    expression reading it does not match, one reading only other values answers as if it were not there
    (values are cut to what the expression reads). Such an entry is CEL's to answer, never the
    plain-Python evaluator's, which would happily compare the string."""
    fields = _encode({"type": "x", "data": b'{"note": "\\ud800", "customer": {"id": 42}}'})
    entry = Entry(id="1700000000000-0", fields=fields)
    assert compile_query("data.customer.id == 42").matches(entry)
    assert not compile_query("size(data.note) > 0").matches(entry)
    assert not compile_query("data.note != 'x'").matches(entry)
    assert not compile_query("data.note != 'x' || data.customer.id == 42").matches(entry)
    assert compile_query("data.customer.id == 42 || has(data.other)").matches(entry)


def test_the_common_expressions_take_the_plain_python_path() -> None:
    """The evaluator must cover what people type, or the tests above check nothing of it."""
    covered = [text for text in EXPRESSIONS if compile_query(text).fast is not None]
    assert len(covered) >= len(EXPRESSIONS) - 12, sorted(set(EXPRESSIONS) - set(covered))
    for text in ("data.items.exists(i, i == 3)", 'type == "order.paid" ? true : false', 'data["x"] == 1',
                 "data.x + 1 == 2", "data.x == 1u", 'time > timestamp("2024-01-01T00:00:00Z")',
                 'type == "a\\u0041"', "1 < data.x < 3"):  # fmt: skip
        assert compile_query(text).fast is None, text


# ------------------------------------------------------------------------------------------ hypothesis

_KEYS = ["a", "b", "type", "int"]
_scalars = st.one_of(
    st.none(),
    st.booleans(),
    st.integers(min_value=-3, max_value=3),
    st.integers(min_value=-(2**64), max_value=2**64),
    st.sampled_from([0, 1, 42, -1, 2**53 + 1, 2**63 - 1, -(2**63), 2**63]),
    st.floats(allow_nan=False, allow_infinity=True),
    st.sampled_from([0.0, -0.0, 1.0, 42.0, 1.5, 2.0**53, 9007199254740992.0]),
    st.text(alphabet="aAbé😀 1", max_size=4),
)
_values = st.recursive(
    _scalars,
    lambda inner: st.lists(inner, max_size=4) | st.dictionaries(st.sampled_from(_KEYS), inner, max_size=4),
    max_leaves=12,
)
_maps = st.dictionaries(st.sampled_from(_KEYS), _values, max_size=4)
_envs = st.fixed_dictionaries(
    {"x": _maps, "y": _values}, optional={"type": _values, "int": _values}
)  # mostly paths that exist, sometimes not, sometimes a root named like a CEL type

_LITERALS = ["0", "1", "42", "-1", "-42", "0x2A", "9223372036854775807", "-9223372036854775808",
             "9007199254740993", "1.5", "0.0", "-2.5", "42.0", "1e3", "9007199254740992.0", '"a"', "'é'",
             '"😀"', '""', '"1"', "true", "false", "null", "[]", '[1, "a", null]', "[1.0, 42]"]  # fmt: skip
_paths = st.builds(
    lambda root, names: ".".join([root, *names]),
    st.sampled_from(["x", "x", "x", "y", "y", "type", "int", "nosuch"]),
    st.lists(st.sampled_from(_KEYS), max_size=2),
)
_operands = st.one_of(
    _paths,
    st.sampled_from(_LITERALS),
    _paths.map(lambda p: f"size({p})"),
    _paths.map(lambda p: f"{p}.size()"),
)
_relations = st.builds(
    lambda a, op, b: f"{a} {op} {b}",
    _operands,
    st.sampled_from(["==", "!=", "<", "<=", ">", ">=", "in"]),
    _operands,
)
_atoms = st.one_of(
    _relations,
    _paths.filter(lambda p: "." in p).map(lambda p: f"has({p})"),
    st.builds(
        lambda p, m, s: f"{p}.{m}({s})",
        _paths,
        st.sampled_from(["contains", "startsWith", "endsWith"]),
        st.sampled_from(['"a"', '""', "'é'"]),
    ),  # fmt: skip
    _operands,
)
_expressions = st.recursive(
    _atoms,
    lambda inner: st.one_of(
        inner.map(lambda e: f"!({e})"),
        st.builds(lambda a, b: f"({a}) && ({b})", inner, inner),
        st.builds(lambda a, b: f"({a}) || ({b})", inner, inner),
    ),
    max_leaves=4,
)


def _same(fast: object, expected: object) -> bool:
    """Equal as CEL values: the same type (a bool is not an int) and the same value."""
    if isinstance(expected, bool) or isinstance(fast, bool):
        return fast is expected
    return type(fast) is type(expected) and fast == expected


@settings(max_examples=1000, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_expressions, env=_envs)
@pytest.mark.slow
def test_the_plain_python_evaluator_answers_as_cel(text: str, env: dict[str, Any]) -> None:
    """On any values a decoder can produce: the same value, or an error where CEL has one, or a refusal
    (:class:`Unknown`) that hands the entry to CEL."""
    try:
        program = cel.compile(text)
    except Exception:
        return  # not CEL (a generated combination the grammar refuses)
    fast = compile_fast(tokenize(text))
    assert fast is not None, text
    try:
        expected: Any = program.execute(env)
    except Exception:
        expected = ERROR
    try:
        got = fast(env)
    except Unknown:
        return
    assert _same(got, expected), (text, env, got, expected)
