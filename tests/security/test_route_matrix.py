"""Every route of the URL resolver, GET and POST, for every role: the documented answer, never a 5xx.

The routes come from walking ``busconsole.urls`` (includes and all), so a new route cannot be left out:
each console route must have a row in ``tests/security/routes.py``'s ``ROUTES`` (the test fails naming
the ones that have none, or rows whose route is gone), and every route of the Django admin site follows
one rule. Converters are filled with real objects made for the test (the ``world`` fixture of
``tests/security/routes.py``). Each filled URL must resolve to the very pattern it was made for, and the
number of URLs requested must equal the number of patterns in the resolver.

Roles: anonymous, ``outsider`` (an inactive account with a session), viewer, operator, admin. POSTs carry
an empty body (an empty form, or an empty JSON body for the API): a role check comes before any reading
of the input, so a viewer gets 403 from every mutation whatever it sent, and nobody gets a 5xx.
"""

from __future__ import annotations

import json
from dataclasses import replace

import pytest
from django.test import Client
from django.urls import get_resolver, resolve

from tests.console.conftest import logged_in
from tests.security import routes
from tests.security.routes import (
    ROLES,
    ROUTES,
    SIGNED_IN,
    Found,
    Route,
    World,
    all_routes,
    count_patterns,
    url_of,
)

# The matrix's world of real objects (tests/security/routes.py), as a fixture of this module.
world = routes.world

# ------------------------------------------------------------------------------- the checks


def _is_api(path: str) -> bool:
    return path.startswith("/api/")


def _login_redirect(response) -> bool:
    location = response.get("Location", "")
    return response.status_code == 302 and location.split("?")[0].endswith("/login/")


def problem(found: Found, route: Route | None, role: str, method: str, path: str, response) -> str | None:
    """What is wrong with ``response``, or None when it is the documented answer."""
    status = response.status_code
    if status >= 500:
        return f"{status}"
    if _is_api(path) and status >= 400:
        try:
            error = json.loads(response.content)["error"]
            assert isinstance(error["code"], str) and isinstance(error["message"], str)
        except (ValueError, KeyError, TypeError, AssertionError):
            return f"{status} without the JSON error shape: {response.content[:120]!r}"
    if status == 405 and (not response.content or not response.get("Allow")):
        return "405 with an empty body or no Allow header"
    if found.admin_site:
        return _admin_site_problem(found, role, response)
    assert route is not None
    if role not in SIGNED_IN and not route.public:
        if method == "POST" and route.post == "none" and status == 405:
            return None  # nobody may POST there: refusing the method first gives nothing away
        if _is_api(path) and not route.html:
            ok = status == 401 and json.loads(response.content)["error"]["code"] == "unauthorized"
            return None if ok else f"{status}, expected 401 unauthorized"
        return None if _login_redirect(response) else f"{status}, expected a redirect to /login/"
    expected = _expected(route, role, method)
    if isinstance(expected, int):
        return None if status == expected else f"{status}, expected {expected}"
    return None if status not in expected else f"{status}, expected anything but {sorted(expected)}"


def _expected(route: Route, role: str, method: str) -> int | set[int]:
    """An exact status, or the set of statuses that would be wrong (a mutation's own 2xx/3xx/4xx vary)."""
    signed_in = role in SIGNED_IN
    if method == "GET":
        kind = route.get
        if kind == "read" or kind == "public":
            return 200
        if kind == "admin":
            return 200 if role == "admin" else 403
        if kind == "post":
            return 405
        if kind == "login":
            return 302 if signed_in else 200
        if kind == "admin-login":
            return {"admin": 302, "viewer": 403, "operator": 403}.get(role, 200)
        if kind == "token":
            return 401
        if kind == "refused":
            return set(range(200, 400))
        raise AssertionError(f"unknown GET kind {kind}")
    kind = route.post
    if kind == "none":
        return 405
    if kind in ("public", "login"):
        return {403, 405} if signed_in else (200 if kind == "login" else {403, 405})
    if kind == "admin-login":
        return {"admin": 302, "viewer": 403, "operator": 403}.get(role, 200)
    if kind == "any":
        return {403, 405}
    if kind == "owner":  # the world's job is nobody's: someone else's for every role
        kind = "operator"
    least = SIGNED_IN.index(kind)
    return 403 if SIGNED_IN.index(role) < least else {403, 405}


def _admin_site_problem(found: Found, role: str, response) -> str | None:
    """The Django admin: only console admins get in; everyone else is sent to a login page or refused.

    What an admin sees there belongs to the admin site's own tests; here it must simply not fail.
    """
    status = response.status_code
    if role == "admin":
        return None
    if found.pattern.name == "login":  # the login form, or a refusal of a role the admin will not let in
        return None if status in (200, 403) or _login_redirect(response) else f"{status} on the admin login"
    if status in (403, 404) or _login_redirect(response):
        return None
    if status == 302 and role in SIGNED_IN and found.pattern.name == "logout":
        return None  # logging out is open to anyone signed in
    return f"{status}, expected a redirect to a login page or a refusal"


# ------------------------------------------------------------------------------------ the tests


def test_every_route_has_a_row_and_every_row_a_route() -> None:
    found = all_routes()
    console = {f.route for f in found if not f.admin_site}
    assert sorted(console - set(ROUTES)) == [], "routes without a row in ROUTES: add their documented answers"
    assert sorted(set(ROUTES) - console) == [], "rows in ROUTES for routes that no longer exist"
    assert len(found) == count_patterns(get_resolver().url_patterns)


def _client(world: World, role: str) -> Client:
    user = world.users[role]
    return Client() if user is None else logged_in(user)


def _request(client: Client, method: str, path: str):
    if method == "GET":
        return client.get(path)
    if _is_api(path):
        return client.post(path, b"", content_type="application/json")
    return client.post(path, "", content_type="application/x-www-form-urlencoded")


@pytest.mark.parametrize("method", ["GET", "POST"])
@pytest.mark.parametrize("role", ROLES)
def test_role_matrix(world: World, role: str, method: str) -> None:
    found = all_routes()
    client = _client(world, role)
    problems: list[str] = []
    requested = 0
    for item in found:
        route = None if item.admin_site else ROUTES[item.route]
        path = url_of(item, world)
        # the filled URL reaches its own route (the admin site's login is shadowed by the console's, same route)
        match = resolve(path)
        assert match.route == item.route, f"{path} resolves to {match.route}, not to {item.route}"
        requested += 1
        full = path + (route.query if route else "")
        logout = "logout" in (item.pattern.name or "")
        # logging out ends the session: it gets a client of its own
        response = _request(_client(world, role) if logout else client, method, full)
        trouble = problem(item, route, role, method, path, response)
        if trouble:
            problems.append(f"{method} {full} as {role}: {trouble}")
        if route is not None and route.post == "owner" and method == "POST" and role in SIGNED_IN:
            # the same route on a job of the role's own user: allowed to every role, viewers included
            own = url_of(item, replace(world, values={**world.values, "job_id": world.own_jobs[role]}))
            status = _request(client, method, own).status_code
            if status in (403, 405) or status >= 500:
                problems.append(f"{method} {own} as {role} (their own job): {status}, expected it allowed")
    assert requested == count_patterns(get_resolver().url_patterns)
    assert problems == []


@pytest.mark.parametrize("role", SIGNED_IN)
def test_metrics_open_to_a_token_of_every_role(world: World, role: str) -> None:
    response = Client().get("/metrics", HTTP_AUTHORIZATION=f"Bearer {world.tokens[role]}")
    assert response.status_code == 200
    assert b"busconsole_stream_length" in response.content
