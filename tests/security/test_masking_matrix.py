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
fails :func:`test_every_route_has_a_masking_row`.

What the user typed is not a leak: a search for a canary may echo the query, so the search routes are
checked by what they found (nothing), and the sweeps run before any request carries a canary.
"""

from __future__ import annotations

import asyncio
import io
import json
from dataclasses import dataclass, replace

import msgpack
import pyarrow.parquet as pq
import pytest
import redis
from django.contrib.auth.models import User
from django.utils import timezone

from busconsole.env import parse_mask_rules
from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner
from streams_app.lake.models import ErrorSignatureRollup
from streams_app.redis_ops.retries import retry_set
from tests.conftest import session_cookie
from tests.console.conftest import logged_in
from tests.console.helpers import CONN, seg
from tests.console.masking.test_masked_paths import expected_hash
from tests.security.routes import ROUTES, SIGNED_IN, World, all_routes, url_of
from tests.security.routes import world as route_world  # noqa: F401 - the fixture

SSN = "canary-ssn-7c1e9d"  # data.ssn of orders: masked
CARD = "canary-card-52a8"  # the whole card field of orders: hashed
ERROR = "canary-error-31f0"  # dlq_error of orders:dlq: masked
CANARIES = (SSN, CARD, ERROR)
MASK = "••••"

RULES = [
    {"stream": "orders", "field": "data.ssn", "action": "mask"},
    {"stream": "orders", "field": "card", "action": "hash"},
    {"stream": "orders:dlq", "field": "dlq_error", "action": "mask"},
    {"stream": "progress:*", "field": "data.ssn", "action": "mask"},
]


@dataclass(frozen=True)
class Row:
    """``shows``: the page shows entry bytes (so the masked form must be there); ``query``: what the
    GET carries to reach them."""

    shows: bool = False
    query: str = ""


NONE = Row()
SHOWS = Row(shows=True)

#: A route about no stream shows no entry bytes, unless it is listed below (as /reports/ is).
ROWS: dict[str, Row] = dict.fromkeys((route for route in ROUTES if "<seg:key>" not in route), NONE)
#: A route about a stream says whether it shows the stream's entries: a new one must be added here.
ROWS.update(
    dict.fromkeys(
        [
            "c/<conn:conn>/streams/<seg:key>/charts/",
            "c/<conn:conn>/streams/<seg:key>/handlers/",
            "c/<conn:conn>/streams/<seg:key>/replay/count/",
            "c/<conn:conn>/streams/<seg:key>/replay/",
            "c/<conn:conn>/streams/<seg:key>/trim/preview/",
            "c/<conn:conn>/streams/<seg:key>/trim/",
            "c/<conn:conn>/streams/<seg:key>/delete/preview/",
            "c/<conn:conn>/streams/<seg:key>/delete/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/charts/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/handlers/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/claim/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/autoclaim/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/autoclaim/confirm/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/ack/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/rewind/preview/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/rewind/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/delete/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/consumers/<seg:consumer>/delete/preview/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/consumers/<seg:consumer>/delete/",
            "c/<conn:conn>/dlq/<seg:key>/charts/",
            "c/<conn:conn>/dlq/<seg:key>/requeue/",
            "c/<conn:conn>/dlq/<seg:key>/requeue/confirm/",
            "c/<conn:conn>/dlq/<seg:key>/delete/",
            "c/<conn:conn>/dlq/<seg:key>/purge/",
            "c/<conn:conn>/streams/<seg:key>/export/job/",
            "c/<conn:conn>/streams/<seg:key>/retries/retry/",
            "c/<conn:conn>/streams/<seg:key>/retries/dead-letter/",
            "c/<conn:conn>/streams/<seg:key>/retries/delete/",
            "c/<conn:conn>/streams/<seg:key>/retries/all/preview/",
            "c/<conn:conn>/streams/<seg:key>/tail/",
            # the incident timeline: snapshots, alerts, actions (no parameters) and annotations, no entry
            "c/<conn:conn>/streams/<seg:key>/timeline/",
            "c/<conn:conn>/streams/<seg:key>/timeline/annotate/",
            "c/<conn:conn>/dlq/<seg:key>/search/requeue/confirm/",
            "c/<conn:conn>/dlq/<seg:key>/search/requeue/",
            "c/<conn:conn>/streams/<seg:key>/search/replay/confirm/",
            "c/<conn:conn>/streams/<seg:key>/search/replay/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/search/ack/confirm/",
            "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/search/ack/",
            "api/v1/c/<conn:conn>/streams/<seg:key>/",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/",
            "api/v1/c/<conn:conn>/streams/<seg:key>/replay",
            "api/v1/c/<conn:conn>/streams/<seg:key>/trim",
            "api/v1/c/<conn:conn>/streams/<seg:key>/delete",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/consumers/",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/claim",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/autoclaim",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/ack",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/rewind",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/delete",
            "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/consumers/<seg:consumer>/delete",
            "api/v1/c/<conn:conn>/dlq/<seg:key>/requeue",
            "api/v1/c/<conn:conn>/dlq/<seg:key>/delete",
            "api/v1/c/<conn:conn>/dlq/<seg:key>/purge",
            "api/v1/c/<conn:conn>/streams/<seg:key>/retries/retry",
            "api/v1/c/<conn:conn>/streams/<seg:key>/retries/dead-letter",
            "api/v1/c/<conn:conn>/streams/<seg:key>/retries/delete",
            "api/v1/c/<conn:conn>/dlq/<seg:key>/search/requeue",
            # a triage count's "requeue these": the confirm page names the filter and a count, no entry
            "c/<conn:conn>/dlq/<seg:key>/triage/requeue/confirm/",
            "c/<conn:conn>/dlq/<seg:key>/triage/requeue/",
            "api/v1/c/<conn:conn>/dlq/<seg:key>/triage/requeue",
        ],
        NONE,
    )
)
ROWS.update(
    {
        "c/<conn:conn>/streams/<seg:key>/": SHOWS,
        "c/<conn:conn>/streams/<seg:key>/entries/<eid:entry_id>/": SHOWS,
        "c/<conn:conn>/streams/<seg:key>/entries/<eid:entry_id>/raw/": Row(True, "?field=1"),  # data
        # a pending row previews its message: its type and the start of its payload, masked
        "c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/": SHOWS,
        "c/<conn:conn>/dlq/<seg:key>/": SHOWS,
        "c/<conn:conn>/dlq/<seg:key>/entries/<eid:entry_id>/": SHOWS,
        "c/<conn:conn>/streams/<seg:key>/add/": SHOWS,  # prefilled from the newest entry
        "c/<conn:conn>/streams/<seg:key>/export/": Row(True, "?format=ndjson"),
        "c/<conn:conn>/streams/<seg:key>/retries/": SHOWS,
        "reports/": SHOWS,  # a report's error signature and example
        "c/<conn:conn>/progress/<seg:key>/events/": SHOWS,
        "c/<conn:conn>/streams/<seg:key>/search/": Row(True, "?q=t1"),  # a search step: matches shown
        "c/<conn:conn>/dlq/<seg:key>/search/": Row(True, "?q=t1"),
        "api/v1/c/<conn:conn>/streams/<seg:key>/entries/": SHOWS,
        "api/v1/c/<conn:conn>/dlq/<seg:key>/": SHOWS,  # each dead letter's payload and its preview
        "api/v1/c/<conn:conn>/streams/<seg:key>/groups/<seg:group>/pending/": SHOWS,  # each row's preview
        "api/v1/c/<conn:conn>/dlq/<seg:key>/triage/": SHOWS,  # the error signatures, from masked errors
        "api/v1/c/<conn:conn>/streams/<seg:key>/retries/": SHOWS,
        "api/v1/c/<conn:conn>/streams/<seg:key>/export": Row(True, "?format=ndjson"),
        "api/v1/c/<conn:conn>/streams/<seg:key>/search/": Row(True, "?q=t1"),
        # the journey of the event the search finds: its entries' fields, its dead letter's error, masked
        "c/<conn:conn>/journey/": Row(True, "?q=t1&stream=orders"),
        "api/v1/c/<conn:conn>/journey/": Row(True, "?q=t1&stream=orders"),
    }
)
ROWS.update({route + "/": row for route, row in list(ROWS.items()) if route + "/" in ROUTES and route[-1] != "/"})


@pytest.fixture
def world(route_world: World, settings, r: redis.Redis) -> World:  # noqa: F811
    """The route matrix's world, with canaries under rules in the streams its routes name."""
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(json.dumps(RULES))
    settings.BUSCONSOLE_UNMASKED_ROLES = ["admin"]
    ids = [
        r.xadd("orders", {"type": f"t{n}", "data": json.dumps({"ssn": SSN, "n": n}), "card": CARD}).decode()
        for n in range(1, 4)
    ]
    # a payload encoded twice: the rule's path cannot be walked, so the whole field is masked
    r.xadd("orders", {"type": "t9", "data": json.dumps(json.dumps({"ssn": SSN})), "card": CARD})
    r.xreadgroup("workers", "c1", {"orders": ">"}, count=100)  # the canary entries pending too
    dead = r.xadd(
        "orders:dlq",
        {
            "type": "t1",
            "data": json.dumps({"ssn": SSN}),  # masked by the rule of its origin, orders
            "card": CARD,
            "dlq_original_stream": "orders",
            "dlq_original_id": ids[0],
            "dlq_group": "workers",
            "dlq_error": f"ValueError: {ERROR}",
        },
    ).decode()
    member = msgpack.packb([b"type", b"t1", b"data", json.dumps({"ssn": SSN}).encode(), b"card", CARD.encode(),
                            b"id", b"ev-1", b"_retries", b"1", b"_group", b"workers"])  # fmt: skip
    r.zadd(retry_set(b"orders").key, {member: 4_102_444_800_000})  # due in 2100
    # its failure, as the worker records it: the retries page shows this error as the DLQ's would be
    r.xadd("{orders}:metrics", {"event": "failed", "stream": "orders", "group": "workers", "type": "t1",
                                "event_id": "ev-1", "entry_id": ids[0], "error": f"ValueError: {ERROR}",
                                "count": "1"})  # fmt: skip
    # a report made by a run before the rule existed: /reports/ masks it by today's rules
    ErrorSignatureRollup.objects.create(
        connection=CONN, stream=b"orders", stream_hash="a" * 64, stream_text="orders", dlq=b"orders:dlq",
        dlq_hash="b" * 64, dlq_text="orders:dlq", signature=f"ValueError: {ERROR}", search=ERROR, count=1,
        first_seen=timezone.now(), last_seen=timezone.now(), example_error=f"ValueError: {ERROR}",
        example_entry_id=dead, rank=1,
    )  # fmt: skip
    # the progress SSE of orders replays up to a terminal event, then ends
    r.xadd("orders", {"event": "done", "data": json.dumps({"ssn": SSN, "n": 0}), "card": CARD})
    return replace(route_world, values={**route_world.values, "entry_id": ids[0], "dlq_entry_id": dead})


