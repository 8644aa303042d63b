"""A method a route does not take is a 405 in the caller's language: on the API, a JSON error
(``method_not_allowed``) with an ``Allow`` header; on pages, actions and Django's own class-based views, the
console's HTML page naming the method used and the ones allowed.

Real redis-server; the expected codes, headers and methods are spelled out by hand.
"""

from __future__ import annotations

import pytest
import redis
from django.test import Client

from tests.console.helpers import api, stream_api, stream_url


def test_api_method_not_allowed_is_a_json_error(viewer_client: Client, r: redis.Redis) -> None:
    r.xadd("s", {"a": "1"})
    r.xgroup_create("s", "g", id="0")
    response = viewer_client.get(stream_api("s", "groups/g/claim"))
    assert response.status_code == 405
    assert response["Content-Type"].startswith("application/json")
    assert response["Allow"] == "POST"
    error = response.json()["error"]
    assert error["code"] == "method_not_allowed"
    assert "GET" in error["message"] and "POST" in error["message"]


def test_api_read_refuses_post_with_a_json_error(viewer_client: Client, db) -> None:
    response = viewer_client.post(api("/connections/"), b"", content_type="application/json")
    assert response.status_code == 405
    assert response.json()["error"]["code"] == "method_not_allowed"
    assert "GET" in response["Allow"]


@pytest.mark.parametrize(
    ("method", "path", "allowed"),
    [
        ("get", stream_url("s", "trim/"), "POST"),  # an action
        ("post", "/audit/", "GET"),  # a page
        ("get", "/logout/", "POST"),  # Django's own class-based view
    ],
)
def test_page_method_not_allowed_is_a_page(viewer_client: Client, r: redis.Redis, method: str, path: str,
                                           allowed: str) -> None:
    r.xadd("s", {"a": "1"})
    response = getattr(viewer_client, method)(path)
    assert response.status_code == 405
    assert response["Content-Type"].startswith("text/html")
    assert allowed in response["Allow"]
    body = response.content.decode()
    assert "405" in body and method.upper() in body and allowed in body
    assert "<html" in body  # the console's page, not an empty body
