"""Every action tried by every role, through the pages and the JSON API: who may, and what a refusal leaves.

One check per interface serves both tables, ``OPERATIONS`` (operator actions, two of them admin-only)
and ``ADMIN_ACTIONS``. Each post must leave exactly one audit row naming the action, the user, the
connection and the target stream; an allowed post answers the action's success status with no error
message and an ``ok`` row; a refused one answers 403 saying which role is needed, writes a ``denied``
row, and leaves Redis as ``snapshot`` read it before.
"""

from __future__ import annotations

import pytest
from django.contrib.messages import get_messages
from django.test import Client

from streams_app.audit.models import AuditEvent
from tests.console.helpers import CONN, post_json
from tests.console.services.helpers import (
    ADMIN_ACTIONS,
    API_ADMIN_ACTIONS,
    OPERATIONS,
    ROLES,
    Action,
    action_id,
    snapshot,
)


def check_html_action(request, bus, action: Action, role: str) -> None:
    user = request.getfixturevalue(role)
    web = Client()
    web.force_login(user)
    url, data = action.html(bus)
    before = snapshot(bus.r)
    response = web.post(url, data)
    event = AuditEvent.objects.get()  # exactly one row, whatever happened
    assert (event.action, event.username, event.connection) == (action.name, user.username, CONN)
    assert bytes(event.target_stream) == action.stream.encode()
    if action.allowed(role):
        assert response.status_code == action.html_ok, response.content[:300]
        errors = [m.message for m in get_messages(response.wsgi_request) if m.level_tag == "error"]
        assert not errors
        assert event.outcome == "ok", event.error
    else:
        assert response.status_code == 403
        assert f"{action.needs} role" in response.content.decode()
        assert event.outcome == "denied"
        assert snapshot(bus.r) == before


def check_api_action(request, api_token, bus, action: Action, role: str) -> None:
    user = request.getfixturevalue(role)
    assert action.api is not None
    url, body = action.api(bus)
    before = snapshot(bus.r)
    response = post_json(url, body, api_token(user))
    event = AuditEvent.objects.get()
    assert (event.action, event.username) == (action.name, user.username)
    if action.allowed(role):
        assert response.status_code == action.api_ok, response.content
        assert event.outcome == "ok", event.error
    else:
        assert response.status_code == 403
        assert response.json()["error"]["code"] == "forbidden"
        assert event.outcome == "denied"
        assert snapshot(bus.r) == before


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", OPERATIONS, ids=action_id)
def test_html_action_for_each_role(request, bus, action: Action, role: str) -> None:
    check_html_action(request, bus, action, role)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", OPERATIONS, ids=action_id)
def test_api_action_for_each_role(request, api_token, bus, action: Action, role: str) -> None:
    check_api_action(request, api_token, bus, action, role)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", ADMIN_ACTIONS, ids=action_id)
def test_html_admin_action_for_each_role(request, bus, action: Action, role: str) -> None:
    check_html_action(request, bus, action, role)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", API_ADMIN_ACTIONS, ids=action_id)
def test_api_admin_action_for_each_role(request, api_token, bus, action: Action, role: str) -> None:
    check_api_action(request, api_token, bus, action, role)
