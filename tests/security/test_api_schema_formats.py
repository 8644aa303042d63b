"""Numbers and date-times in the JSON API: what the OpenAPI document describes is what the server takes.

Each was found by the API fuzzer (``test_fuzz.py``): a count sent as ``2.0``, an audit ``since`` the
schema described as any string, a date-time pattern that let through dates the server refuses.
"""

from __future__ import annotations

import re
from typing import Any

import pytest
import redis
from django.test import Client

from streams_app.views.api.openapi import openapi_document
from tests.console.helpers import bearer, post_json
from tests.console.services.helpers import orders_bus


@pytest.mark.parametrize("body", [
    {"consumer": "sweeper", "min_idle_ms": 0.0, "count": 2.0},
    {"consumer": "sweeper", "min_idle_ms": 1e3},
])
def test_integral_json_numbers_are_integers(operator, api_token, r: redis.Redis, body: dict[str, Any]) -> None:
    """JSON Schema's ``integer`` is any number with a zero fraction, so the document says ``2.0`` is a
    count; the fuzzer sent ``{"min_idle_ms": 0.0}`` and got a 400. A fraction stays a 400."""
    orders_bus(r)
    url = "/api/v1/c/default/streams/orders/groups/billing/autoclaim"
    reply = post_json(url, body, api_token(operator))
    assert reply.status_code == 200, reply.content
    refused = post_json(url, {**body, "min_idle_ms": 0.5}, api_token(operator))
    assert refused.status_code == 400 and refused.json()["error"]["message"].startswith("min_idle_ms:")


def test_audit_since_takes_what_its_schema_describes(viewer, api_token) -> None:
    """``since`` was described as any string; the fuzzer sent ``ø`` and ``0`` and got 400s. The schema
    now gives the date-time pattern the server checks, and a value outside it is refused."""
    schema = next(p["schema"] for p in openapi_document()["paths"]["/api/v1/audit/"]["get"]["parameters"]
                  if p["name"] == "since")
    pattern = re.compile(schema["pattern"])
    web, token = Client(), api_token(viewer)
    for value in ("2026-11-22T10:30:00Z", "2026-11-22T10:30", "2026-11-22T10:30:00.5+02:00"):
        assert pattern.search(value), value
        assert web.get("/api/v1/audit/", {"since": value}, **bearer(token)).status_code == 200, value
    for value in ("0", "ø", "", "2026-11-22", "1700000000000-0"):
        assert not pattern.search(value), value
        reply = web.get("/api/v1/audit/", {"since": value}, **bearer(token))
        assert reply.status_code == 400 and reply.json()["error"]["message"].startswith("since:"), value


def test_date_times_are_described_exactly(admin_user, api_token, r: redis.Redis) -> None:
    """The date-time pattern let through ``1279-97-34T04:49`` and ``0000-00-00T00:00``, which the
    server refuses; it now describes real calendar date-times from 1970 on, and they are taken."""
    replay = openapi_document()["components"]["schemas"]["ReplayBody"]["properties"]["start"]
    pattern = re.compile(next(form["pattern"] for form in replay["anyOf"] if "T" in form["pattern"]))
    for value in ("1279-97-34T04:49", "0000-00-00T00:00", "1969-12-31T23:59Z", "2026-02-29T10:00",
                  "2026-04-31T10:00", "2026-11-22T24:00", "2026-11-22T10:60", "2026-11-22T10:30+24:00"):
        assert not pattern.search(value), value
    orders_bus(r)
    token = api_token(admin_user)
    for value in ("2024-02-29T10:00", "2000-02-29T00:00:00.123456Z", "2026-12-31T23:59:59+23:59", "1970-01-01T00:00"):
        assert pattern.search(value), value
        reply = post_json("/api/v1/c/default/streams/orders/trim", {"minid": value, "dry_run": True}, token)
        assert reply.status_code == 200, (value, reply.content)
