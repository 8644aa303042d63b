"""Search results feeding a bulk action: "requeue the dead letters matching this" on the DLQ page.

The expected set is computed here from XRANGE (the entries whose ``dlq_error`` says Timeout), and the
end state is read back from Redis: the matching entries moved once each, the others stayed."""

from __future__ import annotations

import re
from html import unescape

import redis
from django.test import Client

from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from tests.console.helpers import dlq_url

DLQ = "{orders}:dlq"
QUERY = 'error.contains("Timeout")'


def _dead_letters(r: redis.Redis) -> list[str]:
    for i in range(9):
        r.xadd(DLQ, {"type": "order.created", "data": f'{{"order_id": {i}}}', "dlq_original_stream": "orders",
                     "dlq_original_id": f"1-{i}", "dlq_group": "billing", "dlq_retries": "3",
                     "dlq_error": "TimeoutError: upstream" if i % 3 == 0 else "ValueError: bad"})  # fmt: skip
    return [i.decode() for i, f in r.xrange(DLQ) if b"Timeout" in f[b"dlq_error"]]


def test_operator_requeues_exactly_the_matching_dead_letters(operator_client: Client, r: redis.Redis) -> None:
    matching = _dead_letters(r)
    others = [i.decode() for i, _ in r.xrange(DLQ) if i.decode() not in matching]

    # the search's status line offers the action; its confirm page counts what would move
    page = operator_client.get(dlq_url(DLQ), {"q": QUERY}).content.decode()
    [first_step] = re.findall(r'class="search-more" hx-get="([^"]+)"', page)
    step = operator_client.get(unescape(first_step), HTTP_HX_REQUEST="true").content.decode()
    [confirm] = re.findall(r'href="([^"]+)" data-search-requeue', step)
    body = operator_client.get(unescape(confirm)).content.decode()
    assert f'<strong id="requeue-count">{len(matching)}</strong>' in body
    newest = r.xrevrange(DLQ, count=1)[0][0].decode()
    assert f'name="up_to" value="{newest}"' in body

    response = operator_client.post(dlq_url(DLQ) + "search/requeue/", {"q": QUERY, "up_to": newest})
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    late = r.xadd(DLQ, {"dlq_original_stream": "orders", "dlq_error": "TimeoutError: late"}).decode()
    jobs.job_run(job.pk)  # what the worker does
    job.refresh_from_db()
    assert (job.kind, job.state, job.done) == ("dlq.requeue_matching", "done", len(matching))
    assert [i.decode() for i, _ in r.xrange(DLQ)] == [*others, late]  # newer than up_to: untouched
    assert sorted(f[b"_requeued_from"].decode() for _, f in r.xrange("orders")) == sorted(matching)
    [event] = AuditEvent.objects.filter(action="dlq.requeue_matching")
    assert event.parameters["query"] == QUERY and event.parameters["up_to"] == newest

    # run again (a redelivered task): nothing moves twice
    Job.objects.filter(pk=job.pk).update(state="queued")
    jobs.job_run(job.pk)
    assert r.xlen("orders") == len(matching)


def test_viewer_sees_the_count_but_may_not_requeue(viewer_client: Client, r: redis.Redis) -> None:
    matching = _dead_letters(r)
    body = viewer_client.get(dlq_url(DLQ) + "search/requeue/confirm/", {"q": QUERY}).content.decode()
    assert f'<strong id="requeue-count">{len(matching)}</strong>' in body and 'search/requeue/"' not in body
    newest = r.xrevrange(DLQ, count=1)[0][0].decode()
    response = viewer_client.post(dlq_url(DLQ) + "search/requeue/", {"q": QUERY, "up_to": newest})
    assert response.status_code == 403 and not Job.objects.exists() and r.xlen("orders") == 0


def test_read_only_mode_and_a_bad_expression_start_nothing(
    operator_client: Client, settings, r: redis.Redis
) -> None:
    _dead_letters(r)
    newest = r.xrevrange(DLQ, count=1)[0][0].decode()
    bad = operator_client.post(
        dlq_url(DLQ) + "search/requeue/", {"q": "error ==", "up_to": newest}, follow=True
    )
    assert "not a valid expression" in bad.content.decode() and not Job.objects.exists()
    settings.BUSCONSOLE_READ_ONLY = True
    operator_client.post(dlq_url(DLQ) + "search/requeue/", {"q": QUERY, "up_to": newest})
    assert not Job.objects.exists() and r.xlen(DLQ) == 9