# --------------------------------------------------------------------------------------------- checks


def body_of(response) -> bytes:
    if not response.streaming:
        return response.content
    if response.is_async:  # the SSE endpoint's async iterator, read to its end (the terminal event)

        async def read() -> bytes:
            return b"".join([part async for part in response.streaming_content])

        return asyncio.run(read())
    return b"".join(response.streaming_content)


def text_of(response) -> str:
    """The body as text, with JSON's escapes of non-ASCII undone (``\\u2022``)."""
    body = body_of(response)
    text = body.decode("utf-8", "replace")
    return text + "\n" + text.encode().decode("unicode_escape", "replace") if "\\u" in text else text


def leaked(text: str) -> list[str]:
    return [c for c in CANARIES if c in text]


def shows_masked(text: str) -> bool:
    return MASK in text or expected_hash(CARD) in text


def reveals(user: User) -> int:
    return AuditEvent.objects.filter(action="payload.reveal", username=user.get_username()).count()


# --------------------------------------------------------------------------------------------- tests


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


FORMATS = ("ndjson", "csv", "parquet")


def export_text(body: bytes, fmt: str) -> str:
    if fmt == "parquet":  # compressed: read the cells back
        return json.dumps(pq.read_table(io.BytesIO(body)).to_pylist(), default=repr, ensure_ascii=False)
    return body.decode("utf-8", "replace")


