"""The shipped ACL users (deploy/redis/users.acl) are enough for the console and the bus, and no more.

A redis-server of the test's own loads the file as it is shipped (plus a ``default`` admin for the test's own
arranging and checking), and each user is switched on with a password, as the README says to. Then:

- the read side of the route matrix (every route whose GET answers every role, filled with the matrix's
  world) answers 200 with the console connected as ``busconsole-viewer``, and Redis logged no refusal;
- ``busconsole-viewer`` may run no write command on a monitored key (``ACL DRYRUN``), and an action tried
  through it is a 403 naming the missing permission (NOPERM), never a 500;
- the actions (claim, ack, requeue, the requeue-all and replay jobs, rewind, trim, deletes) run as
  ``busconsole-operator``, checked on the admin connection, and Redis logged no refusal;
- the bus's workers run as ``eventbus-worker``: publish, a unique publish, handling and acking, retries, a
  dead letter, request/reply and a progress stream, and Redis logged no refusal.

"Logged no refusal" is ``ACL LOG``: what a user was refused, even when the caller swallowed the error.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
import redis
from django.test import Client

from eventbus import Bus, RetryPolicy
from streams_app.jobs import runner as jobs
from streams_app.redis_ops import client as redis_client
from tests.console.helpers import CONN, api, group_url, seg, stream_api
from tests.eventbus.conftest import running
from tests.eventbus.test_cli_urls import cli, one_line
from tests.polling import wait_for
from tests.security.routes import (
    ROUTES,
    World,
    all_routes,
    url_of,
    world,  # noqa: F401  (the matrix's world, written on this server)
)
from tests.servers import REPO, RedisServer

ACL_FILE = REPO / "deploy" / "redis" / "users.acl"
PASSWORDS = {"busconsole-viewer": "viewer-pw-1", "busconsole-operator": "operator-pw-2", "eventbus-worker": "bus-pw-3"}


@pytest.fixture(scope="module")
def acl_server(tmp_path_factory: pytest.TempPathFactory) -> Iterator[RedisServer]:
    aclfile = Path(tmp_path_factory.mktemp("acl")) / "users.acl"
    aclfile.write_text(ACL_FILE.read_text() + "user default on nopass ~* &* +@all\n")
    server = RedisServer(extra=("--aclfile", str(aclfile))).start()
    admin = redis.Redis.from_url(server.url(0))
    for user, password in PASSWORDS.items():  # the README's step: a password, and on
        admin.execute_command("ACL", "SETUSER", user, "on", f">{password}")
    admin.close()
    yield server
    server.cleanup()


def user_url(server: RedisServer, user: str, db: int = 0) -> str:
    return f"redis://{user}:{PASSWORDS[user]}@127.0.0.1:{server.port}/{db}"


@pytest.fixture
def r(acl_server: RedisServer) -> Iterator[redis.Redis]:
    """The test's admin client (the ``default`` user) on db 0 of the ACL server, emptied, its ACL LOG too.

    It replaces the suite's ``r`` here, so the route matrix's world is written on this server."""
    client = redis.Redis.from_url(acl_server.url(0))
    client.flushall()
    client.execute_command("ACL", "LOG", "RESET")
    yield client
    client.close()


def connect_as(settings, server: RedisServer, user: str) -> None:
    settings.BUS_REDIS_URLS = {CONN: user_url(server, user)}
    redis_client.reset()


def refusals(admin: redis.Redis, user: str) -> list[dict[str, str]]:
    """What ``user`` was refused since the log was reset: ``ACL LOG`` rows, as text."""
    rows = []
    for raw in admin.execute_command("ACL", "LOG", "128"):
        row = dict(zip(raw[::2], raw[1::2], strict=True)) if isinstance(raw, list) else raw
        row = {(k.decode() if isinstance(k, bytes) else k): (v.decode() if isinstance(v, bytes) else v)
               for k, v in row.items()}
        if row.get("username") == user:
            command = next((part[4:] for part in str(row.get("client-info", "")).split() if part.startswith("cmd=")), "")
            rows.append({"command": command, **{k: str(row.get(k)) for k in ("reason", "context", "object")}})
    return rows


@contextmanager
def refusals_shown(admin: redis.Redis, user: str) -> Iterator[None]:
    """A failure inside the block says what Redis refused ``user`` meanwhile (the likely cause)."""
    try:
        yield
    except Exception as exc:
        raise AssertionError(f"{exc!r}; Redis refused {user}: {refusals(admin, user)}") from exc


# ------------------------------------------------------------------------ the read-only console


def test_the_read_side_answers_as_the_read_only_user(db, settings, acl_server: RedisServer, r: redis.Redis,
                                                     request: pytest.FixtureRequest) -> None:
    connect_as(settings, acl_server, "busconsole-operator")  # the world's own ack is an action
    built: World = request.getfixturevalue("world")
    r.execute_command("ACL", "LOG", "RESET")
    connect_as(settings, acl_server, "busconsole-viewer")
    problems, requested = [], 0
    for role in ("viewer", "admin"):
        client = Client()
        client.force_login(built.users[role])
        for found in all_routes():
            route = None if found.admin_site else ROUTES[found.route]
            if route is None or route.get != "read":
                continue
            path = url_of(found, built) + route.query
            response = client.get(path)
            requested += 1
            if response.status_code != 200:
                problems.append(f"{role} GET {path}: {response.status_code} {response.content[:200]!r}")
    assert requested > 80
    assert problems == [], "\n".join(problems) + f"\nrefused: {refusals(r, 'busconsole-viewer')}"
    assert refusals(r, "busconsole-viewer") == []



def test_a_journey_reads_a_retry_set_a_dlq_and_the_metrics_as_the_read_only_user(db, settings, acl_server, r, viewer_client):
    """The route matrix's journey finds nothing to follow; this one reads every kind of key a journey reads:
    the stream, its groups, ``{S}:metrics``, the retry set (ZSCAN MATCH) and a DLQ."""
    entry = r.xadd("orders", {"id": "evt-7", "type": "order.created", "data": "{}"}).decode()
    r.xgroup_create("orders", "workers", id="0")
    r.xadd("{orders}:metrics", {"event": "failed", "stream": "orders", "group": "workers", "entry_id": entry,
                                "event_id": "evt-7", "error": "boom", "count": "1", "ts": "1"})
    r.zadd("{orders}:retry", {json.dumps({"stream": "orders", "id": "evt-7"}): 1})
    r.xadd("orders:dlq", {"dlq_original_stream": "orders", "dlq_original_id": entry, "dlq_error": "boom"})
    r.execute_command("ACL", "LOG", "RESET")
    connect_as(settings, acl_server, "busconsole-viewer")
    response = viewer_client.get(f"/c/{CONN}/journey/?q={entry}&stream=orders")
    assert (response.status_code, refusals(r, "busconsole-viewer")) == (200, [])
    assert entry in response.content.decode()


WRITES = [
    ("XADD", "orders", "*", "n", "1"), ("XDEL", "orders", "0-1"), ("XTRIM", "orders", "MAXLEN", "0"),
    ("XACK", "orders", "workers", "0-1"), ("XCLAIM", "orders", "workers", "c", "0", "0-1"),
    ("XAUTOCLAIM", "orders", "workers", "c", "0", "0"), ("XGROUP", "SETID", "orders", "workers", "0"),
    ("XGROUP", "DESTROY", "orders", "workers"), ("XGROUP", "CREATE", "orders", "g2", "0"),
    ("XREADGROUP", "GROUP", "workers", "c", "STREAMS", "orders", ">"), ("DEL", "orders"),
    ("UNLINK", "orders"), ("SET", "orders", "x"), ("EXPIRE", "orders", "1"), ("RENAME", "orders", "o2"),
    ("EVAL", "return 1", "1", "orders"), ("FLUSHDB",), ("ZADD", "{orders}:retry", "1", "m"),
    ("HSET", "{orders}:unique", "a", "b"),
]


def test_the_read_only_user_may_write_no_monitored_key(r: redis.Redis) -> None:
    """From Redis itself: ACL DRYRUN says whether the user may run a command, without running it."""
    allowed = []
    for command in WRITES:
        try:
            reply = r.execute_command("ACL", "DRYRUN", "busconsole-viewer", *command)
        except redis.ResponseError as exc:  # a command Redis cannot even check (none expected)
            reply = str(exc)
        if reply in (b"OK", "OK"):
            allowed.append(command)
    assert allowed == []


def test_an_action_refused_by_the_acl_is_a_403_naming_the_permission(settings, acl_server: RedisServer,
                                                                     r: redis.Redis,
                                                                     operator_client: Client) -> None:
    r.xadd("orders", {"n": "1"})
    r.xgroup_create("orders", "workers", id="0")
    [(_, [(entry_id, _)])] = r.xreadgroup("workers", "c1", {"orders": ">"})
    connect_as(settings, acl_server, "busconsole-viewer")
    answer = operator_client.post(stream_api("orders", "groups/workers/ack"), json.dumps({"ids": [entry_id.decode()]}),
                                  content_type="application/json")
    assert answer.status_code == 403, answer.content
    error = answer.json()["error"]
    assert error["code"] == "no_permission" and "NOPERM" in error["message"] and "xack" in error["message"], error
    # a page's action says it as every refused action does: an error message on the page it returns to
    page = operator_client.post(group_url("orders", "workers") + "ack/", {"ids": [entry_id.decode()], "confirm": "1"},
                                follow=True)
    assert page.status_code == 200 and "NOPERM" in page.content.decode() and "xack" in page.content.decode()
    assert r.xpending("orders", "workers")["pending"] == 1  # nothing was acked


# ------------------------------------------------------------------------- the operator console


def test_the_actions_run_as_the_operator_user(settings, acl_server: RedisServer, r: redis.Redis,
                                              operator_client: Client, admin_client_: Client) -> None:
    ids = [r.xadd("orders", {"type": "order.created", "n": str(n)}).decode() for n in range(6)]
    r.xgroup_create("orders", "workers", id="0")
    r.xreadgroup("workers", "c1", {"orders": ">"}, count=4)
    dead = [r.xadd("orders:dlq", {"type": "order.created", "n": str(n), "dlq_original_stream": "orders",
                                  "dlq_original_id": ids[n], "dlq_error": "boom"}).decode() for n in range(4)]
    connect_as(settings, acl_server, "busconsole-operator")

    def post(client: Client, path: str, body: dict) -> dict:
        answer = client.post(path, json.dumps(body), content_type="application/json")
        assert answer.status_code in (200, 202), (path, answer.content)
        return answer.json()

    claimed = post(operator_client, stream_api("orders", "groups/workers/claim"),
                   {"ids": ids[:2], "consumer": "c2", "min_idle_ms": 0})
    assert claimed["claimed"] == ids[:2]
    assert post(operator_client, stream_api("orders", "groups/workers/ack"), {"ids": [ids[0]]})["acked"] == 1
    post(operator_client, stream_api("orders", "groups/workers/autoclaim"), {"consumer": "c3", "min_idle_ms": 0, "count": 10})
    assert {row["consumer"] for row in r.xpending_range("orders", "workers", "-", "+", 10)} == {b"c3"}
    rewound = post(operator_client, stream_api("orders", "groups/workers/rewind"), {"to": ids[2], "dry_run": False})
    assert rewound["last_delivered_id"] == ids[2]
    requeued = post(operator_client, api(f"/c/{CONN}/dlq/{seg('orders:dlq')}/requeue"), {"ids": [dead[0]]})
    assert [row["dlq_id"] for row in requeued["requeued"]] == [dead[0]]
    job = post(operator_client, api(f"/c/{CONN}/dlq/{seg('orders:dlq')}/requeue"), {"all": True, "up_to": dead[-1]})["job"]
    assert jobs.job_run(job).state == "done", (jobs.job_run(job).error, refusals(r, "busconsole-operator"))
    assert r.xlen("orders:dlq") == 0
    replay = post(operator_client, stream_api("orders", "replay"), {"start": ids[0], "end": ids[1], "target": "replayed"})["job"]
    ran = jobs.job_run(replay)
    assert ran.state == "done", (ran.error, refusals(r, "busconsole-operator"))
    assert [f[b"_replayed_from"].decode() for _, f in r.xrange("replayed")] == ids[:2]
    kept = [i.decode() for i, _ in r.xrevrange("orders", count=3)][::-1]
    post(admin_client_, stream_api("orders", "trim"), {"minid": kept[0]})
    assert [i.decode() for i, _ in r.xrange("orders")] == kept
    assert refusals(r, "busconsole-operator") == []


def test_the_admin_actions_run_as_the_operator_user(settings, acl_server: RedisServer, r: redis.Redis,
                                                    admin_client_: Client, operator_client: Client) -> None:
    """The console's admins act through the same Redis user: deletes, a purge, an added entry, retries."""
    ids = [r.xadd("orders", {"type": "order.created", "data": json.dumps({"n": n})}).decode() for n in range(4)]
    r.xgroup_create("orders", "workers", id="0")
    r.xgroup_create("orders", "audit", id="0")
    r.xreadgroup("workers", "c1", {"orders": ">"}, count=2)
    dead = [r.xadd("orders:dlq", {"type": "order.created", "dlq_original_stream": "orders",
                                  "dlq_error": "boom"}).decode() for _ in range(3)]
    retrying = Bus.from_url(acl_server.url(0))  # the test's admin: retries to act on
    retrying.on("order.created", stream="orders", group="billing", start="0",
                retry=RetryPolicy(max_retries=3, base=3600))(lambda event: 1 / 0)
    try:
        with running(retrying):
            wait_for(lambda: r.zcard("{orders}:retry") == 4, timeout=30, what="four retries waiting")
    finally:
        retrying.close()
    connect_as(settings, acl_server, "busconsole-operator")

    def post(client: Client, path: str, body: dict) -> dict:
        answer = client.post(path, json.dumps(body), content_type="application/json")
        assert answer.status_code in (200, 201, 202), (path, answer.content)
        return answer.json()

    with refusals_shown(r, "busconsole-operator"):
        post(operator_client, stream_api("orders", "entries/"), {"fields": {"type": "order.created", "data": "{}"}})
        post(admin_client_, stream_api("orders", "delete"), {"ids": [ids[3]]})
        post(admin_client_, stream_api("orders", "groups/workers/consumers/c1/delete"), {"force": True})
        post(admin_client_, stream_api("orders", "groups/audit/delete"), {"confirm": "audit"})
        post(admin_client_, api(f"/c/{CONN}/dlq/{seg('orders:dlq')}/delete"), {"ids": [dead[0]]})
        post(admin_client_, api(f"/c/{CONN}/dlq/{seg('orders:dlq')}/purge"), {"up_to": dead[1], "confirm": "orders:dlq"})
        far = 10**13  # ms: every due time
        moved = post(operator_client, stream_api("orders", "retries/dead-letter"), {"all": True, "up_to": far})
        if "job" in moved:  # "all" is a background job
            assert jobs.job_run(moved["job"]).state == "done"
    assert ids[3].encode() not in [i for i, _ in r.xrange("orders")] and r.xlen("orders") == 4
    assert r.xinfo_consumers("orders", "workers") == []
    assert [g["name"] for g in r.xinfo_groups("orders")] == [b"billing", b"workers"]
    assert [i.decode() for i, _ in r.xrange("orders:dlq")] == [dead[2]]
    assert r.zcard("{orders}:retry") == 0 and r.xlen("{orders}:dlq") == 4
    assert refusals(r, "busconsole-operator") == []


