"""The retries page and its actions, on retries the real event bus scheduled.

Expected values come from Redis itself (ZRANGE of the set, XRANGE of the stream and the DLQ, msgpack of
the members read with the msgpack library, SHA-1 with hashlib), never from the code under test.
"""

from __future__ import annotations

import hashlib
import json
import threading
import time

import msgpack
import pytest
import redis
from django.test import Client

from eventbus.scripts import Scripts
from streams_app.audit.models import AuditEvent
from tests.console.helpers import api, bearer, post_json, stream_api, stream_url
from tests.console.retries.conftest import DLQ, RETRY_SET, STREAM, failures, scheduled

PAGE = stream_url(STREAM, "retries/")


def ref(member: bytes, due: int) -> str:
    return f"{due}-{hashlib.sha1(member).hexdigest()}"


def fields_of(member: bytes) -> dict[bytes, bytes]:
    items = msgpack.unpackb(member, raw=True)
    return dict(zip(items[0::2], items[1::2], strict=True))


# --------------------------------------------------------------------------------------- reading


def test_page_lists_exactly_what_zrange_holds(viewer_client: Client, bus_retries) -> None:
    r = bus_retries.r
    expected = scheduled(r)
    page = viewer_client.get(PAGE)
    assert page.status_code == 200
    html = page.content.decode()
    refs_on_page = [chunk.split('"', 1)[0] for chunk in html.split('data-ref="')[1:]]
    assert refs_on_page == [ref(m, due) for m, due in expected]
    for member, _ in expected:
        f = fields_of(member)
        assert f[b"_retries"] == b"1" and f[b"_group"] == b"billing"
    errors = failures(r)
    for error in errors.values():  # the last error, from the bus's own metric events
        assert error.decode() in html
    assert html.count("in 4 m") == 5  # the bus caps the delay at 300 s: each is due in 4 m and some seconds


def test_api_page_and_list(viewer, api_token, bus_retries) -> None:
    r = bus_retries.r
    token = api_token(viewer)
    reply = Client().get(stream_api(STREAM, "retries/") + "?count=2", **bearer(token)).json()
    expected = scheduled(r)
    assert reply["total"] == len(expected) == 5
    assert [x["ref"] for x in reply["retries"]] == [ref(m, d) for m, d in expected[:2]]
    seen = [x["ref"] for x in reply["retries"]]
    while reply["next"]:
        reply = (
            Client()
            .get(stream_api(STREAM, "retries/") + f"?count=2&after={reply['next']}", **bearer(token))
            .json()
        )
        seen += [x["ref"] for x in reply["retries"]]
    assert seen == [ref(m, d) for m, d in expected]
    listing = Client().get(api("/c/default/retries/"), **bearer(token)).json()
    assert [(s["key"], s["stream"], s["waiting"]) for s in listing["sets"]] == [(RETRY_SET, STREAM, 5)]


def test_pages_share_a_due_time_without_skipping(viewer, api_token, r: redis.Redis) -> None:
    """Members due the same millisecond are paged by offset: none is skipped or shown twice."""
    members = [msgpack.packb([b"type", b"t", b"id", str(i).encode(), b"_retries", b"1"]) for i in range(7)]
    r.zadd(RETRY_SET, dict.fromkeys(members, 1700000000000))
    token = api_token(viewer)
    seen, after = [], None
    while True:
        url = stream_api(STREAM, "retries/") + "?count=3" + (f"&after={after}" if after else "")
        reply = Client().get(url, **bearer(token)).json()
        seen += [x["ref"] for x in reply["retries"]]
        after = reply["next"]
        if not after:
            break
    assert sorted(seen) == sorted(ref(m, 1_700_000_000_000) for m in members)
    assert len(seen) == 7


# --------------------------------------------------------------------------------------- actions


