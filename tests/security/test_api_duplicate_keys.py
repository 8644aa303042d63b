"""A JSON body naming a key twice, at the top or nested, is a 400 that says which key, on every API route
that reads a body (found by walking the URL resolver), before the body model sees it; Redis is unchanged
(every key's DUMP compared), and a duplicated ``dry_run`` trims nothing.
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import redis

from streams_app.views.api.endpoint import views_of
from tests.console.helpers import api, stream_url
from tests.console.services.helpers import orders_bus, snapshot
from tests.security.api_paths import api_patterns, filled, post_raw


@pytest.fixture
def bus(r: redis.Redis) -> SimpleNamespace:
    return orders_bus(r)


def test_a_duplicated_dry_run_is_refused_and_trims_nothing(admin_user, api_token, bus) -> None:
    before = snapshot(bus.r)
    reply = post_raw(api(stream_url("orders") + "trim"), '{"maxlen": 1, "dry_run": true, "dry_run": false}',
                     api_token(admin_user))
    assert reply.status_code == 400, reply.content
    assert reply["Content-Type"] == "application/json"
    assert "dry_run" in reply.json()["error"]["message"]
    assert snapshot(bus.r) == before and bus.r.xlen("orders") == 10


def body_routes() -> list[str]:
    """Every API route with a POST view that reads a JSON body (its endpoint declares a body model)."""
    return sorted(
        route
        for route, pattern in api_patterns()
        for view in views_of(pattern.callback)
        if getattr(view, "api_endpoint", None) is not None
        and view.api_endpoint.method == "POST" and view.api_endpoint.body is not None  # type: ignore[attr-defined]  # getattr above found the record on the view
    )


def test_every_body_route_is_found() -> None:
    assert len(body_routes()) >= 15


@pytest.mark.parametrize("route", body_routes())
def test_every_api_body_refuses_a_duplicated_key(route: str, admin_user, api_token, bus) -> None:
    """Refused as a duplicate, before the body model sees it (which would call the key unknown)."""
    before = snapshot(bus.r)
    token = api_token(admin_user)
    top = post_raw(filled(route), '{"dry_run": true, "twice": 1, "twice": 2}', token)
    nested = post_raw(filled(route), '{"options": {"inner_key": 1, "inner_key": 2}}', token)
    for answer, key in ((top, "twice"), (nested, "inner_key")):
        assert answer.status_code == 400, (route, answer.content)
        message = answer.json()["error"]["message"]
        assert f'"{key}"' in message and "more than once" in message, message
    assert snapshot(bus.r) == before
