"""Every API action address (spelled without a trailing slash) answers the same view with one, found by
walking the URL resolver; an ack through the slashed address acks (XPENDING read back).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import redis
from django.urls import resolve

from tests.console.helpers import api, group_url, post_json
from tests.console.services.helpers import orders_bus
from tests.security.api_paths import api_patterns, filled


@pytest.fixture
def bus(r: redis.Redis) -> SimpleNamespace:
    return orders_bus(r)


def action_routes() -> list[str]:
    """API routes spelled without a trailing slash (actions, a job, the export), bar the document."""
    return sorted(
        route for route, _ in api_patterns() if not route.endswith("/") and not route.endswith(".json")
    )


def test_every_action_address_also_answers_with_a_trailing_slash() -> None:
    routes = action_routes()
    assert len(routes) >= 20
    for route in routes:
        plain, slashed = resolve(filled(route)), resolve(filled(route) + "/")
        assert slashed.func is plain.func and slashed.kwargs == plain.kwargs, route


def test_ack_with_a_trailing_slash_acks(operator, api_token, bus) -> None:
    reply = post_json(api(group_url("orders", "billing") + "ack/"), {"ids": bus.ids[:2]}, api_token(operator))
    assert reply.status_code == 200, reply.content
    still = [p["message_id"].decode() for p in bus.r.xpending_range("orders", "billing", "-", "+", 100)]
    assert still == bus.ids[2:4]
