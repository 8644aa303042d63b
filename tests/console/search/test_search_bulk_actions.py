"""Search results feeding bulk actions: "replay the entries matching this" on the stream page, "ack the
pending entries matching this" on the group page, and the API of "requeue the dead letters matching this".

Every expected set is computed here in plain Python from XRANGE / XPENDING, and the end state is read
back from Redis."""

from __future__ import annotations

import json
import re
from html import unescape

import pytest
import redis
from django.test import Client

from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.masking.models import MaskRule
from streams_app.search import replay as search_replay
from streams_app.services.replay import stream_replay
from tests.console.helpers import api, bearer, group_url, seg, stream_url

QUERY = 'type == "order.paid"'
CARD = "4111111111111111"


def _orders(r: redis.Redis, n: int = 12) -> list[str]:
    for i in range(n):
        r.xadd("orders", {"type": "order.paid" if i % 3 else "order.created", "data": json.dumps({"n": i}),
                          "card": CARD if i == 4 else "none"})  # fmt: skip
    return [i.decode() for i, f in r.xrange("orders") if f[b"type"] == b"order.paid"]


def _copies(r: redis.Redis, target: str) -> list[str]:
    return [f[b"_replayed_from"].decode() for _, f in r.xrange(target)]


# ----------------------------------------------------------------------------------- replay matching


def test_operator_replays_exactly_the_matching_entries_once(operator_client: Client, r: redis.Redis) -> None:
    matching = _orders(r)
    page = operator_client.get(stream_url("orders"), {"q": QUERY}).content.decode()
    [first_step] = re.findall(r'class="search-more" hx-get="([^"]+)"', page)
    step = operator_client.get(unescape(first_step), HTTP_HX_REQUEST="true").content.decode()
    [confirm] = re.findall(r'href="([^"]+)" data-search-replay', step)
    body = operator_client.get(unescape(confirm)).content.decode()
    assert f'<strong id="replay-count">{len(matching)}</strong>' in body
    [start] = re.findall(r'name="start" value="([^"]+)"', body)
    [end] = re.findall(r'name="end" value="([^"]+)"', body)
    assert end == r.xrevrange("orders", count=1)[0][0].decode()

    response = operator_client.post(
        stream_url("orders") + "search/replay/",
        {"q": QUERY, "start": start, "end": end, "target": "orders:copy"},
    )
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    r.xadd("orders", {"type": "order.paid", "data": "late"})  # after the range: never copied
    jobs.job_run(job.pk)
    job.refresh_from_db()
    assert (job.kind, job.state, job.done) == ("replay", "done", len(matching))
    assert _copies(r, "orders:copy") == matching
    originals = dict(r.xrange("orders"))
    for _, fields in r.xrange("orders:copy"):
        source = fields.pop(b"_replayed_from")
        assert fields == originals[source]
    [event] = AuditEvent.objects.filter(action="replay")
    assert event.parameters["query"] == QUERY and event.outcome == "ok"

    Job.objects.filter(pk=job.pk).update(state="queued")  # a redelivered task: nothing is copied twice
    jobs.job_run(job.pk)
    assert _copies(r, "orders:copy") == matching


