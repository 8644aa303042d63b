"""Dead-letter queues: detection of each built-in convention, requeue (one, twice, racing, all), delete, purge, pages.

One DLQ per convention is written as each library writes it; a requeued entry must then be found with XRANGE
on its original stream with the original fields plus ``_requeued_from``, and be gone from the DLQ. Requeue
all and purge stop at ``up_to`` whatever arrives later; the expected IDs and counts are the ones the test
wrote, in plain Python. The pages must escape payloads and offer buttons only to the roles that may press them.
"""

from __future__ import annotations

import json
import threading
from types import SimpleNamespace

import pytest
import redis
from django.db import connection
from django.test import Client

from streams_app import services
from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.redis_ops.actions import RequeueResult
from tests.console.helpers import CONN, api, bearer, dlq_url, post_json, stream_url
from tests.console.services.helpers import eventbus_dead_letter

OMNI_KEY = "omni-dlq:group:file.uploaded:file-processor"
OMNI_MESSAGE = {"content": {"filename": "doc.pdf", "note": "café"}, "correlation_id": "req-123"}


@pytest.fixture
def three_conventions(r: redis.Redis) -> SimpleNamespace:
    """One DLQ per built-in convention, as each library writes them."""
    eventbus_id = r.xadd("orders:dlq", eventbus_dead_letter(1, "1699999999000-0")).decode()
    seed_id = r.xadd("payments:dlq", {"type": "payment.failed", "data": '{"amount": 12}', "_retries": "5"}).decode()
    omni_doc = {
        "topic": "file.uploaded", "original_stream": "omni-stream:file.uploaded", "original_id": "1678901234567-0",
        "failed_message": OMNI_MESSAGE, "error": "Max retries (3) exceeded", "retry_count": 3,
        "failed_at": 1678901300.123,
    }
    omni_id = r.xadd(OMNI_KEY, {"data": json.dumps(omni_doc)}).decode()
    r.xadd("orders", {"type": "x"})  # an ordinary stream, not a DLQ
    return SimpleNamespace(r=r, eventbus_id=eventbus_id, seed_id=seed_id, omni_id=omni_id)


def _fields(r: redis.Redis, key: str, entry_id: str) -> dict[bytes, bytes]:
    ((_, fields),) = r.xrange(key, entry_id, entry_id)
    return fields


# ------------------------------------------------------------------------ conventions and requeue


def test_api_dlq_list_detects_each_convention(viewer, api_token, three_conventions) -> None:
    reply = Client().get("/api/v1/c/default/dlq/", **bearer(api_token(viewer))).json()
    by_key = {d["key"]: d for d in reply["dlqs"]}
    assert set(by_key) == {"orders:dlq", "payments:dlq", OMNI_KEY}
    assert by_key["orders:dlq"]["convention"] == "eventbus"
    assert by_key["payments:dlq"]["convention"] == "streams"
    assert by_key[OMNI_KEY]["convention"] == "omnidaemon"
    assert by_key["orders:dlq"]["source_streams"] == ["orders"]
    assert by_key["payments:dlq"]["source_streams"] == ["payments"]
    assert by_key[OMNI_KEY]["source_streams"] == ["omni-stream:file.uploaded"]
    assert all(d["depth"] == 1 for d in reply["dlqs"])
    assert by_key["payments:dlq"]["url"] == "/c/default/dlq/payments%3Adlq/"
    assert reply["complete"] is True


@pytest.mark.parametrize(
    ("dlq", "attr", "target", "expected"),
    [
        ("orders:dlq", "eventbus_id", "orders",
         {b"type": b"order.created", b"data": b'{"order_id": 101}', b"id": b"evt-1"}),
        ("payments:dlq", "seed_id", "payments", {b"type": b"payment.failed", b"data": b'{"amount": 12}'}),
        (OMNI_KEY, "omni_id", "omni-stream:file.uploaded", {b"data": json.dumps(OMNI_MESSAGE).encode()}),
    ],
)
def test_api_requeue_sends_each_convention_to_its_stream(operator, api_token, three_conventions, dlq, attr, target, expected) -> None:
    r = three_conventions.r
    dlq_id = getattr(three_conventions, attr)
    before = r.xlen(target) if r.exists(target) else 0
    reply = post_json(api(dlq_url(dlq) + "requeue"), {"ids": [dlq_id]}, api_token(operator))
    assert reply.status_code == 200
    body = reply.json()
    assert body["missing"] == [] and body["failed"] == []
    [moved] = body["requeued"]
    assert (moved["dlq_id"], moved["stream"]) == (dlq_id, target)
    assert r.xlen(target) == before + 1
    assert _fields(r, target, moved["new_id"]) == {**expected, b"_requeued_from": dlq_id.encode()}
    assert r.xlen(dlq) == 0
    event = AuditEvent.objects.get()
    assert (event.action, event.outcome, event.affected, event.target_ids) == ("dlq.requeue", "ok", 1, [dlq_id])
    assert event.parameters["targets"] == [target]


