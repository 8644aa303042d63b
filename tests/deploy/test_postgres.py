"""PostgreSQL as a deployment runs it: two roles from deploy/postgres/roles.sql, and an upgrade with data.

A private PostgreSQL from Debian's package (tests/postgres.py's server) gets the roles file through psql,
as an operator would run it. The owner role migrates; the console then runs as the runtime role, which
may only read and write rows (and make the snapshot's temporary tables): pages, a login, an action
through the API, a snapshot with the mirror sync and retention, and DDL refused. The upgrade test writes
rows with the previous release's models, migrates to this code's schema, reads them through the console,
and rolls back. What the roles may do is read from PostgreSQL's own catalog; what the slice did, from
Redis and the database.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.postgres import SUPERUSER, PostgresServer, pg_bindir

ROOT = Path(__file__).resolve().parents[2]
ROLES = ROOT / "deploy" / "postgres" / "roles.sql"

pytestmark = pytest.mark.postgres

#: streams_app's last migration in the release before the deployment work: where a deployment upgrading to this
#: code starts from.
PREVIOUS = "0039_streammirror_lag_unknown_groups"
PASSWORDS = {"owner_password": "owner-pw-3", "app_password": "app-pw-4"}


def psql(server: PostgresServer, *args: str, database: str = "postgres") -> str:
    done = subprocess.run(
        [str(pg_bindir() / "psql"), "-X", "-q", "-A", "-t", "-v", "ON_ERROR_STOP=1", "-h", "127.0.0.1",
         "-p", str(server.port), "-U", SUPERUSER, "-d", database, *args],
        capture_output=True, text=True, timeout=120,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def url(server: PostgresServer, role: str, database: str) -> str:
    password = {"busconsole_owner": PASSWORDS["owner_password"], "busconsole_app": PASSWORDS["app_password"]}.get(role, "x")
    return f"postgres://{role}:{password}@127.0.0.1:{server.port}/{database}"


def run(database_url: str, *argv: str) -> subprocess.CompletedProcess[str]:
    env = {**os.environ, "DATABASE_URL": database_url, "DJANGO_SETTINGS_MODULE": "busconsole.settings"}
    return subprocess.run([sys.executable, *argv], cwd=ROOT, env=env, capture_output=True, text=True, timeout=600)


def manage(database_url: str, *args: str) -> str:
    done = run(database_url, "manage.py", *args)
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-3000:]
    return done.stdout


def slice_(database_url: str, *args: str) -> dict:
    done = run(database_url, "-m", "tests.deploy.console_slice", *args)
    assert done.returncode == 0, done.stderr[-4000:]
    return json.loads(done.stdout.strip().splitlines()[-1])


@pytest.fixture(scope="module")
def server() -> Iterator[PostgresServer]:
    pg = PostgresServer().start()
    yield pg
    pg.cleanup()


@pytest.fixture(scope="module")
def roles_db(server: PostgresServer) -> str:
    """The roles file run as an operator would, then the owner's migrate: the database's name."""
    name = "console_roles"
    psql(server, "-v", f"db={name}", *(f"-v{k}={v}" for k, v in PASSWORDS.items()), "-f", str(ROLES))
    manage(url(server, "busconsole_owner", name), "migrate", "--noinput")
    return name


def write_orders(r: redis.Redis) -> None:
    for n in range(3):
        r.xadd("orders", {"n": str(n)})
    r.xgroup_create("orders", "workers", id="0")
    r.xreadgroup("workers", "w1", {"orders": ">"}, count=2)


def test_the_runtime_role_may_only_read_and_write_rows(server: PostgresServer, roles_db: str) -> None:
    """PostgreSQL's own catalog: the runtime role owns nothing and has exactly four privileges on every
    table, and USAGE (no more) on every sequence."""
    tables = set(psql(server, "-c", "SELECT tablename FROM pg_tables WHERE schemaname = 'public'",
                      database=roles_db).split())
    assert len(tables) > 20 and "streams_app_auditevent" in tables
    owners = set(psql(server, "-c", "SELECT DISTINCT tableowner FROM pg_tables WHERE schemaname = 'public'",
                      database=roles_db).split())
    assert owners == {"busconsole_owner"}
    grants = psql(server, "-F", " ", "-c", "SELECT table_name, privilege_type FROM information_schema.role_table_grants"
                  " WHERE grantee = 'busconsole_app'", database=roles_db)
    by_table: dict[str, set[str]] = {}
    for line in grants.splitlines():
        table, privilege = line.split()
        by_table.setdefault(table, set()).add(privilege)
    assert set(by_table) == tables
    assert all(privileges == {"SELECT", "INSERT", "UPDATE", "DELETE"} for privileges in by_table.values())
    sequences = psql(server, "-F", " ", "-c", "SELECT c.relname, has_sequence_privilege('busconsole_app', c.oid, 'USAGE'),"
                     " has_sequence_privilege('busconsole_app', c.oid, 'UPDATE') FROM pg_class c WHERE c.relkind = 'S'",
                     database=roles_db).splitlines()
    assert sequences and all(line.split()[1:] == ["t", "f"] for line in sequences)


def test_the_console_runs_as_the_runtime_role(server: PostgresServer, roles_db: str, r: redis.Redis) -> None:
    write_orders(r)
    out = slice_(url(server, "busconsole_app", roles_db), "runtime")
    assert out["readyz"] == {"status": 200, "body": {"ready": True, "checks": {
        "database": "ok", "redis": "ok", "migrations": "ok"}}}
    assert out["pages"] == dict.fromkeys(out["pages"], 200) and len(out["pages"]) == 11
    assert out["login"] == 302
    assert out["action"]["status"] == 201, out["action"]
    assert r.xrange("orders", min=out["action"]["id"], max=out["action"]["id"])[0][1] == {b"n": b"runtime"}
    assert [outcome for _, outcome in out["action"]["audit"]] == ["ok"]
    streams = sum(1 for _ in r.scan_iter(_type="stream"))
    assert out["snapshot"]["samples"] == streams
    assert out["mirror"] == {"default": streams}
    assert out["ddl"].startswith("permission denied for schema public"), out["ddl"]


def test_the_snapshot_needs_temporary_tables(server: PostgresServer, roles_db: str, r: redis.Redis) -> None:
    """Why roles.sql grants TEMPORARY: a role with rows only cannot take a snapshot."""
    write_orders(r)
    psql(server, "-c", "CREATE ROLE busconsole_rows_only LOGIN", database=roles_db)
    for grant in (f"GRANT CONNECT ON DATABASE {roles_db} TO busconsole_rows_only",
                  "GRANT USAGE ON SCHEMA public TO busconsole_rows_only",
                  "GRANT SELECT, INSERT, UPDATE, DELETE ON ALL TABLES IN SCHEMA public TO busconsole_rows_only",
                  "GRANT USAGE ON ALL SEQUENCES IN SCHEMA public TO busconsole_rows_only"):
        psql(server, "-c", grant, database=roles_db)
    refused = slice_(url(server, "busconsole_rows_only", roles_db), "snapshot", "1")
    assert refused["errors"][0] == f'permission denied to create temporary tables in database "{roles_db}"', refused
    assert "run" in slice_(url(server, "busconsole_app", roles_db), "snapshot", "1")


def test_upgrade_from_the_previous_release_with_data_and_back(server: PostgresServer, r: redis.Redis) -> None:
    name = "console_upgrade"
    server.createdb(name)
    database_url = url(server, SUPERUSER, name).replace(f"{SUPERUSER}:x@", f"{SUPERUSER}@")
    # The previous release's database: everything migrated as it shipped (this code's newer migrations undone).
    manage(database_url, "migrate", "--noinput")
    manage(database_url, "migrate", "--noinput", "streams_app", PREVIOUS)
    slice_(database_url, "write-previous", PREVIOUS)
    crossing = [line[4:].strip() for line in manage(database_url, "showmigrations", "--plan").splitlines()
                if line.startswith("[ ]")]
    print("migrations the upgrade applies:", crossing)

    # This code on the previous schema is not ready (when this release has migrations of its own).
    behind = {"status": 503, "migrations": f"{len(crossing)} unapplied"} if crossing else {"status": 200, "migrations": "ok"}
    before = slice_(database_url, "readyz")
    assert {"status": before["status"], "migrations": before["body"]["checks"]["migrations"]} == behind

    manage(database_url, "migrate", "--noinput")
    after = slice_(database_url, "read-upgraded")
    assert after["readyz"]["status"] == 200, after["readyz"]
    assert after["role"] == "viewer"
    assert after["audit_page"] == [200, True]
    assert after["api"] == [200, ["claim"]]
    assert after["event"] == {"action": "claim", "target": "orders", "ids": ["1-1"], "oidc_subject": ""}
    assert after["mirror"] == {"length": 3, "lag_unknown_groups": 0}
    assert after["login"] == 302  # the account's password, hashed before the upgrade, still signs in

    # Rolling back: the schema first (to the previous release's last migration), then the old code.
    manage(database_url, "migrate", "--noinput", "streams_app", PREVIOUS)
    rows = psql(server, "-F", " ", "-c", "SELECT username, action FROM streams_app_auditevent", database=name)
    assert rows == "rita-runtime claim"
    assert slice_(database_url, "readyz")["status"] == behind["status"]  # not ready: now start the old code
    manage(database_url, "migrate", "--noinput")
    assert slice_(database_url, "readyz")["status"] == 200