def test_a_job_killed_after_a_step_resumes_without_copying_twice(
    operator, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    matching = _orders(r, 30)
    monkeypatch.setattr(search_replay, "STEP_ENTRIES", 4)  # several steps
    real = search_replay.replay_entries
    calls = {"n": 0}

    def dies_after_the_third_step(*args, **kwargs):
        result = real(*args, **kwargs)  # the copies and the Redis-side cursor moved...
        calls["n"] += 1
        if calls["n"] == 3:
            raise RuntimeError("worker killed")  # ...but the job never saved its progress
        return result

    monkeypatch.setattr(search_replay, "replay_entries", dies_after_the_third_step)
    job = stream_replay(user=operator, conn="default", key=b"orders", start="-", end="+", target=b"copy",
                        query=QUERY)  # fmt: skip
    jobs.job_run(job.pk)
    job.refresh_from_db()
    assert job.state == "failed" and 0 < r.xlen("copy") < len(matching)
    jobs.job_resume(job_id=job.pk)
    jobs.job_run(job.pk)
    job.refresh_from_db()
    assert (job.state, job.done) == ("done", len(matching))
    assert _copies(r, "copy") == matching


def test_viewer_and_read_only_mode_replay_nothing(
    viewer_client: Client, operator_client: Client, settings, r: redis.Redis
) -> None:
    matching = _orders(r)
    body = viewer_client.get(stream_url("orders") + "search/replay/confirm/", {"q": QUERY}).content.decode()
    assert f'<strong id="replay-count">{len(matching)}</strong>' in body and 'search/replay/"' not in body
    form = {
        "q": QUERY,
        "start": "0-0",
        "end": r.xrevrange("orders", count=1)[0][0].decode(),
        "target": "copy",
    }
    assert viewer_client.post(stream_url("orders") + "search/replay/", form).status_code == 403
    bad = operator_client.post(stream_url("orders") + "search/replay/", {**form, "q": "type =="}, follow=True)
    assert "not a valid expression" in bad.content.decode()
    settings.BUSCONSOLE_READ_ONLY = True
    operator_client.post(stream_url("orders") + "search/replay/", form)
    assert not Job.objects.exists() and not r.exists("copy")


def test_a_masked_value_selects_nothing_to_replay(operator, operator_client: Client, r: redis.Redis) -> None:
    _orders(r)
    assert any(f[b"card"] == CARD.encode() for _, f in r.xrange("orders"))  # the value is there, unmasked
    MaskRule.objects.create(stream_glob="orders", field_path="card")
    body = operator_client.get(stream_url("orders") + "search/replay/confirm/", {"q": CARD}).content.decode()
    assert '<strong id="replay-count">0</strong>' in body
    length = r.xlen("orders")
    # into the stream itself: a copy elsewhere would escape the rule, which the masking policy refuses
    job = stream_replay(user=operator, conn="default", key=b"orders", start="-", end="+", query=CARD)
    jobs.job_run(job.pk)
    job.refresh_from_db()
    assert (job.state, job.done) == ("done", 0) and r.xlen("orders") == length


# ------------------------------------------------------------------------------------- ack matching


def _pending(r: redis.Redis) -> list[str]:
    return [row["message_id"].decode() for row in r.xpending_range("orders", "billing", "-", "+", 1000)]


def _group(r: redis.Redis) -> list[str]:
    """A group holding every entry pending, one matching entry deleted; the pending IDs that match."""
    _orders(r)
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker", {"orders": ">"}, count=100)
    paid = [i.decode() for i, f in r.xrange("orders") if f[b"type"] == b"order.paid"]
    r.xdel("orders", paid[0])  # still pending, its payload gone: it never matches
    r.xack("orders", "billing", paid[1])  # matches, but not pending
    live = {i.decode() for i, f in r.xrange("orders") if f[b"type"] == b"order.paid"}
    return [i for i in _pending(r) if i in live]


def test_operator_acks_exactly_the_matching_pending_entries(operator_client: Client, r: redis.Redis) -> None:
    matching = _group(r)
    before = _pending(r)
    page = operator_client.get(group_url("orders", "billing")).content.decode()
    assert 'action="' + group_url("orders", "billing") + 'search/ack/confirm/"' in page
    body = operator_client.get(
        group_url("orders", "billing") + "search/ack/confirm/", {"q": QUERY}
    ).content.decode()
    assert f'<strong id="ack-count">{len(matching)}</strong>' in body
    [up_to] = re.findall(r'name="up_to" value="([^"]+)"', body)
    assert up_to == before[-1]

    response = operator_client.post(
        group_url("orders", "billing") + "search/ack/", {"q": QUERY, "up_to": up_to}
    )
    assert response.status_code == 302
    assert _pending(r) == [i for i in before if i not in matching]
    [event] = AuditEvent.objects.filter(action="ack")
    assert (event.parameters["query"], event.affected, event.outcome) == (QUERY, len(matching), "ok")


def test_viewer_read_only_and_masking_ack_nothing(
    viewer_client: Client, operator_client: Client, settings, r: redis.Redis
) -> None:
    matching = _group(r)
    before = _pending(r)
    url = group_url("orders", "billing") + "search/ack/"
    body = viewer_client.get(url + "confirm/", {"q": QUERY}).content.decode()
    assert f'<strong id="ack-count">{len(matching)}</strong>' in body and 'search/ack/"' not in body
    assert viewer_client.post(url, {"q": QUERY, "up_to": before[-1]}).status_code == 403
    MaskRule.objects.create(stream_glob="orders", field_path="card")
    operator_client.post(url, {"q": CARD, "up_to": before[-1]})  # the card is pending, but masked
    assert _pending(r) == before
    settings.BUSCONSOLE_READ_ONLY = True
    operator_client.post(url, {"q": QUERY, "up_to": before[-1]})
    assert _pending(r) == before
    assert AuditEvent.objects.filter(action="ack", outcome="denied").count() == 2


# ------------------------------------------------------------------------------- API: requeue matching

DLQ = "{orders}:dlq"


def _dead_letters(r: redis.Redis) -> list[str]:
    for i in range(6):
        r.xadd(DLQ, {"type": "order.created", "dlq_original_stream": "orders", "dlq_original_id": f"1-{i}",
                     "dlq_group": "billing", "dlq_error": "TimeoutError" if i % 2 else "ValueError"})  # fmt: skip
    return [i.decode() for i, f in r.xrange(DLQ) if b"Timeout" in f[b"dlq_error"]]


def test_api_counts_then_requeues_the_matching_dead_letters(
    operator, viewer, api_token, r: redis.Redis
) -> None:
    matching = _dead_letters(r)
    url = api(f"/c/default/dlq/{seg(DLQ)}/search/requeue")
    web = Client()

    def post(body: dict, token: str):
        return web.post(url, json.dumps(body), content_type="application/json", **bearer(token))

    token, viewer_token = api_token(operator), api_token(viewer)
    q = 'error.contains("Timeout")'
    counted = post({"q": q, "dry_run": True}, token)
    assert counted.status_code == 200
    newest = r.xrevrange(DLQ, count=1)[0][0].decode()
    assert counted.json() | {"scanned": 0} == {"count": len(matching), "up_to": newest, "scanned": 0,
                                              "depth": 6, "complete": True, "too_costly": 0}  # fmt: skip
    assert post({"q": "error ==", "dry_run": True}, token).status_code == 400
    assert post({"q": q}, token).status_code == 400  # no up_to
    assert post({"q": q, "up_to": newest}, viewer_token).status_code == 403
    started = post({"q": q, "up_to": newest}, token)
    assert started.status_code == 202
    jobs.job_run(started.json()["job"])
    assert sorted(f[b"_requeued_from"].decode() for _, f in r.xrange("orders")) == sorted(matching)


# ----------------------------------------------------------------------------------- on a cluster

REPLAYS = {"same slot": ("{clicks}", "{clicks}:copy"), "across slots": ("clicks", "clicks-copy")}


@pytest.mark.parametrize("source,target", REPLAYS.values(), ids=REPLAYS.keys())
def test_replay_matching_on_a_cluster(
    on_cluster, rc, operator, source: str, target: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert (rc.keyslot(source) == rc.keyslot(target)) == source.startswith("{")
    monkeypatch.setattr(search_replay, "STEP_ENTRIES", 40)  # several steps, each moving the cursor
    pipe = rc.pipeline()
    for i in range(200):
        pipe.xadd(source, {"type": "order.paid" if i % 3 == 1 else "order.created", "n": str(i)})
    pipe.execute()
    want = [i.decode() for i, f in rc.xrange(source) if f[b"type"] == b"order.paid"]
    job = stream_replay(user=operator, conn=on_cluster, key=source.encode(), start="-", end="+",
                        target=target.encode(), query=QUERY)  # fmt: skip
    jobs.job_run(job.pk)
    Job.objects.filter(pk=job.pk).update(state="queued")
    jobs.job_run(job.pk)  # again: nothing twice
    job.refresh_from_db()
    assert (job.state, job.done) == ("done", len(want)), job.error
    assert [f[b"_replayed_from"].decode() for _, f in rc.xrange(target)] == want


def test_ack_matching_on_a_cluster(on_cluster, rc, operator_client: Client) -> None:
    for i in range(30):
        rc.xadd("orders", {"type": "order.paid" if i % 3 else "order.created", "n": str(i)})
    rc.xgroup_create("orders", "billing", id="0")
    rc.xreadgroup("billing", "worker", {"orders": ">"}, count=100)
    before = [row["message_id"].decode() for row in rc.xpending_range("orders", "billing", "-", "+", 100)]
    want = {i.decode() for i, f in rc.xrange("orders") if f[b"type"] == b"order.paid"}
    url = group_url("orders", "billing") + "search/ack/"
    body = operator_client.get(url + "confirm/", {"q": QUERY}).content.decode()
    assert f'<strong id="ack-count">{len(want)}</strong>' in body
    operator_client.post(url, {"q": QUERY, "up_to": before[-1]})
    after = [row["message_id"].decode() for row in rc.xpending_range("orders", "billing", "-", "+", 100)]
    assert after == [i for i in before if i not in want]
