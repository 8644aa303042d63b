"""Annotations over the JSON API: write one, list them, and every refusal a 4xx.

What is checked comes from the test's own inputs: the times it sent (milliseconds or ISO text, turned
into the other form with the standard library), the audit rows it expects one per attempt.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta

import pytest
from django.contrib.auth.models import User
from django.test import Client

from streams_app.annotations.models import Annotation
from streams_app.audit.models import AuditEvent
from tests.console.helpers import bearer, post_json

URL = "/api/v1/annotations"
T0 = datetime(2026, 11, 22, 10, 30, tzinfo=UTC)
T0_MS = int(T0.timestamp()) * 1000


def audit_rows() -> list[tuple[str, str, str]]:
    return list(AuditEvent.objects.order_by("pk").values_list("action", "outcome", "username"))


def test_an_operator_writes_an_annotation_and_it_is_listed(operator: User, viewer: User, api_token) -> None:
    token = api_token(operator)
    body = {"text": "deploy v1.4 <b>billing</b>", "time": T0_MS, "tags": ["deploy", "billing", "deploy"],
            "connection": "default", "stream": "orders"}
    reply = post_json(URL, body, token)
    assert reply.status_code == 201, reply.content
    row = reply.json()
    assert (row["text"], row["tags"], row["connection"], row["stream"], row["user"]) == (
        "deploy v1.4 <b>billing</b>", ["deploy", "billing"], "default", "orders", operator.username)
    assert row["time"] == row["time_end"] == T0.isoformat() and row["time_ms"] == row["time_end_ms"] == T0_MS
    saved = Annotation.objects.get()
    assert (saved.at, saved.end_at, bytes(saved.key), saved.connection) == (T0, T0, b"orders", "default")
    events = list(AuditEvent.objects.all())
    assert len(events) == 1
    event = events[0]
    assert (event.action, event.outcome, event.username, event.connection, event.target_display, event.affected) == (
        "annotation.create", "ok", operator.username, "default", "orders", 1)
    assert event.parameters["annotation_id"] == saved.pk and event.parameters["tags"] == ["deploy", "billing", "deploy"]

    # a span, given in ISO text, with the slash-ended address; no scope: every connection
    span = post_json(URL + "/", {"text": "incident", "time": "2026-11-22T10:00:00Z",
                                 "time_end": "2026-11-22T11:00:00+00:00"}, token)
    assert span.status_code == 201, span.content
    assert (span.json()["time_ms"], span.json()["time_end_ms"]) == (T0_MS - 1_800_000, T0_MS + 1_800_000)
    assert span.json()["connection"] is None and span.json()["stream"] is None

    # a viewer reads them, newest written first; the window and the scope narrow the list
    web = Client()
    listed = web.get(URL, **bearer(api_token(viewer))).json()
    assert [a["text"] for a in listed["annotations"]] == ["incident", "deploy v1.4 <b>billing</b>"]
    narrow = web.get(URL, {"from": "2026-11-22T10:45:00Z"}, **bearer(api_token(viewer))).json()
    assert [a["text"] for a in narrow["annotations"]] == ["incident"]  # the span reaches 11:00, the moment does not
    other = web.get(URL, {"connection": "default", "stream": "payments"}, **bearer(api_token(viewer))).json()
    assert [a["text"] for a in other["annotations"]] == ["incident"]  # another stream's marker is not shown
    paged = web.get(URL, {"count": 1}, **bearer(api_token(viewer))).json()
    assert len(paged["annotations"]) == 1 and paged["next"] is not None
    rest = web.get(URL, {"count": 1, "before": paged["next"]}, **bearer(api_token(viewer))).json()
    assert [a["text"] for a in rest["annotations"]] == ["deploy v1.4 <b>billing</b>"] and rest["next"] is None


def test_the_time_defaults_to_now(operator: User, api_token) -> None:
    before = datetime.now(UTC)
    reply = post_json(URL, {"text": "note"}, api_token(operator))
    after = datetime.now(UTC)
    assert reply.status_code == 201
    at = Annotation.objects.get().at
    assert before - timedelta(seconds=1) <= at <= after + timedelta(seconds=1)


def test_a_viewer_may_not_write_and_the_refusal_is_audited(viewer: User, api_token) -> None:
    reply = post_json(URL, {"text": "mine"}, api_token(viewer))
    assert reply.status_code == 403 and reply.json()["error"]["code"] == "forbidden"
    assert not Annotation.objects.exists()
    assert audit_rows() == [("annotation.create", "denied", viewer.username)]


def test_a_read_only_console_still_takes_notes(operator: User, api_token, settings) -> None:
    settings.BUSCONSOLE_READ_ONLY = True
    assert post_json(URL, {"text": "during the freeze"}, api_token(operator)).status_code == 201


BAD = [
    ({}, "text"),
    ({"text": ""}, "text"),
    ({"text": "x" * 2001}, "text"),
    ({"text": 5}, "text"),
    ({"text": "a\x00b"}, "text"),
    ({"text": "x", "time": "yesterday"}, "time"),
    ({"text": "x", "time": -1}, "time"),
    ({"text": "x", "time": 1.5}, "time"),
    ({"text": "x", "time": True}, "time"),
    ({"text": "x", "time": 10**20}, "time"),
    ({"text": "x", "time": "2026-02-30T10:00Z"}, "time"),
    ({"text": "x", "tags": ["a"] * 11}, "tags"),
    ({"text": "x", "tags": ["y" * 51]}, "tags"),
    ({"text": "x", "tags": "deploy"}, "tags"),
    ({"text": "x", "connection": "no such/conn"}, "connection"),
    ({"text": "x", "colour": "red"}, "colour"),
    ({"text": "x", "time": T0_MS, "time_end": T0_MS - 1}, "time_end"),
    ({"text": "x", "time": T0_MS, "time_end": T0_MS + 32 * 86_400_000}, "31 days"),
    ({"text": "x", "connection": "nowhere"}, "nowhere"),
    ({"text": "x", "stream": "orders"}, "connection"),
    ({"text": "   "}, "text"),
]


@pytest.mark.parametrize(("body", "named"), BAD, ids=[json.dumps(b)[:60] for b, _ in BAD])
def test_bad_input_is_a_400_naming_the_problem(operator: User, api_token, body: dict, named: str) -> None:
    reply = post_json(URL, body, api_token(operator))
    assert reply.status_code == 400, reply.content
    error = reply.json()["error"]
    assert error["code"] == "bad_request" and named in error["message"], error
    assert not Annotation.objects.exists()
    assert audit_rows() == [("annotation.create", "error", operator.username)]


def test_malformed_and_oversized_bodies_are_refused(operator: User, api_token) -> None:
    web, token = Client(), api_token(operator)
    assert web.post(URL, "[1]", content_type="application/json", **bearer(token)).status_code == 400
    assert web.post(URL, "{", content_type="application/json", **bearer(token)).status_code == 400
    big = json.dumps({"text": "x" * 300_000})
    assert web.post(URL, big, content_type="application/json", **bearer(token)).status_code == 413
    assert not Annotation.objects.exists()


def test_listing_refuses_bad_parameters(viewer: User, api_token) -> None:
    web, token = Client(), api_token(viewer)
    for params in ({"from": "0"}, {"to": "soon"}, {"count": "0"}, {"count": "501"}, {"stream": "orders"},
                   {"connection": "a/b"}):
        reply = web.get(URL, params, **bearer(token))
        assert reply.status_code == 400 and reply.json()["error"]["code"] == "bad_request", params


def test_a_session_post_needs_the_csrf_token(operator: User) -> None:
    web = Client(enforce_csrf_checks=True)
    web.force_login(operator)
    refused = web.post(URL, json.dumps({"text": "forged"}), content_type="application/json")
    assert refused.status_code == 403 and refused.json()["error"]["code"] == "csrf_failed"
    assert not Annotation.objects.exists()


def test_anonymous_callers_get_401(db) -> None:
    assert Client().get(URL).status_code == 401
    assert Client().post(URL, "{}", content_type="application/json").status_code == 401