@pytest.mark.parametrize("fmt", FORMATS)
@pytest.mark.parametrize("role", SIGNED_IN)
def test_every_export_format_and_job_download_is_masked(world: World, role: str, fmt: str, settings, tmp_path) -> None:
    settings.BUSCONSOLE_EXPORT_DIR = str(tmp_path)
    settings.BUSCONSOLE_JOBS_PER_USER = 10  # the route matrix's world already holds a job of each user
    client = logged_in(world.users[role])
    for path in (f"/api/v1/c/{CONN}/streams/orders/export", f"/c/{CONN}/streams/orders/export/"):
        response = client.get(path, {"format": fmt})
        assert response.status_code == 200, (path, response.content[:200])
        text = export_text(body_of(response), fmt)
        assert not leaked(text) and shows_masked(text), (path, fmt)
    started = client.post(
        f"/api/v1/c/{CONN}/streams/orders/export", json.dumps({"format": fmt}), content_type="application/json"
    )
    assert started.status_code in (200, 202), started.content
    job = runner.job_run(started.json()["job"])
    assert job.state == "done", job.error
    download = client.get(f"/jobs/{job.pk}/download/")
    assert download.status_code == 200
    text = export_text(body_of(download), fmt)
    assert not leaked(text) and shows_masked(text)