def test_requeue_of_the_same_entry_twice_reports_it_missing(operator, api_token, three_conventions) -> None:
    token = api_token(operator)
    url = api(dlq_url("orders:dlq") + "requeue")
    body = {"ids": [three_conventions.eventbus_id]}
    first = post_json(url, body, token).json()
    second = post_json(url, body, token).json()
    assert len(first["requeued"]) == 1
    assert second == {"requeued": [], "missing": [three_conventions.eventbus_id], "failed": []}
    assert [f.get(b"_requeued_from") for _, f in three_conventions.r.xrange("orders")].count(
        three_conventions.eventbus_id.encode()
    ) == 1


@pytest.mark.django_db(transaction=True)
def test_two_operators_requeueing_one_entry_at_once_make_one_entry(r: redis.Redis, operator, admin_user) -> None:
    entries = [r.xadd("orders:dlq", eventbus_dead_letter(i, f"1-{i}")).decode() for i in range(50)]
    barrier = threading.Barrier(2)
    results: dict[str, RequeueResult] = {}

    def press(user) -> None:
        try:
            barrier.wait()
            results[user.username] = services.dlq_requeue(user=user, conn=CONN, key=b"orders:dlq", ids=entries)
        finally:
            connection.close()

    threads = [threading.Thread(target=press, args=(u,)) for u in (operator, admin_user)]
    for t in threads:
        t.start()
    for t in threads:
        t.join(30)
    moved = [m.dlq_id for res in results.values() for m in res.requeued]
    missing = [m for res in results.values() for m in res.missing]
    assert sorted(moved) == sorted(entries)  # each entry moved by exactly one of the two
    assert sorted(missing) == sorted(entries)  # ... and reported missing to the other
    markers = [f[b"_requeued_from"].decode() for _, f in r.xrange("orders")]
    assert sorted(markers) == sorted(entries)
    assert r.xlen("orders:dlq") == 0
    assert sorted(AuditEvent.objects.values_list("affected", flat=True)) == sorted(len(res.requeued) for res in results.values())


# ------------------------------------------------------------------------------------------ pages


def test_dlq_page_lists_entries_with_error_retries_origin_and_payload(viewer_client, three_conventions) -> None:
    r = three_conventions.r
    r.xadd("orders:dlq", {**eventbus_dead_letter(2, "1699999999001-0"), "data": '{"note": "<script>alert(1)</script>"}'})
    page = viewer_client.get(dlq_url("orders:dlq"))
    assert page.status_code == 200
    body = page.content.decode()
    assert "ValueError: card 1 declined" in body
    assert '<td class="num" data-label="Retries">5</td>' in body  # labelled: a phone shows rows as cards
    assert 'href="/c/default/streams/orders/"' in body  # the original stream
    assert "1699999999000-0" in body  # the original ID
    assert "order_id" in body  # the decoded payload
    assert "dlq_error" not in body.split('<section id="entries"')[1]  # bookkeeping is not payload
    assert "<script>alert(1)</script>" not in body
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in body
    assert "Requeue selected" not in body  # a viewer gets no buttons (and a 403 if they try)


def test_dlq_page_filters_by_error_text_and_offers_requeue_up_to_the_newest_on_screen(operator_client, r) -> None:
    ids = [r.xadd("orders:dlq", eventbus_dead_letter(i, f"1-{i}")).decode() for i in range(5)]
    r.xadd("orders:dlq", {**eventbus_dead_letter(9, "1-9"), "dlq_error": "TimeoutError: slow"})
    filtered = operator_client.get(dlq_url("orders:dlq") + "?error=timeout").content.decode()
    assert "TimeoutError: slow" in filtered and "card 1 declined" not in filtered
    assert 'name="all"' not in filtered  # requeue-all ignores filters, so it is not offered with one
    page = operator_client.get(dlq_url("orders:dlq") + "?count=3").content.decode()
    newest = r.xrevrange("orders:dlq", count=1)[0][0].decode()
    assert f'name="up_to" value="{newest}"' in page
    assert page.count('data-action="requeue-one"') == 3
    older = operator_client.get(dlq_url("orders:dlq") + f"?count=3&before={ids[3]}").content.decode()
    assert f'name="up_to" value="{ids[2]}"' in older


