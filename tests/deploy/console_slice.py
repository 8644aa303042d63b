"""A slice of the console run in a process of its own, against the database DATABASE_URL names.

``python -m tests.deploy.console_slice STEP [ARG]`` prints one JSON object. The PostgreSQL tests run it
as the runtime role (``runtime``), and across an upgrade (``write-previous``, ``read-upgraded``,
``readyz``): Django reads DATABASE_URL once at start, so each role or schema state needs a process.
The monitored Redis is the suite's (BUS_REDIS_URL), where the calling test wrote ``orders`` with a group
``workers``; the checks on what the slice did are the calling test's, from Redis and the database.
"""

from __future__ import annotations

import hashlib
import json
import sys

import django

USER = "rita-runtime"
PASSWORD = "slice-password-5"


def client(user=None):
    from django.test import Client

    c = Client(headers={"host": "localhost"})
    if user is not None:
        c.force_login(user)  # writes a session row
    return c


def readyz() -> dict:
    response = client().get("/readyz")
    return {"status": response.status_code, "body": json.loads(response.content)}


def runtime() -> dict:
    """Pages, an action through the API, a snapshot with the mirror sync and retention, and DDL refused."""
    from django.contrib.auth.models import Group, User
    from django.db import DatabaseError, connection
    from django.utils import timezone

    from streams_app.accounts.tokens import token_create
    from streams_app.audit.models import AuditEvent
    from streams_app.metrics import mirror_schedule, pruning, rollups, snapshots
    from streams_app.metrics.models import StreamSample

    out: dict = {"readyz": readyz()}
    user = User.objects.create_user(USER, password=PASSWORD)
    user.groups.set([Group.objects.get(name="operator")])
    signed_in = client(user)
    pages = ["/", "/c/default/streams/", "/c/default/streams/orders/", "/c/default/streams/orders/groups/workers/",
             "/c/default/dlq/", "/audit/", "/jobs/", "/alerts/", "/reports/", "/tokens/", "/views/"]
    out["pages"] = {page: signed_in.get(page).status_code for page in pages}
    login = client().post("/login/", {"username": USER, "password": PASSWORD})  # the login form, throttle and all
    out["login"] = login.status_code

    _, raw = token_create(user=user, name="slice")
    added = client().post("/api/v1/c/default/streams/orders/entries/", json.dumps({"fields": {"n": "runtime"}}),
                          content_type="application/json", headers={"authorization": f"Bearer {raw}"})
    out["action"] = {"status": added.status_code, "id": added.json().get("id"),
                     "audit": list(AuditEvent.objects.filter(username=USER).values_list("action", "outcome"))}

    now = timezone.now()
    run = snapshots.snapshot_take(tick=snapshots.snapshot_tick_for(now=now))
    out["snapshot"] = {"run": run.pk, "samples": StreamSample.objects.count()}
    synced = mirror_schedule.mirror_sync_guarded(now=now)
    out["mirror"] = {conn: r if isinstance(r, str) else r.streams_written for conn, r in (synced or {}).items()}
    out["retention"] = {"downsample": rollups.samples_downsample(now=now), "prune": pruning.samples_prune(now=now)}

    try:
        with connection.cursor() as cursor:
            cursor.execute("CREATE TABLE slice_probe (i integer)")
        out["ddl"] = "allowed"
    except DatabaseError as exc:
        out["ddl"] = str(exc).splitlines()[0]
    return out


def snapshot(hours_ahead: str = "0") -> dict:
    """One metric snapshot (of a tick ``hours_ahead``: a tick already taken is not taken again), or the
    database's refusal."""
    from datetime import timedelta

    from django.db import DatabaseError
    from django.utils import timezone

    from streams_app.metrics import snapshots

    try:
        tick = snapshots.snapshot_tick_for(now=timezone.now() + timedelta(hours=int(hours_ahead)))
        run = snapshots.snapshot_take(tick=tick)
    except DatabaseError as exc:
        chain: list[str] = []  # what failed first is at the end: the rest failed in its aborted transaction
        error: BaseException | None = exc
        while error is not None:
            chain.append(str(error).splitlines()[0])
            error = error.__cause__ or error.__context__
        return {"errors": list(dict.fromkeys(chain))}
    return {"run": run.pk}


def write_previous(target: str) -> dict:
    """Rows written with the models as they were at ``streams_app.<target>`` (the previous release's
    schema): an account in a role, an audit row, a mirrored stream."""
    from django.contrib.auth.hashers import make_password
    from django.db import connection
    from django.db.migrations.executor import MigrationExecutor
    from django.utils import timezone

    apps = MigrationExecutor(connection).loader.project_state(("streams_app", target)).apps
    User, Group = apps.get_model("auth", "User"), apps.get_model("auth", "Group")
    AuditEvent, StreamMirror = apps.get_model("streams_app", "AuditEvent"), apps.get_model("streams_app", "StreamMirror")
    user = User.objects.create(username=USER, password=make_password(PASSWORD), is_active=True)
    user.groups.add(Group.objects.get(name="viewer"))
    now = timezone.now()
    AuditEvent.objects.create(who=user, username=USER, action="claim", connection="default", target_stream=b"orders",
                              target_display="orders", target_group="workers", target_ids=["1-1"], outcome="ok",
                              affected=1, at=now)
    StreamMirror.objects.create(connection="default", key=b"orders", key_hash=hashlib.sha256(b"orders").hexdigest(),
                                key_text="orders", length=3, groups_count=1, first_seen=now, last_seen=now,
                                synced_at=now)
    return {"user": user.pk}


def read_upgraded() -> dict:
    """What the current code reads of those rows, through its pages and API and its models."""
    from django.contrib.auth.models import User

    from streams_app.audit.models import AuditEvent
    from streams_app.metrics.models import StreamMirror

    user = User.objects.get(username=USER)
    signed_in = client(user)
    audit_page = signed_in.get("/audit/")
    api = signed_in.get("/api/v1/audit/")
    event = AuditEvent.objects.get(username=USER)
    mirror = StreamMirror.objects.get(key_text="orders")
    return {
        "readyz": readyz(),
        "role": user.groups.get().name,
        "audit_page": [audit_page.status_code, "claim" in audit_page.content.decode()],
        "api": [api.status_code, [row.get("action") for row in api.json()["events"]] if api.status_code == 200 else
                api.content.decode()[:300]],
        "event": {"action": event.action, "target": event.target_display, "ids": event.target_ids,
                  "oidc_subject": event.oidc_subject},
        "mirror": {"length": mirror.length, "lag_unknown_groups": mirror.lag_unknown_groups},
        "login": client().post("/login/", {"username": USER, "password": PASSWORD}).status_code,
    }


if __name__ == "__main__":
    django.setup()
    step, *args = sys.argv[1:]
    steps = {"runtime": runtime, "write-previous": write_previous, "read-upgraded": read_upgraded, "readyz": readyz,
             "snapshot": snapshot}
    print(json.dumps(steps[step](*args), default=str))
