"""The masking matrix (docs/api.md#masking; docs/decisions.md#masking-and-roles-at-one-chokepoint-each).

Canary values sit in Redis under masking rules: in a stream's payload (a JSON path, masked), in a whole
field (hashed), in a dead letter's error (masked) and payload (masked by its origin's rule), in the bus's
delayed retries and in a progress stream's events. Then every route of the URL resolver (the route
matrix's own walk, admin site included), each export format, each job download, the websocket tail and
the progress SSE endpoint are requested as every role, and no canary may come back, unless the role may
reveal, asked to (``?unmasked=1``) and the request wrote a ``payload.reveal`` audit row.

Each console route has a row in :data:`ROWS` saying whether its page shows entry bytes; a route that
does must show the masked form (``••••`` or the canary's hash, spelled out here with hmac/hashlib), which
proves the request really reached the payload rather than an error page. A new route without a row
fails :func:`test_every_route_has_a_masking_row`. The rows, canaries and checks are in
``tests/security/masking_world.py``; exports, job downloads, the tail, the progress stream and the
command line are checked in ``tests/security/test_masking_matrix_outputs.py``.

What the user typed is not a leak: a search for a canary may echo the query, so the search routes are
checked by what they found (nothing), and the sweeps run before any request carries a canary.
"""

from __future__ import annotations

import pytest

from tests.console.conftest import logged_in
from tests.console.helpers import CONN, seg
from tests.security import masking_world
from tests.security.masking_world import (
    CANARIES,
    CARD,
    ERROR,
    NONE,
    ROWS,
    SSN,
    leaked,
    reveals,
    shows_masked,
    text_of,
)
from tests.security.routes import SIGNED_IN, World, all_routes, url_of
from tests.security.routes import world as route_world  # noqa: F401 - the fixture

# The matrix's world with the canaries written in (tests/security/masking_world.py), as this module's fixture.
world = masking_world.world


def test_every_route_has_a_masking_row() -> None:
    console = {f.route for f in all_routes() if not f.admin_site}
    assert sorted(console - set(ROWS)) == [], "routes without a row in ROWS: say whether they show entry bytes"
    assert sorted(set(ROWS) - console) == [], "rows in ROWS for routes that no longer exist"


@pytest.mark.parametrize("role", SIGNED_IN)
def test_no_route_shows_a_canary(world: World, role: str) -> None:
    client = logged_in(world.users[role])
    problems: list[str] = []
    for found in all_routes():
        if "logout" in (found.pattern.name or ""):
            continue
        row = NONE if found.admin_site else ROWS[found.route]
        path = url_of(found, world)
        for method in ("GET", "POST"):
            full = path + (row.query if method == "GET" else "")
            if method == "GET":
                response = client.get(full)
            else:
                kind = "application/json" if path.startswith("/api/") else "application/x-www-form-urlencoded"
                response = client.post(path, "", content_type=kind)
            text = text_of(response)
            if leaked(text):
                problems.append(f"{method} {full} as {role}: {leaked(text)}")
            if method == "GET" and row.shows and response.status_code == 200 and not shows_masked(text):
                problems.append(f"GET {full} as {role}: 200 without the masked form (did it reach the entries?)")
            if method == "GET" and row.shows and response.status_code != 200:
                problems.append(f"GET {full} as {role}: {response.status_code}, expected the page")
    assert problems == []


@pytest.mark.parametrize("role", SIGNED_IN)
def test_asking_to_reveal_shows_only_with_the_role_and_an_audit_row(world: World, role: str) -> None:
    client = logged_in(world.users[role])
    problems: list[str] = []
    for found in all_routes():
        if found.admin_site or not ROWS[found.route].shows:
            continue
        row = ROWS[found.route]
        path = url_of(found, world) + (row.query + "&" if row.query else "?") + "unmasked=1"
        before = reveals(world.users[role])
        response = client.get(path)
        text = text_of(response)
        wrote = reveals(world.users[role]) - before
        if role == "admin":
            # a page that reveals says so in the audit log; one that never reveals (a search, an export,
            # the SSE stream) must not show the values at all
            if leaked(text) and wrote != 1:
                problems.append(f"GET {path} as admin: {leaked(text)} shown with {wrote} reveal rows")
        elif leaked(text) or response.status_code not in (200, 403):
            problems.append(f"GET {path} as {role}: {response.status_code} {leaked(text)}")
    assert problems == []


def test_the_admin_reveals_where_pages_offer_it(world: World) -> None:
    """The exception above is real: an admin asking on the entry page sees the value, with its row."""
    client = logged_in(world.users["admin"])
    path = f"/c/{CONN}/streams/orders/entries/{world.values['entry_id']}/?unmasked=1"
    before = reveals(world.users["admin"])
    text = text_of(client.get(path))
    assert SSN in text and CARD in text and reveals(world.users["admin"]) == before + 1


@pytest.mark.parametrize("role", SIGNED_IN)
def test_search_finds_no_canary(world: World, role: str) -> None:
    client = logged_in(world.users[role])
    api = f"/api/v1/c/{CONN}/streams/orders/search/"
    for q in (*CANARIES, f'data.ssn == "{SSN}"', f'card == "{CARD}"', 'data.ssn.startsWith("canary")'):
        reply = client.get(api, {"q": q})
        assert reply.status_code == 200 and reply.json()["matches"] == [], (role, q)
    dlq = client.get(f"/api/v1/c/{CONN}/dlq/{seg('orders:dlq')}/", {"error": ERROR})
    assert dlq.status_code == 200 and dlq.json()["entries"] == []  # the DLQ's error filter sees it masked