@pytest.mark.parametrize("role", SIGNED_IN)
def test_the_tail_and_the_progress_stream_are_masked(world: World, role: str, asgi_server, r) -> None:
    import httpx

    from tests.console.live.helpers import entries_until, open_tail

    user: User = world.users[role]
    cookies = session_cookie(user)
    newest = r.xrevrange("orders", count=1)[0][0].decode()

    async def tail_frames() -> list:
        frames: list = []
        async with open_tail(asgi_server, cookies, b"orders", after="0-0") as ws:
            await entries_until(ws, newest, frames=frames)
        return frames

    frames = json.dumps(asyncio.run(tail_frames()), ensure_ascii=False)
    assert not leaked(frames) and shows_masked(frames)
    for query in ("", "?unmasked=1"):  # a stream of events never reveals
        with httpx.Client(cookies=cookies, timeout=30) as http:
            response = http.get(f"{asgi_server.url}/c/{CONN}/progress/orders/events/{query}")
        assert response.status_code == 200
        assert not leaked(response.text) and MASK in response.text


#: The command line's screens that print entries or what is parsed from them, as ``manage.py bus`` runs
#: them; ``python -m eventbus`` shows the bytes as stored, to whoever holds the Redis URL (README).
CLI = [
    ["inspect", "orders", "--limit", "20"],
    ["inspect", "orders", "--search", "t1"],
    ["inspect", "orders:dlq"],
    ["dlq", "orders:dlq", "--limit", "20"],
    ["dlq"],
]


def bus_command(capsys, *argv: str) -> tuple[int, str]:
    from django.core.management import CommandError, call_command

    try:
        call_command("bus", *argv)
        status = 0
    except CommandError as exc:
        status = exc.returncode
    out = capsys.readouterr().out
    return status, out + ("\n" + out.encode().decode("unicode_escape", "replace") if "\\u" in out else "")


@pytest.mark.parametrize("argv", CLI, ids=" ".join)
def test_the_console_command_line_is_masked(world: World, argv: list[str], capsys) -> None:
    for json_flag in ([], ["--json"]):
        status, text = bus_command(capsys, *argv, *json_flag)
        assert status == 0 and not leaked(text), (argv, json_flag, text[:300])
    if argv[0] == "inspect" and argv[1] == "orders" and len(argv) == 4 and argv[2] == "--limit":
        assert shows_masked(text)


def test_the_console_command_line_finds_no_canary(world: World, capsys) -> None:
    for needle in CANARIES:
        status, text = bus_command(capsys, "inspect", "orders", "--search", needle, "--json")
        assert status == 1 and json.loads(text)["entries"] == []  # nothing found: exit 1


def test_the_console_command_line_from_a_shell_is_masked(world: World, capsys) -> None:
    """``manage.py bus ...`` as a shell runs it (run_from_argv: the bus's options reach the bus whole)."""
    from streams_app.management.commands.bus import Command

    with pytest.raises(SystemExit) as exit_:
        Command().run_from_argv(["manage.py", "bus", "inspect", "orders", "--limit", "20", "--json"])
    out = capsys.readouterr().out
    assert exit_.value.code == 0 and not leaked(out) and shows_masked(out.encode().decode("unicode_escape"))
