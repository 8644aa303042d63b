"""The old tail filter's ``path=value``, read as the CEL equality it looked like (the rule in
:mod:`streams_app.views.tail_filter`); the expected expressions are written out by hand."""

from __future__ import annotations

import pytest

from streams_app.search import compile_query
from streams_app.views.tail_filter import old_syntax_read

READ = [
    ("data.customer.id=4", "data.customer.id == 4"),
    (" data.customer.id = 4 ", "data.customer.id == 4"),
    ("type=order.paid", 'type == "order.paid"'),
    ("data.total=-3.25", "data.total == -3.25"),
    ("data.ratio=1.5e3", "data.ratio == 1.5e3"),
    ("flag=true", "flag == true"),
    ("data.refund=null", "data.refund == null"),
    ("n=007", 'n == "007"'),  # not a JSON number: the text
    ("n=99999999999999999999", 'n == "99999999999999999999"'),  # past int64: the text
    ('data.customer.name="Ada Lovelace"', 'data.customer.name == "Ada Lovelace"'),
    ("data.customer.name='Ada'", 'data.customer.name == "Ada"'),
    ('note=say "hi"', 'note == "say \\"hi\\""'),
    ("items.0.sku=x", 'items[0].sku == "x"'),
    ("items[1].sku=B2", 'items[1].sku == "B2"'),
    ("x-request-id=r-1", 'fields["x-request-id"] == "r-1"'),
    ("data.x-y.z=1", 'data["x-y"].z == 1'),
    ("data.in=3", 'data["in"] == 3'),
    ("data.refund=", "has(data.refund)"),
    ("type=", '"type" in fields'),
    ("customer=café", 'customer == "café"'),
]


@pytest.mark.parametrize(("old", "cel"), READ)
def test_old_filters_read_as_cel(old: str, cel: str) -> None:
    assert old_syntax_read(old) == cel
    assert not compile_query(cel).is_text  # search takes it as an expression


@pytest.mark.parametrize(
    "text",
    [
        "data.customer.id == 4",  # already an expression
        "a!=b",
        "a<=b",
        "a=b=c",
        "a=b && c==d",
        "type:order",  # plain text, for the old filter and for search
        "orders:dlq",
        "timeout",
        "payment failed",
        "=4",
        "items[0]=",  # has() takes a field selection only
    ],
)
def test_other_texts_are_search_language_as_they_stand(text: str) -> None:
    assert old_syntax_read(text) is None