def test_retry_now_adds_one_copy_and_removes_it(operator_client: Client, bus_retries) -> None:
    r = bus_retries.r
    (member, due), *rest = scheduled(r)
    before = r.xrange(STREAM)
    response = operator_client.post(PAGE + "retry/", {"refs": [ref(member, due)]})
    assert response.status_code == 302
    after = r.xrange(STREAM)
    assert len(after) == len(before) + 1
    _, added = after[-1]
    assert added == fields_of(member)  # exactly what the pump would re-add
    assert scheduled(r) == rest
    # Pressed again (a second browser): nothing more is added.
    operator_client.post(PAGE + "retry/", {"refs": [ref(member, due)]})
    assert len(r.xrange(STREAM)) == len(before) + 1
    row = AuditEvent.objects.filter(action="retry.now").latest("at")
    assert row.outcome == "ok" and row.username == "otto-operator"


def test_retry_now_racing_the_bus_pump_yields_one_copy_each(operator, api_token, redis_server, r) -> None:
    from tests.console.retries.conftest import make_retries

    events = make_retries(redis_server.url(0), r, 60)
    # Make every retry due now, as time would: the bus's pump and the console then race for each.
    r.zadd(RETRY_SET, {m: 0 for m, _ in scheduled(r)}, xx=True)
    refs = [ref(m, d) for m, d in scheduled(r)]
    pump = Scripts.register(redis.Redis.from_url(redis_server.url(0))).pump_retries
    stop = threading.Event()
    pumped: list[int] = []

    def loop() -> None:
        while not stop.is_set():
            pumped.append(int(pump(keys=[RETRY_SET, STREAM], args=[1, ""])))

    thread = threading.Thread(target=loop)
    thread.start()
    try:
        token = api_token(operator)
        taken = 0
        for i in range(0, len(refs), 5):  # several calls, so the pump gets between them
            reply = post_json(stream_api(STREAM, "retries/retry"), {"refs": refs[i : i + 5]}, token).json()
            taken += len(reply["taken"])
    finally:
        stop.set()
        thread.join()
    assert r.zcard(RETRY_SET) == 0
    copies = [f[b"id"].decode() for _, f in r.xrange(STREAM) if f.get(b"_retries") == b"1"]
    assert sorted(copies) == sorted(events), "each retry re-added exactly once"
    assert taken + sum(pumped) == 60


def test_move_to_dlq_writes_the_bus_fields(operator_client: Client, bus_retries) -> None:
    r = bus_retries.r
    (member, due), *_ = scheduled(r)
    original = fields_of(member)
    errors = failures(r)
    response = operator_client.post(PAGE + "dead-letter/", {"refs": [ref(member, due)]})
    assert response.status_code == 302
    [(_, dead)] = r.xrange(DLQ)
    for name, value in original.items():
        assert dead[name] == value
    assert dead[b"dlq_original_stream"] == b"orders"
    assert dead[b"dlq_group"] == b"billing"
    assert dead[b"dlq_error"] == errors[original[b"id"]]
    failed_ids = {eid for eid, f in r.xrange(STREAM) if f[b"id"] == original[b"id"]}
    assert dead[b"dlq_original_id"] in failed_ids
    assert dead[b"dlq_retries"] == b"0"
    assert b"otto-operator" in dead[b"dlq_traceback"]
    assert abs(int(dead[b"dlq_failed_at"]) - time.time() * 1000) < 600_000
    assert set(dead) - set(original) == {
        b"dlq_original_stream",
        b"dlq_original_id",
        b"dlq_group",
        b"dlq_error",
        b"dlq_traceback",
        b"dlq_retries",
        b"dlq_failed_at",
    }
    assert r.zcard(RETRY_SET) == 4
    # The console's DLQ page reads it as an eventbus dead letter.
    dlq_page = operator_client.get(f"/c/default/dlq/{'%7Borders%7D%3Adlq'}/")
    assert dlq_page.status_code == 200 and errors[original[b"id"]].decode() in dlq_page.content.decode()


def test_delete_needs_an_admin(operator_client: Client, admin_client_: Client, bus_retries) -> None:
    r = bus_retries.r
    (member, due), *rest = scheduled(r)
    stream_before = r.xrange(STREAM)
    assert operator_client.post(PAGE + "delete/", {"refs": [ref(member, due)]}).status_code == 403
    assert r.zcard(RETRY_SET) == 5
    assert admin_client_.post(PAGE + "delete/", {"refs": [ref(member, due)]}).status_code == 302
    assert scheduled(r) == rest
    assert r.xrange(STREAM) == stream_before
    assert AuditEvent.objects.filter(action="retry.delete", outcome="denied").count() == 1
    assert AuditEvent.objects.filter(action="retry.delete", outcome="ok").get().affected == 1