def test_dlq_list_page_and_an_unknown_key(viewer_client, three_conventions) -> None:
    body = viewer_client.get("/c/default/dlq/").content.decode()
    for key in ("orders:dlq", "payments:dlq", OMNI_KEY):
        assert f'href="{dlq_url(key)}"' in body
    assert viewer_client.get(dlq_url("orders")).status_code == 400  # not a DLQ
    assert viewer_client.get(dlq_url("nothing:dlq")).status_code == 404


def test_stream_page_links_its_dlq_page(viewer_client, bus) -> None:
    body = viewer_client.get(stream_url("orders")).content.decode()
    assert f'href="{dlq_url("orders:dlq")}"' in body


# --------------------------------------------------------------------- requeue all, delete, purge


def test_requeue_all_never_touches_entries_newer_than_up_to(operator_client, operator, r) -> None:
    old = [r.xadd("orders:dlq", eventbus_dead_letter(i, f"1-{i}")).decode() for i in range(7)]
    response = operator_client.post(dlq_url("orders:dlq") + "requeue/", {"all": "1", "up_to": old[-1]})
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    late = r.xadd("orders:dlq", eventbus_dead_letter(99, "1-99")).decode()  # arrives after the page
    jobs.job_run(job.pk)  # what the worker does (the Celery path is tested in tests/console/jobs/)
    job.refresh_from_db()
    assert (job.state, job.done, job.total) == ("done", 7, 7)
    assert [e[0].decode() for e in r.xrange("orders:dlq")] == [late]
    assert sorted(f[b"_requeued_from"].decode() for _, f in r.xrange("orders")) == sorted(old)
    assert list(AuditEvent.objects.order_by("pk").values_list("action", "affected")) == [
        ("dlq.requeue_all", 0), ("dlq.requeue_all.finished", 7)
    ]


def test_api_requeue_all_returns_a_job(operator, api_token, r) -> None:
    ids = [r.xadd("orders:dlq", eventbus_dead_letter(i, f"1-{i}")).decode() for i in range(3)]
    token = api_token(operator)
    reply = post_json(api(dlq_url("orders:dlq") + "requeue"), {"all": True, "up_to": ids[1]}, token)
    assert reply.status_code == 202
    job_id = reply.json()["job"]
    job = Job.objects.get(pk=job_id)
    assert (job.kind, job.state, job.connection, job.created_by) == ("dlq.requeue_all", "queued", CONN, operator)
    assert job.parameters["up_to"] == ids[1] and bytes.fromhex(job.parameters["key"]) == b"orders:dlq"
    status = Client().get(f"/api/v1/jobs/{job_id}", **bearer(token)).json()
    assert {k: status[k] for k in ("id", "kind", "state", "done", "total", "error")} == {
        "id": job_id, "kind": "dlq.requeue_all", "state": "queued", "done": 0, "total": None, "error": None
    }
    bad = post_json(api(dlq_url("orders:dlq") + "requeue"), {"all": True}, token)
    assert bad.status_code == 400


def test_admin_deletes_and_purges_with_the_typed_name(admin_client_, r) -> None:
    ids = [r.xadd("orders:dlq", eventbus_dead_letter(i, f"1-{i}")).decode() for i in range(6)]
    admin_client_.post(dlq_url("orders:dlq") + "delete/", {"ids": ids[:2]})
    assert [e[0].decode() for e in r.xrange("orders:dlq")] == ids[2:]
    wrong = admin_client_.post(dlq_url("orders:dlq") + "purge/", {"up_to": ids[4], "confirm": "orders"}, follow=True)
    assert "To purge, type the DLQ&#x27;s name exactly" in wrong.content.decode()
    assert r.xlen("orders:dlq") == 4
    admin_client_.post(dlq_url("orders:dlq") + "purge/", {"up_to": ids[4], "confirm": "orders:dlq"})
    assert [e[0].decode() for e in r.xrange("orders:dlq")] == [ids[5]]
    assert list(AuditEvent.objects.order_by("pk").values_list("action", "outcome", "affected")) == [
        ("dlq.delete", "ok", 2), ("dlq.purge", "error", 0), ("dlq.purge", "ok", 3)
    ]
