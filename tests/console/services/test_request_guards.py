"""What the HTTP layer refuses before any action runs: anonymous posts, GET, posts without a CSRF token, bad JSON.

Every action of ``OPERATIONS`` and ``ADMIN_ACTIONS`` is sent without a login (302 to the login page, or
401 from the API), as a GET (405) and from a session without its CSRF token (403, ``csrf_failed``); the
state Redis reports before and after (``snapshot``) must be equal and no audit row may be written.
Posts that carry the token, or a bearer token instead of a session, go through.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from streams_app.audit.models import AuditEvent
from tests.console.helpers import api, bearer, group_url, post_json, stream_url
from tests.console.services.helpers import ADMIN_ACTIONS, API_ADMIN_ACTIONS, OPERATIONS, Action, snapshot

# ------------------------------------------------------------------------------ anonymous and GET


def test_anonymous_posts_are_sent_to_login_or_get_401(client: Client, db, bus) -> None:
    url, data = OPERATIONS[0].html(bus)
    assert client.post(url, data).status_code == 302
    url, body = OPERATIONS[0].api(bus)
    assert client.post(url, json.dumps(body), content_type="application/json").status_code == 401
    assert not AuditEvent.objects.exists()


def test_anonymous_admin_posts_are_sent_to_login_or_get_401(client: Client, db, bus) -> None:
    for action in API_ADMIN_ACTIONS:
        url, data = action.html(bus)
        assert client.post(url, data).status_code == 302
        assert action.api is not None
        url, body = action.api(bus)
        assert client.post(url, json.dumps(body), content_type="application/json").status_code == 401
    assert not AuditEvent.objects.exists()


@pytest.mark.parametrize("action", OPERATIONS, ids=lambda a: a.name)
def test_get_on_an_action_changes_nothing(operator_client: Client, bus, action: Action) -> None:
    before = snapshot(bus.r)
    url, _ = action.html(bus)
    assert operator_client.get(url).status_code == 405
    url, _ = action.api(bus)
    assert operator_client.get(url).status_code == 405
    assert snapshot(bus.r) == before


@pytest.mark.parametrize("action", ADMIN_ACTIONS, ids=lambda a: a.name)
def test_get_on_an_admin_action_changes_nothing(admin_client_: Client, bus, action: Action) -> None:
    before = snapshot(bus.r)
    url, _ = action.html(bus)
    assert admin_client_.get(url).status_code == 405
    if action.api is not None:
        url, _ = action.api(bus)
        assert admin_client_.get(url).status_code == 405
    assert snapshot(bus.r) == before
    assert not AuditEvent.objects.exists()


# ------------------------------------------------------------------------------------------- CSRF


def test_csrf_less_posts_are_refused_for_sessions(operator, bus) -> None:
    web = Client(enforce_csrf_checks=True)
    web.force_login(operator)
    before = snapshot(bus.r)
    url, data = OPERATIONS[0].html(bus)
    assert web.post(url, data).status_code == 403
    url, body = OPERATIONS[0].api(bus)
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
    url, data = OPERATIONS[0].html(bus)
    assert web.post(url, {**data, "csrfmiddlewaretoken": token}).status_code == 302
    url, body = OPERATIONS[0].api(bus)
    reply = web.post(url, json.dumps(body), content_type="application/json", HTTP_X_CSRFTOKEN=token)
    assert reply.status_code == 200


def test_bearer_tokens_need_no_csrf_token(operator, api_token, bus) -> None:
    url, body = OPERATIONS[0].api(bus)
    reply = post_json(url, body, api_token(operator), web=Client(enforce_csrf_checks=True))
    assert reply.status_code == 200


@pytest.mark.parametrize("action", ADMIN_ACTIONS, ids=lambda a: a.name)
def test_csrf_less_posts_are_refused_for_admin_sessions(admin_user, bus, action: Action) -> None:
    web = Client(enforce_csrf_checks=True)
    web.force_login(admin_user)
    before = snapshot(bus.r)
    url, data = action.html(bus)
    assert web.post(url, data).status_code == 403
    if action.api is not None:
        url, body = action.api(bus)
        refused = web.post(url, json.dumps(body), content_type="application/json")
        assert refused.status_code == 403
        assert refused.json()["error"]["code"] == "csrf_failed"
    assert snapshot(bus.r) == before
    assert not AuditEvent.objects.exists()  # refused before any view ran


def test_admin_posts_with_the_csrf_token_work(admin_user, bus) -> None:
    web = Client(enforce_csrf_checks=True)
    web.force_login(admin_user)
    web.get(stream_url("orders"))  # sets the CSRF cookie, as a browser would
    token = web.cookies["csrftoken"].value
    done = web.post(stream_url("orders") + "delete/", {"ids": [bus.ids[9]], "csrfmiddlewaretoken": token})
    assert done.status_code == 302
    reply = web.post(
        api(stream_url("orders") + "trim"), json.dumps({"maxlen": 100}), content_type="application/json",
        HTTP_X_CSRFTOKEN=token,
    )
    assert reply.status_code == 200
    assert bus.r.xlen("orders") == 9


# --------------------------------------------------------------------------------------- bad JSON


@pytest.mark.parametrize("body", [b"{not json", b"[1, 2]", b'"text"', b"\xff\xfe"])
def test_bad_json_is_a_400_json_error(operator, api_token, bus, body: bytes) -> None:
    reply = Client().post(
        api(group_url("orders", "billing") + "claim"), body, content_type="application/json",
        **bearer(api_token(operator)),
    )
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "bad_request"