@pytest.mark.slow
def test_the_command_line_runs_as_a_console_user_and_names_a_refused_command(acl_server: RedisServer,
                                                                            r: redis.Redis) -> None:
    """``python -m eventbus list`` reads as the read-only console user; as the bus's worker user, which may
    not SCAN, it says which permission is missing and exits 1 (refused)."""
    r.xadd("orders", {"type": "order.created"})
    listed = cli("list", "--json", "--url", user_url(acl_server, "busconsole-viewer"))
    assert listed.returncode == 0, listed.stderr
    assert [row["key"] for row in json.loads(listed.stdout)["streams"]] == ["orders"]
    line = one_line(cli("list", "--url", user_url(acl_server, "eventbus-worker")), status=1)
    assert "NOPERM" in line and "'scan'" in line and "log in" not in line and "bus-pw-3" not in line, line
    assert refusals(r, "busconsole-viewer") == []


# ------------------------------------------------------------------------------- the bus's workers


def test_the_bus_runs_as_the_worker_user(acl_server: RedisServer, r: redis.Redis) -> None:
    bus = Bus.from_url(user_url(acl_server, "eventbus-worker"), maxlen=1000)
    handled: list[int] = []
    attempts: dict[int, int] = {}

    @bus.on("order.created", stream="orders", group="billing", start="0", max_retries=1)
    def charge(event) -> None:
        attempts[event.data["n"]] = attempts.get(event.data["n"], 0) + 1
        if event.data["n"] == 3:
            raise ValueError("declined")
        handled.append(event.data["n"])

    @bus.on("price.quote", stream="quotes", group="pricing", start="0")
    def quote(event) -> dict:
        return {"total": event.data["qty"] * 2}

    try:
        with refusals_shown(r, "eventbus-worker"):
            bus.publish_many("orders", [("order.created", {"n": n}) for n in range(3)])
            bus.publish("orders", "order.created", {"n": 3}, unique_key="order-3")
            with running(bus):
                reply = bus.request("quotes", "price.quote", {"qty": 4}, timeout=10)
                wait_for(lambda: r.xlen("{orders}:dlq") == 1 and len(handled) == 3, timeout=30,
                         what="three events handled and the fourth dead-lettered")
            with bus.progress("task-1") as progress:
                progress.delta({"done": 1})
    finally:
        bus.close()
    assert reply == {"total": 8} and sorted(handled) == [0, 1, 2] and attempts[3] == 2
    assert r.xpending("orders", "billing")["pending"] == 0
    assert refusals(r, "eventbus-worker") == []
