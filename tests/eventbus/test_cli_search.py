"""``python -m eventbus inspect STREAM --search QUERY``: the console's search language on the command line.

Run in-process through ``main(argv)`` against a real Redis. Every expected answer is a plain-Python
filter over XRANGE (redis-py), decoding each field itself with ``json.loads`` / ``msgpack.unpackb``
(it knows how it wrote them); the DLQs are written as their producers write them.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import Any

import msgpack
import pytest
import redis

from eventbus.__main__ import main
from tests.console.redis_ops.helpers import EVENTBUS_FIELDS, OMNI_DATA, OMNI_KEY
from tests.eventbus.test_cli_screens import run

Fields = dict[bytes, bytes]


@pytest.fixture
def orders(r: redis.Redis) -> list[tuple[str, Fields]]:
    """Sixty orders: JSON payloads, a msgpack ``meta`` on some, a text ``error`` on others."""
    for i in range(60):
        data: dict[str, Any] = {
            "customer": {"id": 40 + i % 5, "name": f"Zoë {i}" if i % 9 == 0 else f"Cust {i}"},
            "items": list(range(i % 6)),
            "total": [12, 99.5, 250, 100.0][i % 4],
        }
        if i % 7 == 0:
            data["refund"] = {"amount": i}
        fields: dict[str, bytes | str] = {
            "type": ["order.created", "order.paid"][i % 2],
            "data": json.dumps(data, ensure_ascii=False),
        }
        if i % 4 == 0:
            fields["error"] = "upstream Timeout" if i % 8 == 0 else "card declined"
        if i % 10 == 3:
            fields["meta"] = msgpack.packb({"region": "eu-west" if i % 20 == 3 else "us", "tags": ["vip", i]})
        r.xadd("orders", fields)
    return [(i.decode(), f) for i, f in r.xrange("orders")]


def _ids(doc: dict[str, Any]) -> list[str]:
    return [entry["id"] for entry in doc["entries"]]


def _search(capsys: pytest.CaptureFixture[str], url: str, key: str, query: str, *more: str) -> list[str]:
    status, doc = run(capsys, url, "inspect", key, "--search", query, "--limit", "1000", *more)
    assert status == (0 if doc["entries"] else 1)
    assert doc["next"] is None  # every entry was read
    return _ids(doc)


EXPRESSIONS: list[tuple[str, Callable[[Fields], bool]]] = [
    ("data.customer.id == 42", lambda f: json.loads(f[b"data"])["customer"]["id"] == 42),
    (
        "size(data.items) > 3 && data.total > 100.0",
        lambda f: len(json.loads(f[b"data"])["items"]) > 3 and json.loads(f[b"data"])["total"] > 100.0,
    ),
    ("data.total == 100", lambda f: json.loads(f[b"data"])["total"] == 100),
    ('type == "order.paid" || has(data.refund)', lambda f: f[b"type"] == b"order.paid" or "refund" in json.loads(f[b"data"])),
    ('error.contains("Timeout")', lambda f: b"Timeout" in f.get(b"error", b"")),
    ('!(error == "card declined")', lambda f: b"error" in f and f[b"error"] != b"card declined"),
    ('meta.region == "eu-west"', lambda f: b"meta" in f and msgpack.unpackb(f[b"meta"])["region"] == "eu-west"),
    ("meta.tags.exists(t, t == 13)", lambda f: b"meta" in f and 13 in msgpack.unpackb(f[b"meta"])["tags"]),
    ('data.customer.name.startsWith("Zoë")', lambda f: json.loads(f[b"data"])["customer"]["name"].startswith("Zoë")),
    ("data.customer.id in [40, 44] && size(data.items) == 0", lambda f: json.loads(f[b"data"])["customer"]["id"] in (40, 44) and not json.loads(f[b"data"])["items"]),
]  # fmt: skip


@pytest.mark.parametrize(("query", "expected"), EXPRESSIONS, ids=[q for q, _ in EXPRESSIONS])
def test_expressions_on_json_and_msgpack_match_a_plain_python_filter(
    capsys, url: str, orders: list[tuple[str, Fields]], query: str, expected: Callable[[Fields], bool]
) -> None:
    want = [i for i, f in orders if expected(f)]
    assert want, "the data must give the expression something to find"
    assert _search(capsys, url, "orders", query) == want
    # newest first, in pages: the same entries
    status, doc = run(capsys, url, "inspect", "orders", "--search", query, "--reverse", "--limit", "1000")
    assert _ids(doc) == want[::-1]


def test_plain_text_is_any_field_contains_ignoring_case(
    capsys, url: str, orders: list[tuple[str, Fields]]
) -> None:
    def shown(name: bytes, value: bytes) -> str:  # msgpack is searched as the JSON of its decoded value
        text = json.dumps(msgpack.unpackb(value), ensure_ascii=False) if name == b"meta" else value.decode()
        return (name.decode() + " " + text).lower()

    for text in ("TIMEOUT", "eu-west", "zoë 9", "refund"):
        want = [i for i, f in orders if any(text.lower() in shown(k, v) for k, v in f.items())]
        assert want and _search(capsys, url, "orders", text) == want, text
    assert _search(capsys, url, "orders", "nowhere to be found") == []


def test_a_dlq_search_sees_the_dead_letter_variables(capsys, url: str, r: redis.Redis) -> None:
    """Ours (``dlq_*``), the seed module's (``_retries``), OmniDaemon's (one JSON ``data``) and a
    configured convention (``--dlq-patterns``), each parsed as the console parses it."""
    ours = r.xadd("{orders}:dlq", EVENTBUS_FIELDS).decode()
    seed = r.xadd(
        "{orders}:dlq", {"type": "order.created", "data": '{"amount": 99}', "_retries": "5"}
    ).decode()
    r.xadd("{orders}:dlq", {**EVENTBUS_FIELDS, b"dlq_error": b"TimeoutError: upstream", b"dlq_retries": b"1"})
    raw = {i.decode(): f for i, f in r.xrange("{orders}:dlq")}
    retries = {i: int(f.get(b"dlq_retries", f.get(b"_retries", b"0"))) for i, f in raw.items()}
    assert _search(capsys, url, "{orders}:dlq", "retries >= 5") == [i for i, n in retries.items() if n >= 5]
    assert _search(capsys, url, "{orders}:dlq", 'error.contains("card declined")') == [
        i for i, f in raw.items() if b"card declined" in f.get(b"dlq_error", b"")
    ]
    assert _search(
        capsys, url, "{orders}:dlq", 'traceback.startsWith("Traceback") && origin == "orders"'
    ) == [i for i, f in raw.items() if f.get(b"dlq_traceback", b"").startswith(b"Traceback")]
    assert _search(capsys, url, "{orders}:dlq", "error == null") == [seed]
    assert ours in _search(capsys, url, "{orders}:dlq", 'failed_at == timestamp("2023-11-14T22:13:20.100Z")')

    omni = r.xadd(OMNI_KEY, {"data": OMNI_DATA}).decode()
    doc = json.loads(OMNI_DATA)
    query = f'retries == {doc["retry_count"]} && error == "{doc["error"]}" && data.failed_message.correlation_id == "req-123"'
    assert _search(capsys, url, OMNI_KEY.decode(), query) == [omni]

    patterns = json.dumps([{"name": "jobs-dead", "match": "jobs:*:dead", "target": "strip_suffix::dead",
                            "error_field": "reason", "retries_field": "attempts"}])  # fmt: skip
    r.xadd("jobs:mail:dead", {"job": "send", "reason": "SMTP 550", "attempts": "4"})
    kept = r.xadd("jobs:mail:dead", {"job": "render", "reason": "KeyError", "attempts": "2"}).decode()
    found = _search(
        capsys, url, "jobs:mail:dead", 'error == "KeyError" && retries < 3', "--dlq-patterns", patterns
    )
    assert found == [kept]
    assert (
        _search(capsys, url, "jobs:mail:dead", 'error == "KeyError"') == []
    )  # not a DLQ without the pattern


def test_a_query_that_cannot_be_one_is_exit_2_with_the_parsers_message(
    capsys, url: str, r: redis.Redis
) -> None:
    r.xadd("orders", {"type": "x"})
    assert main(["inspect", "--url", url, "orders", "--search", "data.total >= && 3"]) == 2
    err = capsys.readouterr().err
    assert err.startswith("--search: This is not a valid expression:") and "1:" in err, err
    assert main(["inspect", "--url", url, "orders", "--search", "x" * 2001]) == 2
    assert "at most 2000" in capsys.readouterr().err


def test_a_search_reads_at_most_scan_limit_entries_and_says_where_to_go_on(
    capsys, url: str, orders: list[tuple[str, Fields]]
) -> None:
    want = [i for i, f in orders if f[b"type"] == b"order.paid"]
    status, doc = run(
        capsys, url, "inspect", "orders", "--search", 'type == "order.paid"', "--scan-limit", "25"
    )
    assert status == 0 and doc["scanned"] == 25 and _ids(doc) == want[: len(_ids(doc))]
    assert doc["next"] == "(" + orders[24][0]
    status, rest = run(capsys, url, "inspect", "orders", "--search", 'type == "order.paid"', "--from", doc["next"],
                       "--limit", "1000")  # fmt: skip
    assert _ids(doc) + _ids(rest) == want and rest["next"] is None


def test_the_console_searches_with_the_same_one_copy() -> None:
    import importlib.util

    import eventbus.search
    from streams_app import search

    # the console compiles with the bus's language (adding its DLQ conventions and its 400) and has no
    # module of its own passing the language's names on
    assert importlib.util.find_spec("streams_app.search.query") is None
    assert not hasattr(search, "Query") and not hasattr(search, "MAX_QUERY")
    assert isinstance(search.compile_query('type == "order.paid"'), eventbus.search.Query)
