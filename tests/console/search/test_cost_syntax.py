"""The cost check reads every expression the CEL library compiles (docs/api.md#bounded-cost).

An expression the library compiles but :mod:`eventbus.search.syntax` cannot parse would be refused
("cannot be checked for cost"): a working search turned away. Hypothesis writes expressions from CEL's
whole grammar (literals of every spelling, comments, lists, maps, selections, indexes, calls, macros,
every operator, ternaries); whatever the library compiles must compile as a query too, unless it is
refused for its depth or its cost, never for its syntax. And the bound is sound where it can be
checked without a clock: a comprehension's estimate grows with the lists it runs over.
"""

from __future__ import annotations

import cel
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from eventbus.search import QueryError, compile_query
from eventbus.search.analysis import tokenize
from eventbus.search.cost import Estimate, Values
from eventbus.search.syntax import parse

_literals = st.sampled_from([
    "0", "42", "-7", "0x2A", "7u", "1.5", ".5", "1e3", "2.5e-3", '"a"', "'b'", '""', '"é😀"', r'"a\"b"',
    r"'\x41\u00e9\n'", 'r"raw\\d"', "b'bytes'", "B\"x\"", '"""tri"ple"""', "'''x'''", "true", "false", "null",
])  # fmt: skip
_names = st.sampled_from(["data", "x", "type", "id", "entry", "fields", "a", "b"])


def _expressions() -> st.SearchStrategy[str]:
    def extend(inner: st.SearchStrategy[str]) -> st.SearchStrategy[str]:
        var = st.sampled_from(["v", "w"])
        return st.one_of(
            st.builds(lambda a, n: f"{a}.{n}", inner, _names),
            st.builds(lambda a, i: f"{a}[{i}]", inner, inner),
            st.builds(
                lambda a, op, b: f"{a} {op} {b}",
                inner,
                st.sampled_from(
                    ["==", "!=", "<", "<=", ">", ">=", "in", "+", "-", "*", "/", "%", "&&", "||"]
                ),
                inner,
            ),  # fmt: skip
            st.builds(lambda op, a: f"{op}{a}", st.sampled_from(["!", "-", "!!", "--"]), inner),
            st.builds(lambda a, b, c: f"{a} ? {b} : {c}", inner, inner, inner),
            st.builds(lambda a: f"({a})", inner),
            st.builds(lambda items: "[" + ", ".join(items) + "]", st.lists(inner, max_size=3)),
            st.builds(lambda items: "[" + ", ".join(items) + ",]", st.lists(inner, min_size=1, max_size=2)),
            st.builds(
                lambda ks, vs: "{" + ", ".join(f"{k}: {v}" for k, v in zip(ks, vs, strict=False)) + "}",
                st.lists(inner, max_size=2),
                st.lists(inner, max_size=2),
            ),  # fmt: skip
            st.builds(
                lambda f, a: f"{f}({a})",
                st.sampled_from(
                    ["size", "has", "int", "string", "double", "dyn", "type", "timestamp", "bytes"]
                ),
                inner,
            ),  # fmt: skip
            st.builds(
                lambda a, m, b: f"{a}.{m}({b})",
                inner,
                st.sampled_from(["contains", "startsWith", "endsWith", "matches", "size"]),
                inner,
            ),  # fmt: skip
            st.builds(
                lambda a, m, v, b: f"{a}.{m}({v}, {b})",
                inner,
                st.sampled_from(["exists", "all", "exists_one", "map", "filter"]),
                var,
                inner,
            ),  # fmt: skip
            st.builds(lambda a, v, b, c: f"{a}.map({v}, {b}, {c})", inner, var, inner, inner),
            st.builds(lambda a: f"{a} // a comment && ignored\n", inner),
            st.builds(lambda n: f".{n}", _names),
            st.builds(lambda n, v: f"A.B{{{n}: {v}}}", _names, inner),
        )

    return st.recursive(st.one_of(_literals, _names), extend, max_leaves=8)


@settings(max_examples=1500, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(text=_expressions())
@pytest.mark.slow
def test_whatever_cel_compiles_the_cost_check_reads(text: str) -> None:
    try:
        cel.compile(text)
    except Exception:
        return  # not CEL: the library's parser says so, as before
    tokens = tokenize(text)
    assert tokens is not None, text
    parse(tokens)  # no Unsupported
    try:
        compile_query(text)
    except QueryError as exc:
        message = str(exc)
        assert "cannot be checked" not in message, (text, message)
        assert any(
            reason in message
            for reason in ("too costly", "nested too deep", "regular expression", "not a valid")
        ), (text, message)


def test_a_comprehension_costs_more_over_longer_lists() -> None:
    text = "data.items.exists(a, data.items.exists(b, a == b + 1))"
    estimate = Estimate(parse(tokenize(text) or []), ("data",))
    costs = [estimate.steps_for({"data": {"items": list(range(n))}}) for n in (0, 1, 10, 100)]
    assert costs == sorted(costs) and costs[3] > 100 * 100  # at least one step per pair
    assert Values([{"items": list(range(100))}]).field("items").size == 100
