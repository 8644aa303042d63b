"""DLQ triage of dead letters whose error a masking rule removes: counted as the reports show them, and
"requeue these" moves exactly those.

The expected counts are computed here from a raw XRANGE of the DLQ with the test's own reading of each
convention's fields (``dlq_triage_data.expected``); the signature rule is
:func:`pipeline.signatures.normalize_error`, the spec the reports use, pinned by hand-written signature
strings (``dlq_triage_data.HAND``). What moved is read back from Redis with XRANGE before and after.
"""

from __future__ import annotations

import json
import re
from collections import Counter
from datetime import UTC, datetime
from html import unescape
from urllib.parse import parse_qs, urlsplit

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
from tests.console.views.dlq_triage_data import DLQ, api_counts, expected, field_text, page_rows, triage_api

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
        MASKED if b"dlq_error" in f and f.get(b"dlq_original_stream") == b"orders" else normalize_error(field_text(f.get(b"dlq_error")))
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
