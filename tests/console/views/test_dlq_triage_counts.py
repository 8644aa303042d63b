"""DLQ triage counts: the DLQ page and its API open with counts over the whole DLQ by error signature, by
group and by origin stream, bounded ("looked at N of M"), each linking to exactly its dead letters; the
other buses' DLQs are counted, a masked error under its masked form, and bad filters are 400s.

The expected counts are computed here from a raw XRANGE of the DLQ with the test's own reading of each
convention's fields (``dlq_triage_data.expected``); the signature rule is
:func:`pipeline.signatures.normalize_error`, the spec the reports use, pinned by hand-written signature
strings (``dlq_triage_data.HAND``). What moved is read back from Redis with XRANGE before and after.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
import redis
from django.test import Client

from busconsole.env import parse_mask_rules
from pipeline.signatures import NO_ERROR, normalize_error
from tests.console.helpers import api, dlq_url, seg
from tests.console.views.dlq_triage_data import (
    DLQ,
    HAND,
    api_counts,
    dead_letters,
    expected,
    field_text,
    ids_where,
    page_rows,
    triage_api,
)


def test_the_hand_written_signatures_are_the_spec(r: redis.Redis) -> None:
    dead_letters(r)
    assert dict(expected(r.xrange(DLQ))["signatures"]) == HAND


def test_counts_equal_a_plain_python_count_over_xrange(viewer_client: Client, r: redis.Redis) -> None:
    dead_letters(r)
    raw = r.xrange(DLQ)
    want = expected(raw)
    reply = triage_api(viewer_client)
    assert api_counts(reply) == {part: Counter(c) for part, c in want.items()}
    assert (reply["looked"], reply["depth"], reply["complete"], reply["next"]) == (len(raw), len(raw), True, None)
    assert reply["newest"] == raw[-1][0].decode()

    body = viewer_client.get(dlq_url(DLQ)).content.decode()
    rows = page_rows(body)
    got = {part: Counter() for part in ("signature", "group", "origin")}
    for part, label, count, _list, _requeue in rows:
        got[part][label] = count
    assert got["signature"] == Counter(HAND)
    assert got["group"] == Counter({("(no group recorded)" if k is None else k): v for k, v in want["groups"].items()})
    assert got["origin"] == Counter(want["origins"])
    assert f"looked at all {len(raw)}" in body


def test_a_bounded_count_says_of_m_and_continues(viewer_client: Client, settings, r: redis.Redis) -> None:
    settings.BUSCONSOLE_DLQ_TRIAGE_LIMIT = 5
    dead_letters(r)
    dead_letters(r)  # 16 dead letters
    newest5 = list(reversed(r.xrevrange(DLQ, count=5)))
    reply = triage_api(viewer_client)
    assert (reply["looked"], reply["depth"], reply["complete"]) == (5, 16, False)
    assert reply["next"] == newest5[0][0].decode()
    assert api_counts(reply) == {part: Counter(c) for part, c in expected(newest5).items()}

    body = viewer_client.get(dlq_url(DLQ)).content.decode()
    assert "looked at the newest 5 of 16" in body
    [more] = re.findall(r'<a href="([^"]+)" data-triage-more', body)
    nxt = list(reversed(r.xrevrange(DLQ, max=f"({reply['next']}", count=5)))
    counts = Counter()
    for part, label, count, *_ in page_rows(viewer_client.get(unescape(more)).content.decode()):
        if part == "signature":
            counts[label] = count
    assert counts == expected(nxt)["signatures"]
    assert triage_api(viewer_client, before=reply["next"])["looked"] == 5


def test_each_count_links_to_exactly_its_dead_letters(viewer_client: Client, r: redis.Redis) -> None:
    dead_letters(r)
    raw = r.xrange(DLQ)
    body = viewer_client.get(dlq_url(DLQ)).content.decode()
    rows = page_rows(body)
    assert len(rows) == len(HAND) + 3 + 2  # signatures, groups (billing, shipping, none), origins
    for part, label, count, list_url, _requeue in rows:
        if part == "signature":
            want = ids_where(raw, lambda f, s=label: normalize_error(field_text(f.get(b"dlq_error"))) == s)
        elif part == "group":
            want = ids_where(raw, lambda f, g=label: field_text(f.get(b"dlq_group")) == (None if g.startswith("(") else g))
        else:
            want = ids_where(raw, lambda f, o=label: field_text(f.get(b"dlq_original_stream", b"orders")) == o)
        listed = viewer_client.get(list_url)
        assert listed.status_code == 200
        shown = re.findall(r'<tr id="dlq-([0-9]+-[0-9]+)"', listed.content.decode())
        assert sorted(shown) == sorted(want) and len(want) == count, (part, label)
        # the API's list takes the same filter
        query = {k: v[0] for k, v in parse_qs(urlsplit(list_url).query).items()}
        entries = viewer_client.get(api(f"/c/default/dlq/{seg(DLQ)}/"), query).json()["entries"]
        assert sorted(e["id"] for e in entries) == sorted(want), (part, label)


OMNI = "omni-dlq:group:orders:billing"


def test_omnidaemon_and_seed_module_dlqs_are_counted(viewer_client: Client, r: redis.Redis) -> None:
    for n, error in enumerate(["RuntimeError: tool 7 crashed", "RuntimeError: tool 12 crashed", None]):
        doc = {"topic": "orders", "original_stream": "omni-stream:orders", "original_id": f"5-{n}",
               "failed_message": {"content": {"n": n}}, "retry_count": 3, "failed_at": 1700000000.5}  # fmt: skip
        if error:
            doc["error"] = error
        r.xadd(OMNI, {"data": json.dumps(doc)})
    reply = triage_api(viewer_client, OMNI)
    assert api_counts(reply) == {
        "signatures": Counter({"RuntimeError: tool <num> crashed": 2, NO_ERROR: 1}),
        "groups": Counter({"group:orders:billing": 3}),
        "origins": Counter({"omni-stream:orders": 3}),
    }
    for n in range(3):
        r.xadd("payments:dlq", {"data": json.dumps({"n": n}), "_retries": "5"})
    reply = triage_api(viewer_client, "payments:dlq")
    assert api_counts(reply) == {
        "signatures": Counter({NO_ERROR: 3}), "groups": Counter({None: 3}), "origins": Counter({"payments": 3})
    }
    body = viewer_client.get(dlq_url(OMNI)).content.decode()
    assert ("signature", "RuntimeError: tool <num> crashed", 2) in [row[:3] for row in page_rows(body)]


SECRET = "canary-7d1e"


def test_a_masked_error_is_counted_under_its_masked_form(viewer_client: Client, settings, r: redis.Redis) -> None:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(json.dumps([
        {"stream": "{orders}:dlq", "field": "dlq_error", "action": "mask"},
        {"stream": "{orders}:dlq", "field": "dlq_group", "action": "mask"},
    ]))  # fmt: skip
    r.xadd(DLQ, {"dlq_original_stream": "orders", "dlq_group": f"team-{SECRET}",
                 "dlq_error": f"ValueError: card {SECRET} refused"})  # fmt: skip
    r.xadd(DLQ, {"dlq_original_stream": "orders", "dlq_group": f"team-{SECRET}", "dlq_error": f"ValueError: {SECRET}"})
    reply = triage_api(viewer_client)
    assert SECRET not in json.dumps(reply)
    assert api_counts(reply)["signatures"] == Counter({"••••": 2})
    assert api_counts(reply)["groups"] == Counter({"••••": 2})
    body = viewer_client.get(dlq_url(DLQ)).content.decode()
    assert SECRET not in body
    [(_, _, count, list_url, _)] = [row for row in page_rows(body) if row[0] == "signature"]
    assert count == 2 and len(re.findall(r'<tr id="dlq-', viewer_client.get(list_url).content.decode())) == 2
    # the masked text cannot be found by its secret either
    assert triage_api(viewer_client)["looked"] == 2
    assert viewer_client.get(api(f"/c/default/dlq/{seg(DLQ)}/"), {"signature": "ValueError: card <str> refused"}).json()["entries"] == []


@pytest.mark.parametrize(
    "query",
    [
        {"group": "billing", "no_group": "1"},
        {"origin": "orders", "no_origin": "1"},
        {"signature": "x" * 301},
        {"group": "a\x00b"},
        {"triage_before": "not-an-id"},
    ],
)
def test_bad_filters_are_400_on_the_page(viewer_client: Client, r: redis.Redis, query: dict) -> None:
    dead_letters(r)
    assert viewer_client.get(dlq_url(DLQ), query).status_code == 400


@pytest.mark.parametrize(
    "path,query",
    [
        ("", {"group": "billing", "no_group": "true"}),
        ("", {"no_origin": "maybe"}),
        ("", {"origin": "a\x00b"}),
        ("triage/", {"before": "zzz"}),
        ("triage/", {"limit": "0"}),
    ],
)
def test_bad_filters_are_400_in_the_api(viewer_client: Client, r: redis.Redis, path: str, query: dict) -> None:
    dead_letters(r)
    assert viewer_client.get(api(f"/c/default/dlq/{seg(DLQ)}/{path}"), query).status_code == 400
