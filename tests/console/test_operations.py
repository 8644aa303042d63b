"""Operator actions through the pages and the JSON API: roles, read-only mode, CSRF, audit rows, shapes.

Every action is tried by every role, in both interfaces, and must leave exactly one audit row saying
what happened; refused actions must leave Redis as it was. Expected values come from Redis itself
(XPENDING, XINFO GROUPS, XRANGE of the target) or from plain Python over the data the test wrote.
Idle times are set with ``XCLAIM ... IDLE`` rather than waited for.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from types import SimpleNamespace

import pytest
import redis
from django.contrib.messages import get_messages
from django.test import Client

from streams_app import services
from streams_app.audit.models import AuditEvent
from streams_app.jobs.models import Job
from streams_app.redis_ops import client as redis_client
from tests.console.conftest import PASSWORD
from tests.console.helpers import CONN, api, bearer, dlq_url, group_url, post_json, stream_url


@pytest.fixture(autouse=True)
def _fresh_clients(settings):
    settings.BUSCONSOLE_DLQ_PATTERNS = ""
    settings.BUSCONSOLE_READ_ONLY = False
    redis_client.reset()
    yield
    redis_client.reset()


def eventbus_dead_letter(i: int, original_id: str, *, stream: str = "orders") -> dict[str, str]:
    return {
        "type": "order.created",
        "data": json.dumps({"order_id": 100 + i}),
        "id": f"evt-{i}",
        "_retries": "5",
        "dlq_original_stream": stream,
        "dlq_original_id": original_id,
        "dlq_group": "billing",
        "dlq_error": f"ValueError: card {i} declined",
        "dlq_traceback": "Traceback (most recent call last):\n  ...\nValueError",
        "dlq_retries": "5",
        "dlq_failed_at": "1700000000100",
    }


@pytest.fixture
def bus(r: redis.Redis) -> SimpleNamespace:
    """``orders`` with group ``billing`` (4 entries pending on worker-1, idle 100 s) and a 3-entry DLQ."""
    ids = [r.xadd("orders", {"type": "order.created", "data": json.dumps({"order_id": i})}).decode() for i in range(10)]
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker-1", {"orders": ">"}, count=4)
    r.xclaim("orders", "billing", "worker-1", 0, ids[:4], idle=100_000, justid=True)
    dlq_ids = [r.xadd("orders:dlq", eventbus_dead_letter(i, ids[i])).decode() for i in range(3)]
    return SimpleNamespace(r=r, ids=ids, dlq_ids=dlq_ids)


def snapshot(r: redis.Redis) -> tuple:
    """What a refused action must leave unchanged."""
    groups = [(g["name"], g["last-delivered-id"], g["pending"]) for g in r.xinfo_groups("orders")]
    pending = r.xpending_range("orders", "billing", "-", "+", 100)
    return (
        r.xlen("orders"),
        r.xlen("orders:dlq") if r.exists("orders:dlq") else 0,
        groups,
        [(p["message_id"], p["consumer"]) for p in pending],
    )


# ---------------------------------------------------------------------- every action, every role


@dataclass(frozen=True)
class Action:
    name: str  # the audit action
    html: Callable[[SimpleNamespace], tuple[str, dict]]
    api: Callable[[SimpleNamespace], tuple[str, dict]]
    admin_only: bool = False
    html_ok: int = 302
    api_ok: int = 200


ACTIONS = [
    Action(
        "claim",
        lambda b: (group_url("orders", "billing") + "claim/", {"ids": [b.ids[0]], "consumer": "worker-2", "min_idle_ms": 0}),
        lambda b: (api(group_url("orders", "billing") + "claim"), {"ids": [b.ids[0]], "consumer": "worker-2", "min_idle_ms": 0}),
    ),
    Action(
        "autoclaim",
        lambda b: (group_url("orders", "billing") + "autoclaim/", {"consumer": "worker-2", "min_idle_ms": 0, "count": 10}),
        lambda b: (api(group_url("orders", "billing") + "autoclaim"), {"consumer": "worker-2", "min_idle_ms": 0, "count": 10}),
    ),
    Action(
        "ack",
        lambda b: (group_url("orders", "billing") + "ack/", {"ids": [b.ids[1]], "confirm": "1"}),
        lambda b: (api(group_url("orders", "billing") + "ack"), {"ids": [b.ids[1]]}),
    ),
    Action(
        "rewind.preview",
        lambda b: (group_url("orders", "billing") + "rewind/preview/", {"to": "0"}),
        lambda b: (api(group_url("orders", "billing") + "rewind"), {"to": "0", "dry_run": True}),
        html_ok=200,
    ),
    Action(
        "rewind",
        lambda b: (group_url("orders", "billing") + "rewind/", {"to": b.ids[5]}),
        lambda b: (api(group_url("orders", "billing") + "rewind"), {"to": b.ids[5]}),
    ),
    Action(
        "dlq.requeue",
        lambda b: (dlq_url("orders:dlq") + "requeue/", {"ids": [b.dlq_ids[0]]}),
        lambda b: (api(dlq_url("orders:dlq") + "requeue"), {"ids": [b.dlq_ids[0]]}),
    ),
    Action(
        "dlq.requeue_all",
        lambda b: (dlq_url("orders:dlq") + "requeue/", {"all": "1", "up_to": b.dlq_ids[-1]}),
        lambda b: (api(dlq_url("orders:dlq") + "requeue"), {"all": True, "up_to": b.dlq_ids[-1]}),
        api_ok=202,
    ),
    Action(
        "dlq.delete",
        lambda b: (dlq_url("orders:dlq") + "delete/", {"ids": [b.dlq_ids[1]]}),
        lambda b: (api(dlq_url("orders:dlq") + "delete"), {"ids": [b.dlq_ids[1]]}),
        admin_only=True,
    ),
    Action(
        "dlq.purge",
        lambda b: (dlq_url("orders:dlq") + "purge/", {"up_to": b.dlq_ids[-1], "confirm": "orders:dlq"}),
        lambda b: (api(dlq_url("orders:dlq") + "purge"), {"up_to": b.dlq_ids[-1], "confirm": "orders:dlq"}),
        admin_only=True,
    ),
    Action(
        "replay.count",
        lambda b: (stream_url("orders") + "replay/count/", {"start": "-", "end": "+"}),
        lambda b: (api(stream_url("orders") + "replay"), {"start": "-", "end": "+", "dry_run": True}),
        html_ok=200,
    ),
    Action(
        "replay",
        lambda b: (stream_url("orders") + "replay/", {"start": b.ids[0], "end": b.ids[2]}),
        lambda b: (api(stream_url("orders") + "replay"), {"start": b.ids[0], "end": b.ids[2]}),
        api_ok=202,
    ),
]
ROLES = ["viewer", "operator", "admin_user"]


def _allowed(action: Action, role: str) -> bool:
    return role == "admin_user" or (role == "operator" and not action.admin_only)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.name)
def test_html_action_for_each_role(request, bus, action: Action, role: str) -> None:
    user = request.getfixturevalue(role)
    web = Client()
    web.force_login(user)
    url, data = action.html(bus)
    before = snapshot(bus.r)
    response = web.post(url, data)
    event = AuditEvent.objects.get()  # exactly one row, whatever happened
    assert (event.action, event.username, event.connection) == (action.name, user.username, CONN)
    if _allowed(action, role):
        assert response.status_code == action.html_ok, response.content[:300]
        errors = [m.message for m in get_messages(response.wsgi_request) if m.level_tag == "error"]
        assert not errors
        assert event.outcome == "ok", event.error
    else:
        assert response.status_code == 403
        assert event.outcome == "denied"
        assert snapshot(bus.r) == before


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.name)
def test_api_action_for_each_role(request, api_token, bus, action: Action, role: str) -> None:
    user = request.getfixturevalue(role)
    url, body = action.api(bus)
    before = snapshot(bus.r)
    response = post_json(url, body, api_token(user))
    event = AuditEvent.objects.get()
    assert (event.action, event.username) == (action.name, user.username)
    if _allowed(action, role):
        assert response.status_code == action.api_ok, response.content
        assert event.outcome == "ok", event.error
    else:
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "forbidden"
        assert event.outcome == "denied"
        assert snapshot(bus.r) == before


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.name)
def test_read_only_mode_refuses_every_action_to_everyone(request, settings, api_token, bus, action, role) -> None:
    settings.BUSCONSOLE_READ_ONLY = True
    user = request.getfixturevalue(role)
    before = snapshot(bus.r)
    web = Client()
    web.force_login(user)
    url, data = action.html(bus)
    page = web.post(url, data)
    assert page.status_code == 403
    assert "read-only" in page.content.decode()
    url, body = action.api(bus)
    reply = post_json(url, body, api_token(user))
    assert reply.status_code == 403
    assert "read-only" in reply.json()["error"]["message"]
    assert snapshot(bus.r) == before
    assert list(AuditEvent.objects.values_list("action", "outcome")) == [(action.name, "denied")] * 2


def test_anonymous_posts_are_sent_to_login_or_get_401(client: Client, db, bus) -> None:
    url, data = ACTIONS[0].html(bus)
    assert client.post(url, data).status_code == 302
    url, body = ACTIONS[0].api(bus)
    assert client.post(url, json.dumps(body), content_type="application/json").status_code == 401
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize("action", ACTIONS, ids=lambda a: a.name)
def test_get_on_an_action_changes_nothing(operator_client: Client, bus, action: Action) -> None:
    before = snapshot(bus.r)
    url, _ = action.html(bus)
    assert operator_client.get(url).status_code == 405
    url, _ = action.api(bus)
    assert operator_client.get(url).status_code == 405
    assert snapshot(bus.r) == before


# --------------------------------------------------------------------------------------- CSRF


def test_csrf_less_posts_are_refused_for_sessions(operator, bus) -> None:
    web = Client(enforce_csrf_checks=True)
    web.force_login(operator)
    before = snapshot(bus.r)
    url, data = ACTIONS[0].html(bus)
    assert web.post(url, data).status_code == 403
    url, body = ACTIONS[0].api(bus)
    refused = web.post(url, json.dumps(body), content_type="application/json")
    assert refused.status_code == 403
    assert refused.json()["error"]["code"] == "csrf_failed"
    assert snapshot(bus.r) == before
    assert not AuditEvent.objects.exists()  # refused before any view ran


def test_posts_with_the_csrf_token_work(operator, bus) -> None:
    web = Client(enforce_csrf_checks=True)
    web.force_login(operator)
    web.get(group_url("orders", "billing"))  # sets the CSRF cookie, as a browser would
    token = web.cookies["csrftoken"].value
    url, data = ACTIONS[0].html(bus)
    assert web.post(url, {**data, "csrfmiddlewaretoken": token}).status_code == 302
    url, body = ACTIONS[0].api(bus)
    reply = web.post(url, json.dumps(body), content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert reply.status_code == 200


def test_bearer_tokens_need_no_csrf_token(operator, api_token, bus) -> None:
    url, body = ACTIONS[0].api(bus)
    reply = post_json(url, body, api_token(operator), web=Client(enforce_csrf_checks=True))
    assert reply.status_code == 200


# ---------------------------------------------------------------------------------- audit rows


def test_claim_audit_row_says_who_what_where_and_how_much(operator_client: Client, operator, bus) -> None:
    ids = bus.ids[:3]
    operator_client.post(group_url("orders", "billing") + "claim/", {"ids": ids, "consumer": "worker-2", "min_idle_ms": 5000})
    event = AuditEvent.objects.get()
    assert event.who == operator
    assert event.username == operator.username
    assert event.connection == CONN
    assert event.action == "claim"
    assert bytes(event.target_stream) == b"orders"
    assert event.target_display == "orders"
    assert event.target_group == "billing"
    assert event.target_ids == ids
    assert event.parameters == {"consumer": "worker-2", "min_idle_ms": 5000}
    assert event.outcome == "ok"
    owners = {p["message_id"].decode(): p["consumer"].decode() for p in bus.r.xpending_range("orders", "billing", "-", "+", 10)}
    assert event.affected == sum(owners[i] == "worker-2" for i in ids) == 3
    assert event.duration_ms >= 0


def test_a_failing_action_is_audited_as_an_error(operator, api_token, bus) -> None:
    reply = post_json(api(group_url("orders", "nope") + "ack"), {"ids": [bus.ids[0]]}, api_token(operator))
    assert reply.status_code == 404
    assert reply.json()["error"]["code"] == "not_found"
    event = AuditEvent.objects.get()
    assert (event.action, event.outcome, event.target_group) == ("ack", "error", "nope")
    assert "group" in event.error


def test_invalid_input_is_a_400_and_is_audited(operator, api_token, bus) -> None:
    url = api(group_url("orders", "billing") + "claim")
    bad = post_json(url, {"ids": ["not-an-id"], "consumer": "w", "min_idle_ms": 0}, api_token(operator))
    assert bad.status_code == 400
    assert bad.json()["error"]["code"] == "bad_request"
    assert "ids" in bad.json()["error"]["message"]
    event = AuditEvent.objects.get()
    assert (event.action, event.outcome) == ("claim", "error")


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'"text"', b"\xff\xfe"])
def test_bad_json_is_a_400_json_error(operator, api_token, bus, body: bytes) -> None:
    reply = Client().post(
        api(group_url("orders", "billing") + "claim"), body, content_type="application/json",
        **bearer(api_token(operator)),
    )
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "bad_request"


def test_audit_page_and_api_filter_events(operator_client, admin_client_, viewer_client, api_token, viewer, bus) -> None:
    operator_client.post(group_url("orders", "billing") + "claim/", {"ids": [bus.ids[0]], "consumer": "w2", "min_idle_ms": 0})
    admin_client_.post(dlq_url("orders:dlq") + "delete/", {"ids": [bus.dlq_ids[0]]})
    viewer_client.post(dlq_url("orders:dlq") + "delete/", {"ids": [bus.dlq_ids[1]]})
    page = viewer_client.get("/audit/")
    assert page.status_code == 200
    body = page.content.decode()
    assert body.count('<td class="mono">claim</td>') == 1
    assert body.count('<td class="mono">dlq.delete</td>') == 2
    filtered = viewer_client.get("/audit/?outcome=denied").content.decode()
    assert "vera-viewer" in filtered and "otto-operator" not in filtered

    headers = bearer(api_token(viewer))
    everything = Client().get("/api/v1/audit/", **headers).json()["events"]
    assert [e["action"] for e in everything] == ["dlq.delete", "dlq.delete", "claim"]  # newest first
    assert set(everything[0]) >= {"id", "at", "user", "connection", "action", "stream", "group", "ids",
                                  "parameters", "outcome", "error", "affected", "duration_ms"}
    mine = Client().get("/api/v1/audit/?user=ada-admin&action=dlq.", **headers).json()["events"]
    assert [(e["user"], e["outcome"], e["affected"], e["ids"]) for e in mine] == [
        ("ada-admin", "ok", 1, [bus.dlq_ids[0]])
    ]
    since = Client().get("/api/v1/audit/?since=2999-01-01T00:00:00Z", **headers).json()["events"]
    assert since == []
    assert Client().get("/api/v1/audit/?since=yesterday", **headers).status_code == 400


def test_audit_events_cannot_be_changed_in_the_admin(bus, db) -> None:
    from django.contrib.admin.sites import site

    admin = site._registry[AuditEvent]
    assert not admin.has_add_permission(None)
    assert not admin.has_change_permission(None)
    assert not admin.has_delete_permission(None)


# ----------------------------------------------------------------------------- claim, ack, rewind


def _owners(r: redis.Redis) -> dict[str, str]:
    return {p["message_id"].decode(): p["consumer"].decode() for p in r.xpending_range("orders", "billing", "-", "+", 100)}


def test_api_claim_skips_an_entry_that_became_active_and_reports_deleted(operator, api_token, bus) -> None:
    r = bus.r
    r.xclaim("orders", "billing", "worker-1", 0, [bus.ids[1]], justid=True)  # a heartbeat: idle is 0 again
    r.xdel("orders", bus.ids[2])
    reply = post_json(
        api(group_url("orders", "billing") + "claim"),
        {"ids": bus.ids[:4], "consumer": "worker-2", "min_idle_ms": 50_000},
        api_token(operator),
    )
    assert reply.status_code == 200
    assert reply.json() == {"claimed": [bus.ids[0], bus.ids[3]], "skipped": [bus.ids[1]], "deleted": [bus.ids[2]]}
    owners = _owners(r)
    assert owners == {bus.ids[0]: "worker-2", bus.ids[1]: "worker-1", bus.ids[3]: "worker-2"}


def test_html_claim_from_the_group_page_says_what_happened(operator_client, bus) -> None:
    bus.r.xclaim("orders", "billing", "worker-1", 0, [bus.ids[1]], justid=True)
    response = operator_client.post(
        group_url("orders", "billing") + "claim/",
        {"ids": bus.ids[:2], "consumer": "worker-2", "min_idle_ms": 50_000}, follow=True,
    )
    body = response.content.decode()
    assert response.redirect_chain[-1][0] == group_url("orders", "billing")
    assert "Claimed 1 entry to worker-2." in body
    assert f"Skipped 1 entry ({bus.ids[1]})" in body
    assert _owners(bus.r)[bus.ids[0]] == "worker-2"


def test_api_autoclaim_sweeps_idle_entries(operator, api_token, bus) -> None:
    bus.r.xclaim("orders", "billing", "worker-1", 0, [bus.ids[3]], justid=True)
    reply = post_json(
        api(group_url("orders", "billing") + "autoclaim"),
        {"consumer": "sweeper", "min_idle_ms": 50_000, "count": 2},
        api_token(operator),
    ).json()
    assert reply == {"claimed": bus.ids[:3], "skipped": [], "deleted": [], "next": None}
    assert _owners(bus.r) == {**dict.fromkeys(bus.ids[:3], "sweeper"), bus.ids[3]: "worker-1"}


def test_ack_needs_the_confirmation_box_on_the_page(operator_client, bus) -> None:
    url = group_url("orders", "billing") + "ack/"
    response = operator_client.post(url, {"ids": [bus.ids[0]]}, follow=True)
    assert "Tick the box" in response.content.decode()
    assert bus.ids[0] in _owners(bus.r)
    response = operator_client.post(url, {"ids": [bus.ids[0]], "confirm": "1"}, follow=True)
    assert "Acknowledged 1 entry" in response.content.decode()
    assert bus.ids[0] not in _owners(bus.r)


def test_api_ack_counts_what_was_pending(operator, api_token, bus) -> None:
    url = api(group_url("orders", "billing") + "ack")
    reply = post_json(url, {"ids": [bus.ids[0], bus.ids[9]]}, api_token(operator))
    assert reply.json() == {"acked": 1}  # ids[9] was never delivered
    assert bus.r.xpending("orders", "billing")["pending"] == 3


def test_rewind_preview_equals_what_is_then_redelivered(operator, api_token, bus) -> None:
    r = bus.r
    r.xreadgroup("billing", "worker-1", {"orders": ">"})  # the group is at the end
    token = api_token(operator)
    url = api(group_url("orders", "billing") + "rewind")
    preview = post_json(url, {"to": bus.ids[3], "dry_run": True}, token).json()
    assert r.xinfo_groups("orders")[0]["last-delivered-id"].decode() == bus.ids[9]  # nothing changed
    done = post_json(url, {"to": bus.ids[3]}, token).json()
    assert done["last_delivered_id"] == preview["last_delivered_id"] == bus.ids[3]
    assert done["previous_last_delivered_id"] == bus.ids[9]
    redelivered = r.xreadgroup("billing", "worker-9", {"orders": ">"})[0][1]
    assert preview["will_redeliver"] == done["will_redeliver"] == len(redelivered) == 6
    assert [e[0].decode() for e in redelivered] == bus.ids[4:]
    assert {e["name"]: e["lag"] for e in map(dict, r.xinfo_groups("orders"))}[b"billing"] == 0


def test_rewind_preview_page_then_confirm(operator_client, bus) -> None:
    page = operator_client.post(group_url("orders", "billing") + "rewind/preview/", {"to": "0"})
    body = page.content.decode()
    assert page.status_code == 200
    assert '<strong id="will-redeliver">10</strong>' in body
    assert 'name="to" value="0-0"' in body
    assert bus.r.xinfo_groups("orders")[0]["last-delivered-id"].decode() == bus.ids[3]
    done = operator_client.post(group_url("orders", "billing") + "rewind/", {"to": "0-0"}, follow=True)
    assert "10 entries will be delivered again" in done.content.decode()
    assert bus.r.xinfo_groups("orders")[0]["last-delivered-id"] == b"0-0"


# ---------------------------------------------------------------------------------------- DLQs


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
    from django.db import connection

    entries = [r.xadd("orders:dlq", eventbus_dead_letter(i, f"1-{i}")).decode() for i in range(50)]
    barrier = threading.Barrier(2)
    results: dict[str, object] = {}

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


def test_dlq_page_lists_entries_with_error_retries_origin_and_payload(viewer_client, three_conventions) -> None:
    r = three_conventions.r
    r.xadd("orders:dlq", {**eventbus_dead_letter(2, "1699999999001-0"), "data": '{"note": "<script>alert(1)</script>"}'})
    page = viewer_client.get(dlq_url("orders:dlq"))
    assert page.status_code == 200
    body = page.content.decode()
    assert "ValueError: card 1 declined" in body
    assert '<td class="num">5</td>' in body
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


def test_requeue_all_never_touches_entries_newer_than_up_to(operator_client, operator, r) -> None:
    from streams_app.jobs import runner as jobs

    old = [r.xadd("orders:dlq", eventbus_dead_letter(i, f"1-{i}")).decode() for i in range(7)]
    response = operator_client.post(dlq_url("orders:dlq") + "requeue/", {"all": "1", "up_to": old[-1]})
    job = Job.objects.get()
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    late = r.xadd("orders:dlq", eventbus_dead_letter(99, "1-99")).decode()  # arrives after the page
    jobs.job_run(job.pk)  # what the worker does (the Celery path is in test_jobs.py)
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


def test_dlq_list_page_and_an_unknown_key(viewer_client, three_conventions) -> None:
    body = viewer_client.get("/c/default/dlq/").content.decode()
    for key in ("orders:dlq", "payments:dlq", OMNI_KEY):
        assert f'href="{dlq_url(key)}"' in body
    assert viewer_client.get(dlq_url("orders")).status_code == 400  # not a DLQ
    assert viewer_client.get(dlq_url("nothing:dlq")).status_code == 404


def test_stream_page_links_its_dlq_page(viewer_client, bus) -> None:
    body = viewer_client.get(stream_url("orders")).content.decode()
    assert f'href="{dlq_url("orders:dlq")}"' in body


# -------------------------------------------------------------------------------------- replay


def test_replay_dry_run_counts_like_plain_python_and_changes_nothing(operator, api_token, r) -> None:
    ids = [r.xadd("events", {"type": "a" if i % 3 else "b", "n": str(i)}).decode() for i in range(30)]
    reply = post_json(
        api(stream_url("events") + "replay"),
        {"start": ids[4], "end": ids[25], "match": {"type": "b"}, "dry_run": True},
        api_token(operator),
    ).json()
    expected = sum(1 for i in range(4, 26) if i % 3 == 0)
    assert reply == {"count": expected, "start": ids[4], "end": ids[25], "target": "events"}
    assert r.xlen("events") == 30


def test_replay_page_counts_first_then_starts_a_job_that_copies(operator_client, r) -> None:
    from streams_app.jobs import runner as jobs

    ids = [r.xadd("events", {"type": "a" if i % 2 else "b", "n": str(i)}).decode() for i in range(12)]
    page = operator_client.post(stream_url("events") + "replay/count/", {"start": "-", "end": "+", "target": "copy", "match": "type=b"})
    body = page.content.decode()
    assert '<strong id="replay-count">6</strong>' in body
    assert f'name="end" value="{ids[-1]}"' in body
    assert not r.exists("copy")
    started = operator_client.post(stream_url("events") + "replay/", {"start": "0-0", "end": ids[-1], "target": "copy", "match": "type=b"})
    job = Job.objects.get()
    assert started["Location"] == f"/jobs/{job.pk}/"
    jobs.job_run(job.pk)
    job.refresh_from_db()
    assert (job.state, job.done, job.total) == ("done", 6, 6)
    copies = r.xrange("copy")
    assert [f[b"_replayed_from"].decode() for _, f in copies] == ids[0::2]
    assert all(f[b"type"] == b"b" for _, f in copies)


# ---------------------------------------------------------------------------------- group page


def test_group_page_offers_claim_ack_sweep_and_rewind_to_operators_only(operator_client, viewer_client, bus) -> None:
    body = operator_client.get(group_url("orders", "billing")).content.decode()
    assert body.count('form="pending-select"') == 4  # one checkbox per pending entry
    for action in ("claim/", "ack/", "autoclaim/", "rewind/preview/"):
        assert f'{group_url("orders", "billing")}{action}"' in body
    viewer_body = viewer_client.get(group_url("orders", "billing")).content.decode()
    assert "Claim selected" not in viewer_body


def test_jobs_pages(viewer_client, operator, r) -> None:
    job = Job.objects.create(kind="dlq.requeue_all", connection=CONN, created_by=operator, total=10, done=4,
                             state="running", parameters={"key": b"orders:dlq".hex(), "key_text": "orders:dlq", "up_to": "5-0"})
    listing = viewer_client.get("/jobs/").content.decode()
    assert f'href="/jobs/{job.pk}/"' in listing
    page = viewer_client.get(f"/jobs/{job.pk}/")
    body = page.content.decode()
    assert '<strong id="job-done">4</strong>' in body
    assert 'hx-trigger="every 1s"' in body  # live while running
    partial = viewer_client.get(f"/jobs/{job.pk}/", HTTP_HX_REQUEST="true").content.decode()
    assert partial.lstrip().startswith('<section id="job-progress"')
    Job.objects.filter(pk=job.pk).update(state="done", done=10)
    assert 'hx-trigger' not in viewer_client.get(f"/jobs/{job.pk}/").content.decode()
    assert viewer_client.get("/jobs/999999/").status_code == 404


def test_operator_cancels_and_resumes_a_job(operator_client, viewer_client, operator, r) -> None:
    job = Job.objects.create(kind="dlq.requeue_all", connection=CONN, created_by=operator, state="queued",
                             parameters={"key": b"orders:dlq".hex(), "key_text": "orders:dlq", "up_to": "5-0"})
    assert viewer_client.post(f"/jobs/{job.pk}/cancel/").status_code == 403
    operator_client.post(f"/jobs/{job.pk}/cancel/")
    job.refresh_from_db()
    assert job.state == "cancelled"
    operator_client.post(f"/jobs/{job.pk}/resume/")
    job.refresh_from_db()
    assert job.state == "queued"
    assert list(AuditEvent.objects.order_by("pk").values_list("action", "outcome")) == [
        ("job.cancel", "denied"), ("job.cancel", "ok"), ("job.resume", "ok")
    ]


def test_login_form_still_works_for_an_operator(client, operator, bus) -> None:
    """The console's pages and buttons are reachable by a plain password login (no test shortcuts)."""
    response = client.post("/login/", {"username": operator.username, "password": PASSWORD})
    assert response.status_code == 302
    url, data = ACTIONS[0].html(bus)
    assert client.post(url, data).status_code == 302
