"""DLQ triage, live: the DLQ page and its API open with counts over the whole DLQ by error
signature, by group and by origin stream, bounded ("looked at N of M"); each count links to the filtered list
and to "requeue these", whose job requeues exactly the matching dead letters, each once.

The expected counts are computed here from a raw XRANGE of the DLQ with the test's own reading of each
convention's fields (:func:`expected`); the signature rule is :func:`pipeline.signatures.normalize_error`, the
spec the reports use, pinned by hand-written signature strings (:data:`HAND`). What moved is read back from
Redis with XRANGE before and after.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime
from html import unescape
from urllib.parse import parse_qs, urlsplit

import pytest
import redis
from django.test import Client

from busconsole.env import parse_mask_rules
from pipeline.signatures import NO_ERROR, normalize_error
from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.lake.models import ErrorSignatureRollup
from streams_app.masking.apply import MASKED
from tests.console.helpers import api, dlq_url, post_json, seg

DLQ = "{orders}:dlq"
ERRORS = [
    ("ValueError: order 17 not found", "billing", "orders"),
    ("ValueError: order 23 not found", "billing", "orders"),
    ("ValueError: order 5 not found", "shipping", "orders"),
    ("TimeoutError: upstream 'pay-api' after 30.5s", "billing", "orders.v2"),
    ("TimeoutError: upstream 'ledger' after 2s", "shipping", "orders.v2"),
    ("KeyError: 'sku'", "billing", "orders"),
]
#: Signatures written by hand (not by normalize_error): the spec function is checked against them.
HAND = {
    "ValueError: order <num> not found": 3,
    "TimeoutError: upstream <str> after <num>s": 2,
    "KeyError: <str>": 1,
    NO_ERROR: 2,  # the seed module's dead letters record no error
}


def dead_letters(r: redis.Redis, key: str = DLQ) -> None:
    """Our bus's dead letters (``dlq_*`` fields) and two of the seed module's (the message and ``_retries``),
    in one ``{orders}:dlq``, as after an upgrade from the seed module to the bus."""
    for n, (error, group, origin) in enumerate(ERRORS):
        r.xadd(key, {"type": "order.created", "data": json.dumps({"order_id": n}), "dlq_original_stream": origin,
                     "dlq_original_id": f"1-{n}", "dlq_group": group, "dlq_retries": "3", "dlq_error": error})  # fmt: skip
    for n in range(2):
        r.xadd(key, {"type": "order.paid", "data": json.dumps({"order_id": 100 + n}), "_retries": "3"})


def _text(value: bytes | None) -> str | None:
    return value.decode() if value is not None else None


def expected(raw: list) -> dict[str, Counter]:
    """Counts by signature, group and origin from raw XRANGE entries, read here by each convention."""
    counts: dict[str, Counter] = {"signatures": Counter(), "groups": Counter(), "origins": Counter()}
    for _id, fields in raw:
        if b"dlq_original_stream" in fields:  # our bus
            error, group, origin = fields.get(b"dlq_error"), fields.get(b"dlq_group"), fields[b"dlq_original_stream"]
        else:  # the seed module: the key names the stream, nothing records the error or the group
            error, group, origin = None, None, b"orders"
        counts["signatures"][normalize_error(_text(error))] += 1
        counts["groups"][_text(group)] += 1
        counts["origins"][_text(origin)] += 1
    return counts


def ids_where(raw: list, test) -> list[str]:
    return [i.decode() for i, f in raw if test(f)]


def triage_api(client: Client, key: str = DLQ, **params) -> dict:
    response = client.get(api(f"/c/default/dlq/{seg(key)}/triage/"), params)
    assert response.status_code == 200, response.content
    return response.json()


def api_counts(reply: dict) -> dict[str, Counter]:
    return {part: Counter({b["value"]: b["count"] for b in reply[part]}) for part in ("signatures", "groups", "origins")}


ROW = re.compile(r'<tr data-triage="(\w+)" data-label="([^"]*)" data-count="(\d+)" data-list="([^"]*)" data-requeue="([^"]*)"')


def page_rows(body: str) -> list[tuple[str, str, int, str, str]]:
    """(part, label, count, list URL, requeue URL) of each count on the page."""
    return [(part, unescape(label), int(n), unescape(lst), unescape(rq)) for part, label, n, lst, rq in ROW.findall(body)]


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
            want = ids_where(raw, lambda f, s=label: normalize_error(_text(f.get(b"dlq_error"))) == s)
        elif part == "group":
            want = ids_where(raw, lambda f, g=label: _text(f.get(b"dlq_group")) == (None if g.startswith("(") else g))
        else:
            want = ids_where(raw, lambda f, o=label: _text(f.get(b"dlq_original_stream", b"orders")) == o)
        listed = viewer_client.get(list_url)
        assert listed.status_code == 200
        shown = re.findall(r'<tr id="dlq-([0-9]+-[0-9]+)"', listed.content.decode())
        assert sorted(shown) == sorted(want) and len(want) == count, (part, label)
        # the API's list takes the same filter
        query = {k: v[0] for k, v in parse_qs(urlsplit(list_url).query).items()}
        entries = viewer_client.get(api(f"/c/default/dlq/{seg(DLQ)}/"), query).json()["entries"]
        assert sorted(e["id"] for e in entries) == sorted(want), (part, label)


def test_requeue_these_requeues_exactly_the_matching_ones(operator_client: Client, r: redis.Redis) -> None:
    dead_letters(r)
    before = r.xrange(DLQ)
    signature = "ValueError: order <num> not found"
    matching = ids_where(before, lambda f: normalize_error(_text(f.get(b"dlq_error"))) == signature)
    assert len(matching) == 3
    body = operator_client.get(dlq_url(DLQ)).content.decode()
    [confirm] = [rq for part, label, _n, _l, rq in page_rows(body) if part == "signature" and label == signature]
    page = operator_client.get(confirm).content.decode()
    assert '<strong id="requeue-count">3</strong>' in page
    [up_to] = re.findall(r'name="up_to" value="([^"]+)"', page)
    assert up_to == before[-1][0].decode()
    form = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page))
    late = r.xadd(DLQ, {"dlq_original_stream": "orders", "dlq_error": "ValueError: order 99 not found"}).decode()

    response = operator_client.post(dlq_url(DLQ) + "triage/requeue/", {k: unescape(v) for k, v in form.items()})
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    jobs.job_run(job.pk)  # what the worker does
    job.refresh_from_db()
    assert (job.kind, job.state, job.done) == ("dlq.requeue_filtered", "done", 3)
    after = [i.decode() for i, _ in r.xrange(DLQ)]
    assert after == [i.decode() for i, _ in before if i.decode() not in matching] + [late]  # newer: untouched
    moved = [f[b"_requeued_from"].decode() for _, f in r.xrange("orders")]
    assert sorted(moved) == sorted(matching)  # each exactly once
    [event] = AuditEvent.objects.filter(action="dlq.requeue_filtered")
    assert event.parameters["filter"] == {"signature": signature}
    assert (event.parameters["up_to"], event.parameters["counted"]) == (up_to, 3)
    [end] = AuditEvent.objects.filter(action="dlq.requeue_filtered.finished")
    assert end.affected == 3
    job_page = operator_client.get(f"/jobs/{job.pk}/").content.decode()
    assert f'href="{dlq_url(DLQ)}"' in job_page and ">DLQ<" in job_page  # the job names its DLQ, linked

    # run again (a redelivered task): nothing moves twice
    Job.objects.filter(pk=job.pk).update(state="queued")
    jobs.job_run(job.pk)
    assert r.xlen("orders") == 3


def test_the_api_requeues_a_group_and_an_origin(operator, api_token, r: redis.Redis) -> None:
    dead_letters(r)
    token = api_token(operator)
    url = api(f"/c/default/dlq/{seg(DLQ)}/triage/requeue")
    raw = r.xrange(DLQ)
    shipping = ids_where(raw, lambda f: f.get(b"dlq_group") == b"shipping")
    dry = post_json(url, {"group": "shipping", "dry_run": True}, token)
    assert dry.status_code == 200 and dry.json()["count"] == len(shipping) == 2
    started = post_json(url, {"group": "shipping", "up_to": dry.json()["up_to"]}, token)
    assert started.status_code == 202, started.content
    jobs.job_run(started.json()["job"])
    left = r.xrange(DLQ)
    assert [i.decode() for i, _ in left] == [i.decode() for i, _ in raw if i.decode() not in shipping]
    # the seed module's dead letters: no group recorded, origin from the key
    seed = ids_where(left, lambda f: b"dlq_original_stream" not in f)
    dry = post_json(url, {"no_group": True, "origin": "orders", "dry_run": True}, token)
    assert dry.json()["count"] == len(seed) == 2
    jobs.job_run(post_json(url, {"no_group": True, "origin": "orders", "up_to": dry.json()["up_to"]}, token).json()["job"])
    assert [i.decode() for i, _ in r.xrange(DLQ)] == [i.decode() for i, _ in left if i.decode() not in seed]

    def shipped_to(stream: bytes) -> list[str]:
        return ids_where(raw, lambda f: f.get(b"dlq_group") == b"shipping" and f[b"dlq_original_stream"] == stream)

    assert sorted(f[b"_requeued_from"].decode() for _, f in r.xrange("orders")) == sorted(shipped_to(b"orders") + seed)
    assert sorted(f[b"_requeued_from"].decode() for _, f in r.xrange("orders.v2")) == shipped_to(b"orders.v2")


def test_viewer_and_read_only_start_nothing(viewer_client: Client, operator_client: Client, settings, r) -> None:
    dead_letters(r)
    newest = r.xrevrange(DLQ, count=1)[0][0].decode()
    page = viewer_client.get(dlq_url(DLQ) + "triage/requeue/confirm/", {"group": "billing"}).content.decode()
    assert '<strong id="requeue-count">4</strong>' in page and 'triage/requeue/"' not in page
    refused = viewer_client.post(dlq_url(DLQ) + "triage/requeue/", {"group": "billing", "up_to": newest})
    assert refused.status_code == 403
    settings.BUSCONSOLE_READ_ONLY = True
    operator_client.post(dlq_url(DLQ) + "triage/requeue/", {"group": "billing", "up_to": newest})
    assert not Job.objects.exists() and r.xlen(DLQ) == len(ERRORS) + 2 and not r.exists("orders")


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


def test_requeue_these_refuses_a_missing_or_bad_filter(operator, operator_client: Client, api_token, r) -> None:
    dead_letters(r)
    newest = r.xrevrange(DLQ, count=1)[0][0].decode()
    assert operator_client.get(dlq_url(DLQ) + "triage/requeue/confirm/").status_code == 400
    assert operator_client.get(dlq_url(DLQ) + "triage/requeue/confirm/", {"group": "x", "no_group": "on"}).status_code == 400
    token = api_token(operator)
    url = api(f"/c/default/dlq/{seg(DLQ)}/triage/requeue")
    assert post_json(url, {"up_to": newest}, token).status_code == 400
    assert post_json(url, {"group": "billing"}, token).status_code == 400  # no up_to, not a dry run
    assert post_json(url, {"group": 5, "up_to": newest}, token).status_code == 400
    assert post_json(url, {"signature": "x", "up_to": "nope"}, token).status_code == 400
    operator_client.post(dlq_url(DLQ) + "triage/requeue/", {"up_to": newest})
    assert not Job.objects.exists() and not r.exists("orders")


#: A rule of the origin stream that removes the dead letters' error (``remove``: the field is left out).
REMOVE_ERROR = [{"stream": "orders", "field": "dlq_error", "action": "remove"}]
HIDDEN = "canary-5b9c"


def removed_errors(r: redis.Redis) -> dict[str, list[str]]:
    """One ``{orders}:dlq``, interleaved: dead letters from ``orders`` whose error the rule removes, ones from
    ``orders`` recording no error (bus and seed module: the rule applies to them too), and ones from
    ``orders.v2`` whose errors the rule leaves alone. Returns the IDs of each kind."""
    kinds: dict[str, list[str]] = {"removed": [], "none": [], "shown": []}
    for n in range(3):
        kinds["removed"].append(r.xadd(DLQ, {
            "type": "order.paid", "data": json.dumps({"order_id": n}), "dlq_original_stream": "orders",
            "dlq_original_id": f"1-{n}", "dlq_group": "billing", "dlq_error": f"ValueError: card {HIDDEN}-{n} refused",
        }).decode())  # fmt: skip
        kinds["none"].append(r.xadd(DLQ, {"type": "order.paid", "data": json.dumps({"order_id": 10 + n}),
                                          "dlq_original_stream": "orders", "dlq_group": "billing"}).decode())
        if n < 2:
            kinds["shown"].append(r.xadd(DLQ, {
                "type": "order.paid", "data": "{}", "dlq_original_stream": "orders.v2", "dlq_group": "shipping",
                "dlq_error": f"TimeoutError: upstream 'pay-api' after {n + 1}s",
            }).decode())  # fmt: skip
            kinds["none"].append(r.xadd(DLQ, {"type": "order.paid", "data": "{}", "_retries": "3"}).decode())
    return kinds


def removed_expected(raw: list) -> dict[str, Counter]:
    """:func:`expected`, with the rule applied by hand: an error recorded by a dead letter from ``orders``
    shows as MASKED, what ``/reports/`` shows for an error a rule hides; no error recorded stays NO_ERROR."""
    counts = expected(raw)
    counts["signatures"] = Counter(
        MASKED if b"dlq_error" in f and f.get(b"dlq_original_stream") == b"orders" else normalize_error(_text(f.get(b"dlq_error")))
        for _id, f in raw
    )  # fmt: skip
    return counts


def test_an_error_a_rule_removed_is_counted_as_reports_show_it(viewer_client: Client, settings, r: redis.Redis) -> None:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(json.dumps(REMOVE_ERROR))
    kinds = removed_errors(r)
    raw = r.xrange(DLQ)
    want = removed_expected(raw)
    assert want["signatures"] == Counter({MASKED: 3, NO_ERROR: 5, "TimeoutError: upstream <str> after <num>s": 2})
    reply = triage_api(viewer_client)
    assert api_counts(reply) == {part: Counter(c) for part, c in want.items()}
    seen = [json.dumps(reply)]

    # /reports/ shows the rollup of these dead letters (made before the rule) under the same string
    ErrorSignatureRollup.objects.create(
        connection="default", stream=b"orders", stream_hash="a" * 64, stream_text="orders", dlq=DLQ.encode(),
        dlq_hash="b" * 64, dlq_text=DLQ, signature=normalize_error(f"ValueError: card {HIDDEN}-0 refused"),
        search="ValueError: card", count=3, first_seen=datetime(2026, 1, 5, tzinfo=UTC),
        last_seen=datetime(2026, 1, 5, tzinfo=UTC), example_error=f"ValueError: card {HIDDEN}-0 refused",
        example_entry_id=kinds["removed"][0], rank=1,
    )  # fmt: skip
    reports = viewer_client.get("/reports/").content.decode()
    seen.append(reports)
    [report_link] = [unescape(h) for h in re.findall(r'href="(/c/default/dlq/[^"]*signature=[^"]*)"', reports)]
    assert parse_qs(urlsplit(report_link).query)["signature"] == [MASKED]

    body = viewer_client.get(dlq_url(DLQ)).content.decode()
    seen.append(body)
    signatures = {label: (count, lst) for part, label, count, lst, _rq in page_rows(body) if part == "signature"}
    assert {label: count for label, (count, _) in signatures.items()} == dict(want["signatures"])
    for label, ids in ((MASKED, kinds["removed"]), (NO_ERROR, kinds["none"])):
        listed = viewer_client.get(signatures[label][1]).content.decode()
        seen.append(listed)
        assert sorted(re.findall(r'<tr id="dlq-([0-9]+-[0-9]+)"', listed)) == sorted(ids), label
        entries = viewer_client.get(api(f"/c/default/dlq/{seg(DLQ)}/"), {"signature": label}).json()["entries"]
        seen.append(json.dumps(entries))
        assert sorted(e["id"] for e in entries) == sorted(ids), label
    from_reports = viewer_client.get(report_link).content.decode()  # the link /reports/ gives, followed
    assert sorted(re.findall(r'<tr id="dlq-([0-9]+-[0-9]+)"', from_reports)) == sorted(kinds["removed"])
    seen.append(from_reports)
    for text in seen:
        assert HIDDEN not in unescape(text)


def test_requeue_these_moves_exactly_the_errors_a_rule_removed(
    operator, operator_client: Client, api_token, settings, r: redis.Redis
) -> None:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(json.dumps(REMOVE_ERROR))
    kinds = removed_errors(r)
    before = r.xrange(DLQ)
    url = api(f"/c/default/dlq/{seg(DLQ)}/triage/requeue")
    token = api_token(operator)
    dry = post_json(url, {"signature": MASKED, "dry_run": True}, token)
    assert dry.json()["count"] == 3 and post_json(url, {"signature": NO_ERROR, "dry_run": True}, token).json()["count"] == 5
    body = operator_client.get(dlq_url(DLQ)).content.decode()
    [confirm] = [rq for part, label, _n, _l, rq in page_rows(body) if part == "signature" and label == MASKED]
    page = operator_client.get(confirm).content.decode()
    assert '<strong id="requeue-count">3</strong>' in page and HIDDEN not in unescape(page)
    form = dict(re.findall(r'<input type="hidden" name="(\w+)" value="([^"]*)"', page))
    response = operator_client.post(dlq_url(DLQ) + "triage/requeue/", {k: unescape(v) for k, v in form.items()})
    assert response.status_code == 302
    job = Job.objects.get()
    jobs.job_run(job.pk)
    job.refresh_from_db()
    assert (job.state, job.done) == ("done", 3)
    after = [i.decode() for i, _ in r.xrange(DLQ)]
    assert after == [i.decode() for i, _ in before if i.decode() not in kinds["removed"]]
    assert sorted(f[b"_requeued_from"].decode() for _, f in r.xrange("orders")) == sorted(kinds["removed"])
    [event] = AuditEvent.objects.filter(action="dlq.requeue_filtered")
    assert event.parameters["filter"] == {"signature": MASKED}
    job_page = operator_client.get(f"/jobs/{job.pk}/").content.decode()
    assert HIDDEN not in unescape(job_page) and HIDDEN not in json.dumps(event.parameters)
