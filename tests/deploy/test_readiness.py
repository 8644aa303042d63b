"""``GET /readyz``: ready when the database answers, the console's own Redis answers and every migration
on disk is applied; 503 naming what is not, and never a URL, port or password.

Each case uses the real part: a redis-server of the test's own (with a password) that it stops, a
migration the database's own record says is not applied, a PostgreSQL URL on a port nothing listens on.
What is expected comes from outside the view: the migration files on disk, Redis's own refusal.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from pathlib import Path

import pytest
import redis
from django.db import connection
from django.db.migrations.recorder import MigrationRecorder
from django.test import Client

from tests.servers import RedisServer, free_port

ROOT = Path(__file__).resolve().parents[2]
SECRET = "readyz-s3cret-pw"


def readyz(client: Client) -> tuple[int, dict]:
    response = client.get("/readyz")
    assert response["Content-Type"] == "application/json"
    assert response["Cache-Control"] == "no-store"
    return response.status_code, json.loads(response.content)


def newest_migration() -> str:
    """streams_app's newest migration, from the files on disk (not from Django's loader)."""
    return sorted(p.stem for p in (ROOT / "streams_app" / "migrations").glob("0*.py"))[-1]


def test_ready_without_login(client: Client, db) -> None:
    status, body = readyz(client)
    assert status == 200, body
    assert body == {"ready": True, "checks": {"database": "ok", "redis": "ok", "migrations": "ok"}}
    assert client.head("/readyz").status_code == 200  # probes that only HEAD
    assert client.post("/readyz").status_code == 405


def test_console_redis_stopped_is_not_ready_and_the_body_names_no_address(client: Client, db, settings) -> None:
    own = RedisServer().start()
    try:
        redis.Redis(port=own.port).config_set("requirepass", SECRET)  # a console Redis with a password
        settings.REDIS_URL = f"redis://:{SECRET}@127.0.0.1:{own.port}/1"
        status, body = readyz(client)
        assert status == 200, body  # the password is right: ready
        own.stop()
        with pytest.raises(redis.ConnectionError):  # Redis's own word that it is gone
            redis.Redis.from_url(settings.REDIS_URL, socket_connect_timeout=2).ping()
        response = client.get("/readyz")
    finally:
        own.cleanup()
    body = json.loads(response.content)
    assert response.status_code == 503
    assert body["ready"] is False
    assert body["checks"]["database"] == "ok" and body["checks"]["migrations"] == "ok"
    assert body["checks"]["redis"].startswith("unreachable")
    text = response.content.decode()
    for secret in (SECRET, str(own.port), "redis://", "127.0.0.1"):
        assert secret not in text


def test_a_monitored_redis_down_leaves_the_console_ready(client: Client, db, settings, spare_redis) -> None:
    settings.BUS_REDIS_URLS = {"default": spare_redis.url(0)}
    spare_redis.stop()
    with pytest.raises(redis.ConnectionError):
        redis.Redis.from_url(spare_redis.url(0), socket_connect_timeout=2).ping()
    status, body = readyz(client)
    assert status == 200, body


def test_an_unapplied_migration_is_not_ready(client: Client, db) -> None:
    newest = newest_migration()
    recorder = MigrationRecorder(connection)
    assert ("streams_app", newest) in recorder.applied_migrations()
    recorder.record_unapplied("streams_app", newest)  # rolled back with the test's transaction
    status, body = readyz(client)
    assert status == 503
    assert body["checks"] == {"database": "ok", "redis": "ok", "migrations": "1 unapplied"}


PROBE = """
import json
import django
django.setup()
from django.test import Client
response = Client().get("/readyz", headers={"host": "localhost"})
print(json.dumps({"status": response.status_code, "body": response.content.decode()}))
"""


@pytest.mark.slow
def test_database_unreachable_is_not_ready_and_the_body_names_no_address() -> None:
    port = free_port()  # nothing listens there
    env = {**os.environ, "DATABASE_URL": f"postgres://console:{SECRET}@127.0.0.1:{port}/busconsole",
           "DJANGO_SETTINGS_MODULE": "busconsole.settings"}
    done = subprocess.run([sys.executable, "-c", PROBE], cwd=ROOT, env=env, capture_output=True, text=True,
                          timeout=120)
    assert done.returncode == 0, done.stderr
    answer = json.loads(done.stdout.strip().splitlines()[-1])
    assert answer["status"] == 503
    body = json.loads(answer["body"])
    assert body["checks"]["database"].startswith("unreachable")
    assert body["checks"]["redis"] == "ok"
    assert body["checks"]["migrations"] == "unknown (no database)"
    for secret in (SECRET, str(port), "postgres://", "127.0.0.1", "console"):
        assert secret not in answer["body"]