@pytest.mark.parametrize("path", ["retry/", "dead-letter/", "delete/", "all/preview/"])
def test_viewer_is_refused_and_nothing_changes(viewer_client: Client, bus_retries, path) -> None:
    r = bus_retries.r
    before = (scheduled(r), r.xrange(STREAM))
    (member, due), *_ = before[0]
    response = viewer_client.post(PAGE + path, {"refs": [ref(member, due)], "mode": "stream", "up_to": due})
    assert response.status_code == 403
    assert (scheduled(r), r.xrange(STREAM)) == before
    assert not r.exists(DLQ)
    assert AuditEvent.objects.filter(outcome="denied", username="vera-viewer").count() == 1


def test_read_only_refuses_admins_too(
    settings, admin_client_: Client, admin_user, api_token, bus_retries
) -> None:
    r = bus_retries.r
    settings.BUSCONSOLE_READ_ONLY = True
    (member, due), *_ = scheduled(r)
    assert admin_client_.post(PAGE + "retry/", {"refs": [ref(member, due)]}).status_code == 403
    reply = post_json(
        stream_api(STREAM, "retries/delete"), {"refs": [ref(member, due)]}, api_token(admin_user)
    )
    assert reply.status_code == 403
    assert r.zcard(RETRY_SET) == 5
    assert "Read-only mode" in admin_client_.get(PAGE).content.decode()


def test_all_shows_the_count_first_then_takes_exactly_those(operator_client: Client, bus_retries) -> None:
    r = bus_retries.r
    members = scheduled(r)
    up_to = members[2][1]  # the third soonest: "all due by then"
    expected = r.zcount(RETRY_SET, "-inf", up_to)
    preview = operator_client.post(PAGE + "all/preview/", {"mode": "stream", "up_to": up_to})
    assert preview.status_code == 200
    html = preview.content.decode()
    assert f'<strong id="retries-count">{expected}</strong>' in html
    assert r.zcard(RETRY_SET) == 5  # the preview changed nothing
    done = operator_client.post(PAGE + "retry/", {"all": "1", "up_to": up_to})
    assert done.status_code == 302
    assert scheduled(r) == [(m, d) for m, d in members if d > up_to]
    added = [f for _, f in r.xrange(STREAM) if f.get(b"_retries") == b"1"]
    assert sorted(f[b"id"] for f in added) == sorted(fields_of(m)[b"id"] for m, d in members if d <= up_to)
    row = AuditEvent.objects.get(action="retry.now")
    assert row.affected == expected and row.parameters["all"] is True
    assert AuditEvent.objects.filter(action="retry.now.count").count() == 1


def test_api_dry_run_counts_and_roles(viewer, operator, api_token, bus_retries) -> None:
    r = bus_retries.r
    last = scheduled(r)[-1][1]
    url = stream_api(STREAM, "retries/dead-letter")
    assert post_json(url, {"all": True, "up_to": last, "dry_run": True}, api_token(viewer)).status_code == 403
    reply = post_json(url, {"all": True, "up_to": last, "dry_run": True}, api_token(operator))
    assert reply.json() == {"count": 5, "up_to": last}
    assert post_json(url, {"refs": ["nope"]}, api_token(operator)).status_code == 400
    reply = post_json(url, {"all": True, "up_to": last}, api_token(operator)).json()
    assert len(reply["taken"]) == 5 and reply["target"] == DLQ
    assert r.zcard(RETRY_SET) == 0 and r.xlen(DLQ) == 5


def test_payload_is_escaped(viewer_client: Client, r: redis.Redis) -> None:
    member = msgpack.packb(
        [b"type", b"<script>alert(1)</script>", b"data", json.dumps({"x": "<b>"}).encode()]
    )
    r.zadd(RETRY_SET, {member: 1_700_000_000_000})
    html = viewer_client.get(PAGE).content.decode()
    assert "<script>alert(1)</script>" not in html
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in html
