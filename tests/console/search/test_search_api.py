"""``GET .../streams/<key>/search/`` against a real Redis: the example expressions (:data:`EXAMPLES`),
plain text, refusals, budgets and continuation, a binary key, DLQ variables.

Expected matches are computed here by plain Python over ``XRANGE`` (redis-py), never by the search code:
each test spells out its filter on the decoded payloads.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import msgpack
import pytest
import redis
from django.test import Client

from streams_app.redis_ops import search as redis_search
from streams_app.search import compile_query, search_page
from tests.console.helpers import CONN, stream_api

KEY = "orders"


def _orders(r: redis.Redis, n: int = 60) -> list[tuple[str, dict[bytes, bytes]]]:
    """A stream of orders whose fields vary in every way the examples test."""
    for i in range(n):
        data: dict[str, Any] = {
            "customer": {"id": 40 + i % 5, "name": f"Cust {i}"},
            "items": list(range(i % 6)),
        }
        if i % 7 == 0:
            data["refund"] = {"amount": i}
        fields: dict[str, Any] = {
            "type": ["order.created", "order.paid", "order.shipped"][i % 3],
            "data": json.dumps(data),
        }
        if i % 4 == 0:
            fields["error"] = (
                ("upstream timeout" if i % 16 == 0 else "read Timeout") if i % 8 == 0 else "card declined"
            )
        if i % 10 == 3:
            fields["meta"] = msgpack.packb({"region": "eu-west", "tags": ["vip", i]})
        r.xadd(KEY, fields)
    return [(i.decode(), f) for i, f in r.xrange(KEY)]


def _search(client: Client, key: str = KEY, **params: Any) -> dict:
    response = client.get(stream_api(key, "search/"), {"limit": 1000, **params})
    assert response.status_code == 200, response.content[:500]
    return response.json()


def _ids(body: dict) -> list[str]:
    return [m["id"] for m in body["matches"]]


def _data(fields: dict[bytes, bytes]) -> dict:
    return json.loads(fields[b"data"])


EXAMPLES = {
    "data.customer.id == 42": lambda f: _data(f)["customer"]["id"] == 42,
    'type in ["order.created","order.paid"]': lambda f: f[b"type"] in (b"order.created", b"order.paid"),
    'error.contains("timeout")': lambda f: b"timeout" in f.get(b"error", b""),  # case-sensitive in CEL
    'error.contains("Timeout")': lambda f: b"Timeout" in f.get(b"error", b""),
    "size(data.items) > 3": lambda f: len(_data(f)["items"]) > 3,
    "has(data.refund)": lambda f: "refund" in _data(f),
    '!has(data.refund) && type == "order.paid"': lambda f: "refund" not in _data(f)
    and f[b"type"] == b"order.paid",
    'meta.region == "eu-west" && "vip" in meta.tags': lambda f: b"meta" in f
    and msgpack.unpackb(f[b"meta"])["region"] == "eu-west",
    'data.customer.name.startsWith("Cust 1")': lambda f: _data(f)["customer"]["name"].startswith("Cust 1"),
}


@pytest.mark.parametrize("expression", list(EXAMPLES))
def test_example_expressions_match_a_plain_python_filter(
    r: redis.Redis, viewer_client: Client, expression: str
) -> None:
    entries = _orders(r)
    expected = [entry_id for entry_id, fields in entries if EXAMPLES[expression](fields)]
    body = _search(viewer_client, q=expression)
    assert expected, "the data must give the expression something to find"
    assert _ids(body) == expected
    assert (body["scanned"], body["total"], body["complete"], body["next"]) == (
        len(entries),
        len(entries),
        True,
        None,
    )
    assert (body["from_id"], body["to_id"]) == (entries[0][0], entries[-1][0])
    # the matches are shown as the entries API shows them
    first = body["matches"][0]
    assert first["fields"]["type"] == dict(entries)[first["id"]][b"type"].decode()
    assert any(d["name"] == "data" and d["format"] == "json" for d in first["decoded"])


def test_id_and_time_variables(r: redis.Redis, viewer_client: Client) -> None:
    entries = _orders(r, 10)
    middle = entries[5][0]
    assert _ids(_search(viewer_client, q=f'id == "{middle}"')) == [middle]
    ms = int(middle.split("-")[0])
    moment = datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
    later = [i for i, _ in entries if int(i.split("-")[0]) >= ms]
    assert _ids(_search(viewer_client, q=f'time >= timestamp("{moment}")')) == later
    assert _ids(_search(viewer_client, q=f'fields["type"] == "order.paid" && id >= "{middle}"')) == [
        i
        for i, f in entries
        if f[b"type"] == b"order.paid" and i >= middle  # CEL compares strings as Python does
    ]


@pytest.mark.parametrize("text", ["timeout", "ORDER.PAID", "cust 1", "eu-west", "42", "can't find"])
def test_plain_text_is_any_field_contains_ignoring_case(
    r: redis.Redis, viewer_client: Client, text: str
) -> None:
    entries = _orders(r)

    def shown(value: bytes) -> str:  # msgpack values are searched as the JSON of their decoded value
        try:
            return value.decode()
        except UnicodeDecodeError:
            return json.dumps(msgpack.unpackb(value), ensure_ascii=False)

    needle = text.lower()
    expected = [
        i
        for i, f in entries
        if any(needle in n.decode().lower() or needle in shown(v).lower() for n, v in f.items())
    ]
    body = _search(viewer_client, q=text)
    assert _ids(body) == expected
    if text in ("timeout", "eu-west"):
        assert expected


def test_a_field_name_is_found_by_plain_text(r: redis.Redis, viewer_client: Client) -> None:
    entries = _orders(r, 12)
    assert _ids(_search(viewer_client, q="META")) == [i for i, f in entries if b"meta" in f]


@pytest.mark.parametrize(
    ("query", "words"),
    [
        ("data.customer.id == ", "not a valid expression"),
        ("has(data", "not a valid expression"),
        ('type == "a" &&', "not a valid expression"),
        ("x" * 2001, "at most 2000"),
        ("", "q:"),
    ],
)
def test_a_bad_query_is_a_400_that_says_why(
    r: redis.Redis, viewer_client: Client, query: str, words: str
) -> None:
    _orders(r, 3)
    response = viewer_client.get(stream_api(KEY, "search/"), {"q": query})
    assert response.status_code == 400, response.content[:300]
    assert words in response.json()["error"]["message"]


def test_bad_parameters_and_missing_stream(r: redis.Redis, viewer_client: Client) -> None:
    _orders(r, 3)
    for params in (
        {"q": "x", "direction": "up"},
        {"q": "x", "limit": "0"},
        {"q": "x", "from": "yesterday"},
        {"q": "x", "cursor": "abc"},
        {"q": "x", "from": "9-0", "to": "1-0"},
    ):
        assert viewer_client.get(stream_api(KEY, "search/"), params).status_code == 400, params
    assert viewer_client.get(stream_api("nope", "search/"), {"q": "x"}).status_code == 404


def test_evaluation_errors_mean_no_match_not_a_500(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd(KEY, {"data": "not json"})
    r.xadd(KEY, {"data": '{"customer": "a string"}'})
    r.xadd(KEY, {"data": '{"customer": {"id": "42"}}'})  # a string: CEL does not compare it with 42
    good = r.xadd(KEY, {"data": '{"customer": {"id": 42}}'}).decode()
    r.xadd(KEY, {"other": "x"})
    assert _ids(_search(viewer_client, q="data.customer.id == 42")) == [good]
    assert _ids(_search(viewer_client, q="data.customer.id + 1")) == []  # not a boolean: no match
    assert _ids(_search(viewer_client, q="nosuchfield == 1")) == []


def _walk(key: str, query: str, *, budget: int, direction: str = "asc", **kw: Any) -> list[Any]:
    compiled = compile_query(query)
    pages, cursor = [], None
    while True:
        page = search_page(
            CONN, key.encode(), compiled, direction=direction, cursor=cursor, budget_entries=budget, mask=None, **kw
        )
        pages.append(page)
        if page.complete:
            return pages
        assert page.next is not None
        cursor = page.next
        assert len(pages) < 1000


@pytest.mark.parametrize("direction", ["asc", "desc"])
def test_budget_honoured_and_continue_has_no_overlap_or_gap(r: redis.Redis, direction: str) -> None:
    entries = _orders(r, 57)
    ids = [i for i, _ in entries]
    if direction == "desc":
        ids.reverse()
        entries.reverse()
    pages = _walk(KEY, "has(data.refund)", budget=7, direction=direction)
    assert all(p.scanned <= 7 for p in pages)
    covered: list[str] = []
    for p in pages:
        if p.scanned:
            start = ids.index(p.first_id)
            covered += ids[start : start + p.scanned]
            assert ids[start + p.scanned - 1] == p.last_id
    assert covered == ids  # every entry scanned once, in order
    found = [m.id for p in pages for m in p.matches]
    assert found == [i for i, f in entries if "refund" in _data(f)]
    assert all(p.total == len(ids) for p in pages)


def test_limit_stops_early_and_the_cursor_resumes_after_the_last_tested(r: redis.Redis) -> None:
    entries = _orders(r, 40)
    expected = [i for i, f in entries if f[b"type"] == b"order.paid"]
    pages = _walk(KEY, 'type == "order.paid"', budget=1000, limit=3)
    assert [len(p.matches) for p in pages[:-1]] == [3] * (len(pages) - 1)
    assert [m.id for p in pages for m in p.matches] == expected
    assert pages[0].last_id == expected[2] and pages[0].next == expected[2]


def test_range_bounds(r: redis.Redis, viewer_client: Client) -> None:
    entries = _orders(r, 30)
    ids = [i for i, _ in entries]
    body = _search(viewer_client, q="order", **{"from": ids[5], "to": ids[20], "direction": "desc"})
    assert _ids(body) == list(reversed(ids[5:21]))
    assert (body["scanned"], body["from_id"], body["to_id"], body["complete"]) == (16, ids[20], ids[5], True)


def test_budget_reported_through_the_api(r: redis.Redis, viewer_client: Client, monkeypatch) -> None:
    entries = _orders(r, 30)
    monkeypatch.setattr(redis_search, "SEARCH_PAGE", 4)  # pages of 4: the step stops between pages
    body = _search(viewer_client, q="order", limit=10)
    assert _ids(body) == [i for i, _ in entries[:10]]
    assert (body["scanned"], body["complete"], body["next"]) == (10, False, entries[9][0])
    rest = _search(viewer_client, q="order", cursor=body["next"])
    assert _ids(rest) == [i for i, _ in entries[10:]] and rest["complete"]


def test_a_binary_key_and_binary_values(r: redis.Redis, viewer_client: Client) -> None:
    key = b"bin\xff\x00key"
    r.xadd(key, {b"payload": b"\x00\x01\xfe", b"type": b"x"})
    hit = r.xadd(key, {b"payload": b"\x00timeout\xfe", b"type": b"order.paid"}).decode()
    r.xadd(key, {b"na\xefme": b"caf\xc3\xa9 Timeout"})
    third = [i.decode() for i, _ in r.xrange(key)][2]
    assert _ids(_search(viewer_client, key=key, q='type == "order.paid"')) == [hit]
    # binary values (shown as hex) are not searched as text; a non-ASCII text value is
    assert _ids(_search(viewer_client, key=key, q="timeout")) == [third]
    assert _ids(_search(viewer_client, key=key, q="CAFÉ")) == [third]
    assert _ids(_search(viewer_client, key=key, q='payload == b"\\x00\\x01\\xfe"')) == [
        i.decode() for i, f in r.xrange(key) if f.get(b"payload") == b"\x00\x01\xfe"
    ]


def test_json_escapes_do_not_hide_a_match_from_the_prefilter(r: redis.Redis, viewer_client: Client) -> None:
    """A JSON string written with escapes holds the literal only once decoded: the bytes prefilter must
    let it through (it checks only values that are printable ASCII without a backslash)."""
    escaped = r.xadd(KEY, {"data": '{"kind": "caf\\u00e9", "t": "order\\u002epaid"}'}).decode()
    r.xadd(KEY, {"data": '{"kind": "tea", "t": "order.created"}'})
    assert _ids(_search(viewer_client, q='data.kind == "café"')) == [escaped]
    assert _ids(_search(viewer_client, q='data.t in ["order.paid"]')) == [escaped]


def test_dlq_variables_eventbus_and_seed_module(r: redis.Redis, viewer_client: Client) -> None:
    """Our DLQ (``dlq_*`` fields) and the seed ``streams`` module's (``_retries``), in one key as after an
    upgrade; a DLQ's entries get ``error``, ``retries``, ``origin``, ``failed_at`` and ``group``."""
    dlq = "{payments}:dlq"
    ours = r.xadd(
        dlq,
        {
            "type": "payment.failed",
            "data": '{"amount": 12}',
            "dlq_original_stream": "payments",
            "dlq_original_id": "1-0",
            "dlq_group": "billing",
            "dlq_error": "TimeoutError: upstream",
            "dlq_retries": "5",
            "dlq_failed_at": "1700000000000",
        },
    ).decode()
    seed = r.xadd(dlq, {"type": "payment.failed", "data": '{"amount": 99}', "_retries": "5"}).decode()
    other = r.xadd(
        dlq,
        {
            "type": "payment.failed",
            "data": '{"amount": 1}',
            "dlq_original_stream": "payments",
            "dlq_error": "ValueError: bad",
            "dlq_retries": "2",
            "dlq_group": "audit",
        },
    ).decode()
    raw = {i.decode(): f for i, f in r.xrange(dlq)}
    assert set(raw) == {ours, seed, other}

    assert _ids(_search(viewer_client, key=dlq, q='error.contains("Timeout")')) == [ours]
    assert _ids(_search(viewer_client, key=dlq, q="retries >= 5")) == [
        i for i, f in raw.items() if int(f.get(b"dlq_retries", f.get(b"_retries", b"0"))) >= 5
    ]
    assert _ids(_search(viewer_client, key=dlq, q='origin == "payments" && data.amount > 10')) == [ours, seed]
    assert _ids(_search(viewer_client, key=dlq, q='group == "audit"')) == [other]
    assert _ids(_search(viewer_client, key=dlq, q='failed_at == timestamp("2023-11-14T22:13:20Z")')) == [ours]
    assert _ids(_search(viewer_client, key=dlq, q="error == null")) == [seed]


def test_search_on_a_cluster_reads_each_key_on_its_node(on_cluster, rc, viewer_client: Client) -> None:
    """Keys on different primaries of the real 3-primary cluster: each page goes to the key's node."""
    keys = ["orders", "payments", "{users}:dlq"]
    assert len({rc.get_node_from_key(k).name for k in keys}) >= 2
    for key in keys:
        for i in range(30):
            rc.xadd(key, {"type": "order.paid" if i % 4 == 0 else "other", "data": json.dumps({"n": i})})
    for key in keys:
        expected = [i.decode() for i, f in rc.xrange(key) if json.loads(f[b"data"])["n"] % 4 == 0]
        body = _search(viewer_client, key=key, q='type == "order.paid" && data.n >= 0')
        assert _ids(body) == expected and body["total"] == 30 and body["complete"]
