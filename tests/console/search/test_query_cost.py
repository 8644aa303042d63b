"""Every expression is bounded before it runs, time budgets hold per entry, regexes run on
RE2 compiled once per query, and deep nesting is a 400, not a ``RecursionError``.

Expected answers come from plain Python over the data the tests write (``re`` for the patterns, where
RE2 and Python's ``re`` agree), the refusals from what the issue names.
"""

from __future__ import annotations

import json
import re

import pytest
import redis
from django.test import Client

from eventbus.__main__ import main
from eventbus.search import QueryError, compile_query
from eventbus.search import regex as search_regex
from eventbus.search.cost import MAX_STEPS
from eventbus.search.syntax import MAX_DEPTH
from streams_app.redis_ops import search as redis_search
from streams_app.redis_ops.types import Entry
from streams_app.search import search_page
from streams_app.services import pending_search
from tests.console.helpers import CONN, stream_api

L60 = "[" + ",".join(str(i % 10) for i in range(60)) + "]"  # 60 items, as the issue's L
ISSUE = f"{L60}.exists(v0,{L60}.exists(v1,{L60}.exists(v2,{L60}.exists(v3,false))))"
DEEP = {
    "bangs": "!" * 1990 + "true",
    "dotted": ".".join(["a"] * 990) + " == 1",
    "minus": "-" * 1990 + "1 == 1",
    "index": "a" + "[0]" * 600 + " == 1",
}


def _refusal(client: Client, q: str, key: str = "orders") -> str:
    response = client.get(stream_api(key, "search/"), {"q": q})
    assert response.status_code == 400, (q[:60], response.status_code, response.content[:300])
    return response.json()["error"]["message"]


