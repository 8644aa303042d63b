"""API edges: duplicate JSON keys, 404s under DEBUG, action addresses with a
trailing slash, and what a token capped below its account's role is told.

Redis is read back with XLEN, XPENDING and XRANGE; routes come from walking Django's URL resolver, so a new
body-taking or action route is covered without a new row here.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import redis
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver, resolve

from streams_app.accounts.tokens import token_create
from streams_app.saved.models import SavedView
from streams_app.views.api.endpoint import views_of
from tests.console.helpers import api, bearer, group_url, post_json, stream_url
from tests.console.services.helpers import orders_bus, snapshot

_CONVERTER = re.compile(r"<(?:(\w+):)?(\w+)>")
_VALUES = {"conn": "default", "seg": "orders", "int": "1"}


@pytest.fixture
def bus(r: redis.Redis) -> SimpleNamespace:
    return orders_bus(r)


def api_patterns() -> Iterator[tuple[str, URLPattern]]:
    def walk(patterns: list, prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for item in patterns:
            route = prefix + str(item.pattern)
            if isinstance(item, URLResolver):
                yield from walk(item.url_patterns, route)
            elif route.startswith("api/v1/"):
                yield route, item

    yield from walk(get_resolver().url_patterns, "")


def filled(route: str) -> str:
    return "/" + _CONVERTER.sub(lambda m: _VALUES[m.group(1) or "str"], route)


def post_raw(url: str, raw: str, token: str):
    return Client().post(url, raw, content_type="application/json", **bearer(token))


# ---------------------------------------------------------------------------- duplicate JSON keys


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
        and view.api_endpoint.method == "POST" and view.api_endpoint.body is not None
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


# ------------------------------------------------------------------------------ 404s under DEBUG


@pytest.fixture(params=[True, False], ids=["DEBUG", "no DEBUG"])
def debug(request, settings) -> bool:
    settings.DEBUG = request.param
    return request.param


def _json_404(reply) -> None:
    assert reply.status_code == 404
    assert reply["Content-Type"] == "application/json", reply.content[:200]
    error = reply.json()["error"]
    assert error["code"] == "not_found" and error["message"]


def test_a_missing_job_is_a_json_404(debug, viewer_client: Client, operator_client: Client) -> None:
    _json_404(viewer_client.get("/api/v1/jobs/99999"))
    _json_404(viewer_client.get("/api/v1/jobs/99999/"))
    _json_404(operator_client.post("/api/v1/jobs/99999/cancel", "{}", content_type="application/json"))


def test_another_users_private_view_is_a_json_404(debug, viewer_client: Client, operator) -> None:
    theirs = SavedView.objects.create(owner=operator, name="mine", path="/c/default/streams/", shared=False)
    _json_404(viewer_client.post(f"/api/v1/views/{theirs.pk}/delete", "{}", content_type="application/json"))
    assert SavedView.objects.filter(pk=theirs.pk).exists()


def test_an_unknown_api_address_is_a_json_404(debug, viewer_client: Client) -> None:
    _json_404(viewer_client.get("/api/v1/no/such/address/"))


# ------------------------------------------------------------------- action addresses with a slash


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


# ------------------------------------------------------------------------- a capped token's refusal


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
