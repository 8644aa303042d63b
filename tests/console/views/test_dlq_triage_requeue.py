"""DLQ triage's "requeue these": its job requeues exactly the matching dead letters, each once, from the
page and the API; a viewer and a read-only console start nothing, and a missing or bad filter is
refused.

The expected counts are computed here from a raw XRANGE of the DLQ with the test's own reading of each
convention's fields (``dlq_triage_data.expected``); the signature rule is
:func:`pipeline.signatures.normalize_error`, the spec the reports use, pinned by hand-written signature
strings (``dlq_triage_data.HAND``). What moved is read back from Redis with XRANGE before and after.
"""

from __future__ import annotations

import re
from html import unescape

import redis
from django.test import Client

from pipeline.signatures import normalize_error
from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from tests.console.helpers import api, dlq_url, post_json, seg
from tests.console.views.dlq_triage_data import DLQ, ERRORS, dead_letters, field_text, ids_where, page_rows


def test_requeue_these_requeues_exactly_the_matching_ones(operator_client: Client, r: redis.Redis) -> None:
    dead_letters(r)
    before = r.xrange(DLQ)
    signature = "ValueError: order <num> not found"
    matching = ids_where(before, lambda f: normalize_error(field_text(f.get(b"dlq_error"))) == signature)
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
