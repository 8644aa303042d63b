"""Read-only mode (``BUSCONSOLE_READ_ONLY``) refuses every action to every role, admins included.

Each action of ``OPERATIONS`` and ``ADMIN_ACTIONS`` is posted from a page and, where it has one, through
the API: both answer 403 saying "read-only", each post leaves one ``denied`` audit row, and Redis is
left as ``snapshot`` read it before.
"""

from __future__ import annotations

import pytest
from django.test import Client

from streams_app.audit.models import AuditEvent
from tests.console.helpers import post_json
from tests.console.services.helpers import ADMIN_ACTIONS, OPERATIONS, ROLES, Action, action_id, snapshot


def check_read_only(request, settings, api_token, bus, action: Action, role: str) -> None:
    settings.BUSCONSOLE_READ_ONLY = True
    user = request.getfixturevalue(role)
    before = snapshot(bus.r)
    web = Client()
    web.force_login(user)
    url, data = action.html(bus)
    page = web.post(url, data)
    assert page.status_code == 403
    assert "read-only" in page.content.decode()
    expected = [(action.name, "denied")]
    if action.api is not None:
        url, body = action.api(bus)
        reply = post_json(url, body, api_token(user))
        assert reply.status_code == 403
        assert "read-only" in reply.json()["error"]["message"]
        expected *= 2
    assert snapshot(bus.r) == before
    assert list(AuditEvent.objects.values_list("action", "outcome")) == expected


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", OPERATIONS, ids=action_id)
def test_read_only_mode_refuses_every_action_to_everyone(request, settings, api_token, bus, action, role) -> None:
    assert action.api is not None  # every operation has an API twin: two refusals, two rows
    check_read_only(request, settings, api_token, bus, action, role)


@pytest.mark.parametrize("role", ROLES)
@pytest.mark.parametrize("action", ADMIN_ACTIONS, ids=action_id)
def test_read_only_mode_refuses_every_admin_action_to_everyone(request, settings, api_token, bus, action, role) -> None:
    check_read_only(request, settings, api_token, bus, action, role)