def test_the_issue_expression_is_refused_before_it_runs(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd("orders", {"type": "order.paid"})
    with pytest.raises(QueryError, match="too costly"):
        compile_query(ISSUE)
    message = _refusal(viewer_client, ISSUE)
    assert "too costly" in message and ".exists() over 60 items" in message and f"{MAX_STEPS:,}" in message


def test_a_smaller_nesting_is_refused_too_and_a_cheap_one_runs(r: redis.Redis, viewer_client: Client) -> None:
    """30^4 iterations (the issue's 150 ms of held GIL) is over the bound; 5^3 is far under it."""
    r.xadd("orders", {"type": "order.paid"})
    l30 = "[" + ",".join(str(i) for i in range(30)) + "]"
    assert "too costly" in _refusal(
        viewer_client, f"{l30}.exists(a,{l30}.exists(b,{l30}.exists(c,{l30}.exists(d,false))))"
    )
    l5 = "[1,2,3,4,5]"
    body = viewer_client.get(
        stream_api("orders", "search/"), {"q": f"{l5}.exists(a,{l5}.exists(b,{l5}.exists(c,a+b+c == 15)))"}
    ).json()
    assert len(body["matches"]) == 1 and body["complete"]


@pytest.mark.parametrize("name", list(DEEP))
def test_deep_nesting_is_a_400_that_says_so(r: redis.Redis, viewer_client: Client, name: str) -> None:
    r.xadd("orders", {"a": '{"a": 1}'})
    message = _refusal(viewer_client, DEEP[name])
    assert "nested too deep" in message and str(MAX_DEPTH) in message


def test_long_flat_chains_are_not_deep(r: redis.Redis, viewer_client: Client) -> None:
    """``a && b && ...`` is one level however long: a long conjunction is fine."""
    r.xadd("orders", {"data": '{"n": 1}'})
    q = " || ".join(["data.n == 2"] * 120) + " || data.n == 1"
    body = viewer_client.get(stream_api("orders", "search/"), {"q": q}).json()
    assert len(body["matches"]) == 1


@pytest.mark.parametrize(
    "q",
    [
        "+".join(["a"] * 998) + "==1",
        "data.s in [" + ",".join(['"a"'] * 490) + "]",
        "[" + ",".join(["[a]"] * 490) + "][0][0] == 1",
        "{" + ",".join(f'"k{i}": a' for i in range(200)) + "}.k1 == 1",
    ],
    ids=["998 additions", "490-string literal", "490 nested lists", "200-key map"],
)
def test_long_literals_and_chains_are_measured_flat(r: redis.Redis, viewer_client: Client, q: str) -> None:
    """A literal of hundreds of items or a chain of hundreds of ``+`` is wide, not deep: measuring it
    must not recurse once per item (it did: a RecursionError, a 500). Each runs or is refused for its
    cost, saying so."""
    r.xadd("orders", {"a": "1", "data": '{"s": "a"}'})
    response = viewer_client.get(stream_api("orders", "search/"), {"q": q})
    assert response.status_code in (200, 400), response.content[:300]
    if response.status_code == 400:
        assert "too costly" in response.json()["error"]["message"]


def _entries(values: list[str]) -> list[Entry]:
    return [Entry(id=f"1700000000000-{i}", fields=((b"s", v.encode()),)) for i, v in enumerate(values)]


def test_matches_runs_on_re2_compiled_once_per_query(monkeypatch) -> None:
    texts = [
        "timeout after 30s",
        "TIMEOUT",
        "time out",
        "read timed out",
        "a" * 16 + "!",  # short: Python's re, the reference here, backtracks on (a+)+$
        "",
    ]
    compiled: list[str] = []
    real = search_regex.compile_pattern
    monkeypatch.setattr(search_regex, "compile_pattern", lambda p: compiled.append(p) or real(p))
    patterns = [r"time\s?out", r"^(a+)+$", r"(?i)^timeout$", r"t.*d o"]
    for pattern in patterns:
        query = compile_query(f"s.matches({json.dumps(pattern)}) || matches(s, {json.dumps(pattern)})")
        assert compiled == [pattern]  # once, when the query is compiled
        got = [query.matches(e) for e in _entries(texts)]
        assert got == [re.search(pattern, t) is not None for t in texts], pattern
        assert compiled == [pattern]  # and never again, however many entries
        compiled.clear()
    bomb = compile_query('s.matches("^(a+)+$")')  # linear on RE2, where a backtracking engine never ends
    assert not bomb.matches(_entries(["a" * 60_000 + "!"])[0])


@pytest.mark.parametrize(
    ("pattern", "reason"),
    [
        (r"(a)\\1", "invalid escape"),
        ("(?=a)", "invalid perl operator"),
        ("((a{100}){100}){100}", "repetition"),
    ],
)
def test_a_pattern_re2_refuses_is_a_400_naming_re2s_reason(
    r: redis.Redis, viewer_client: Client, pattern: str, reason: str
) -> None:
    r.xadd("orders", {"s": "aaa"})
    message = _refusal(viewer_client, f's.matches("{pattern}")')
    assert "regular expression" in message and reason in message


@pytest.mark.slow
def test_time_budget_holds_per_entry_not_per_page(r: redis.Redis) -> None:
    """Each entry here costs milliseconds (CEL converts 1,000 maps): a 1 ms budget stops the step
    within the first page of 500, at the last entry it tested, and the next step resumes after it."""
    data = json.dumps({"items": [{"n": i} for i in range(1000)]})
    for _ in range(510):
        r.xadd("orders", {"data": data})
    ids = [i.decode() for i, _ in r.xrange("orders")]
    query = compile_query("data.items.exists(i, i.n < 0)")
    page = search_page(CONN, b"orders", query, budget_ms=1, mask=None)
    assert page.scanned < redis_search.SEARCH_PAGE and not page.complete
    assert page.next == page.last_id == ids[page.scanned - 1]
    rest = search_page(CONN, b"orders", query, cursor=page.next, budget_ms=10**6, mask=None)
    assert page.scanned + rest.scanned == 510 and rest.complete


def test_an_entry_too_costly_for_its_data_is_counted_not_silently_dropped(
    r: redis.Redis, viewer_client: Client
) -> None:
    """The bound of a comprehension over an entry's own lists is taken on that entry's sizes: 200^3
    iterations are over it, 4^3 far under. The big entries are not handed to CEL, and the answer
    says how many were left out."""
    q = "data.items.exists(a, data.items.exists(b, data.items.exists(c, a + b + c == 6)))"
    sizes = [4, 200, 3, 200, 2]
    for n in sizes:
        r.xadd("orders", {"data": json.dumps({"items": list(range(n))})})
    ids = [i.decode() for i, _ in r.xrange("orders")]
    expected = [
        i
        for i, n in zip(ids, sizes, strict=True)
        if n < 100 and any(a + b + c == 6 for a in range(n) for b in range(n) for c in range(n))
    ]
    body = viewer_client.get(stream_api("orders", "search/"), {"q": q}).json()
    assert [m["id"] for m in body["matches"]] == expected
    assert body["too_costly"] == 2 and body["scanned"] == 5 and body["complete"]


def test_the_cli_search_gets_the_same_refusals(r: redis.Redis, url: str, capsys) -> None:
    r.xadd("orders", {"type": "order.paid"})
    for q, reason in ((ISSUE, "too costly"), (DEEP["bangs"], "nested too deep")):
        assert main(["inspect", "--url", url, "orders", "--search", q]) == 2
        assert reason in capsys.readouterr().err


def test_ack_matching_holds_its_time_budget_per_entry(r: redis.Redis, operator, monkeypatch) -> None:
    """The group page's "ack the pending entries matching this" had no time budget at all: it scanned
    up to 100,000 pending entries whatever each cost. With entries that cost milliseconds each and a
    1 ms budget, its count stops within the first page of 500 and says it is a lower bound; the action
    acks what it found in that stretch and leaves the rest pending."""
    data = json.dumps({"items": [{"n": i} for i in range(1000)], "hit": True})
    for _ in range(510):
        r.xadd("orders", {"data": data})
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker", {"orders": ">"}, count=1000)
    # raising=False: the code before this fix had no such budget, and its test must fail on the count
    monkeypatch.setattr(pending_search, "BUDGET_MS", 1, raising=False)
    q = "data.hit && !data.items.exists(i, i.n < 0)"
    preview = pending_search.pending_ack_matching_preview(
        user=operator, conn=CONN, key=b"orders", group=b"billing", query=q
    )
    assert 0 < preview.scanned < pending_search.PAGE and not preview.complete
    assert preview.matched == preview.scanned  # every entry examined matches
    done = pending_search.pending_ack_matching(
        user=operator, conn=CONN, key=b"orders", group=b"billing", query=q, up_to=preview.up_to
    )
    assert 0 < done.acked == done.scanned < 510 and not done.complete
    assert r.xpending("orders", "billing")["pending"] == 510 - done.acked
