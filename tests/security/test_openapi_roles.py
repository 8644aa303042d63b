"""The role the OpenAPI document gives each operation (``x-role``) is the role the console enforces.

The document's role comes from ``ACTION_ROLES`` (the table the gate checks), not from a second
declaration on the view. Two checks:

- every operation of the document is called for real as viewer, operator and admin, in the route
  matrix's world (``tests/security/routes.py``: real objects, the test Redis), with an empty
  body: a role below ``x-role`` gets the API's 403 ``forbidden``, the others anything but a 403 (the role
  check comes before the input is read, so an empty body still tells);
- raising an action's role in ``ACTION_ROLES`` moves the document's ``x-role`` and the enforced role
  together, so nothing else declares it.
"""

from __future__ import annotations

import json

import pytest
from django.test import Client

from streams_app import services
from streams_app.accounts.roles import Role
from streams_app.views.api.openapi import openapi_document, openapi_path
from tests.console.conftest import logged_in
from tests.security import routes
from tests.security.routes import SIGNED_IN, World, all_routes, url_of

# The route matrix's world of real objects (tests/security/routes.py), as a fixture of this module.
world = routes.world

_METHODS = ("get", "post")


@pytest.fixture
def fresh_document():
    """The document is built once per process; a test that changes the role table builds it again."""
    openapi_document.cache_clear()
    yield
    openapi_document.cache_clear()


def _operations(world: World) -> list[tuple[str, str, str, str]]:
    """(operationId, method, a filled URL, x-role) for every operation the document lists."""
    by_path = {}
    for found in all_routes():
        if found.route.startswith("api/v1/") and not found.admin_site:
            by_path.setdefault(openapi_path(found.route), found)
    out = []
    for path, item in openapi_document()["paths"].items():
        assert path in by_path, f"{path} is documented but no route serves it"
        for method in _METHODS:
            if method in item:
                out.append((item[method]["operationId"], method, path, item[method]["x-role"]))
    assert out, "the document lists no operations"
    return out


def _call(world: World, role: str, method: str, path: str) -> tuple[int, str]:
    """The answer to ``role`` calling the operation with an empty body (a job route: the role's own job,
    which any role may cancel)."""
    found = next(f for f in all_routes() if f.route.startswith("api/v1/") and openapi_path(f.route) == path)
    values = {**world.values, "job_id": world.own_jobs[role]}
    url = url_of(found, World(values, world.users, world.tokens, world.own_jobs))
    client: Client = logged_in(world.users[role])
    response = client.get(url) if method == "get" else client.post(url, b"", content_type="application/json")
    code = ""
    if response.status_code == 403 and response.get("Content-Type", "").startswith("application/json"):
        code = json.loads(response.content)["error"]["code"]
    return response.status_code, code


def test_every_operation_enforces_the_role_it_documents(world: World) -> None:
    problems = []
    for operation, method, path, documented in _operations(world):
        least = SIGNED_IN.index(documented)
        for index, role in enumerate(SIGNED_IN):
            status, code = _call(world, role, method, path)
            if index < least and (status, code) != (403, "forbidden"):
                problems.append(f"{operation} ({method.upper()} {path}) as {role}: {status}, documented {documented}")
            if index >= least and status == 403:
                problems.append(f"{operation} ({method.upper()} {path}) as {role}: 403, documented {documented}")
    assert problems == []


def test_the_documented_role_follows_action_roles(world: World, fresh_document, monkeypatch) -> None:
    """Claiming needs an operator; raised to admin in the table, the document and the check both move."""
    before = {op: role for op, _, _, role in _operations(world)}
    assert before["claim"] == "operator"
    monkeypatch.setitem(services.ACTION_ROLES, "claim", Role.ADMIN)
    openapi_document.cache_clear()
    after = {op: (method, path, role) for op, method, path, role in _operations(world)}
    method, path, documented = after["claim"]
    assert documented == "admin"
    assert _call(world, "operator", method, path) == (403, "forbidden")
    assert _call(world, "admin", method, path)[0] != 403
    # nothing else moved
    assert {op: role for op, (_, _, role) in after.items() if op != "claim"} == {
        op: role for op, role in before.items() if op != "claim"
    }
