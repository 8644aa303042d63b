"""What a refused API caller is told: a token capped below its account's role names the token's cap, not
the account's role; an uncapped viewer is told its account's role. Nothing is acked (XPENDING read back).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import redis

from streams_app.accounts.tokens import token_create
from tests.console.helpers import api, group_url, post_json
from tests.console.services.helpers import orders_bus


@pytest.fixture
def bus(r: redis.Redis) -> SimpleNamespace:
    return orders_bus(r)


def test_a_viewer_capped_token_on_an_admin_account_is_told_the_token_limits_it(admin_user, bus) -> None:
    _, raw = token_create(user=admin_user, name="read-only script", role_ceiling="viewer")
    reply = post_json(api(group_url("orders", "billing") + "ack"), {"ids": bus.ids[:1]}, raw)
    assert reply.status_code == 403
    message = reply.json()["error"]["message"]
    assert "your account has the viewer role" not in message
    assert "token" in message and "viewer" in message and "admin" in message, message
    assert len(bus.r.xpending_range("orders", "billing", "-", "+", 100)) == 4


def test_an_uncapped_viewer_is_told_its_account_role(viewer, api_token, bus) -> None:
    reply = post_json(api(group_url("orders", "billing") + "ack"), {"ids": bus.ids[:1]}, api_token(viewer))
    assert reply.status_code == 403
    assert "your account has the viewer role" in reply.json()["error"]["message"]
