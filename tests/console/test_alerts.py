"""Alert rules against real Redis state: each kind opens and resolves; webhooks reach a local HTTP
server (with a retry after a 500); rule changes are admin-only, CSRF-protected and audited.

Snapshots are taken with :func:`streams_app.metrics.snapshots.snapshot_take` at explicit ticks and the rules are
evaluated at those ticks, so "for T" is exercised without waiting. Idle times that Redis only lets time
grow are set with ``XCLAIM ... IDLE`` (pending entries) or written into the mirror rows (consumers).
"""

from __future__ import annotations

import json
import os
import threading
from collections.abc import Iterator
from datetime import datetime, timedelta
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import redis
from django.db import connection
from django.test import Client
from django.utils import timezone

from streams_app import tasks
from streams_app.alerts import webhooks as alert_webhooks
from streams_app.alerts.evaluation import alerts_evaluate
from streams_app.alerts.models import Alert, AlertRule
from streams_app.audit.models import AuditEvent
from streams_app.metrics import snapshots
from streams_app.metrics.models import ConsumerMirror, SnapshotRun, StreamMirror, StreamSample, name_hash
from streams_app.redis_ops import client as redis_client
from tests.console.test_jobs import Worker, wait_for

Kind = AlertRule.Kind
CONN = "default"


@pytest.fixture(autouse=True)
def _fresh_clients(settings) -> Iterator[None]:
    settings.BUSCONSOLE_READ_ONLY = False
    redis_client.reset()
    yield
    redis_client.reset()


@pytest.fixture
def base() -> datetime:
    """A tick-aligned time two hours ago: snapshots below are stamped from here on."""
    return snapshots.snapshot_tick_for(now=timezone.now() - timedelta(hours=2), interval_s=10)


def make_rule(kind: str, **fields: object) -> AlertRule:
    defaults: dict[str, object] = {"name": f"rule {kind}", "kind": kind, "stream_glob": "*", "group_glob": "*"}
    return AlertRule.objects.create(**{**defaults, **fields})


def open_alerts() -> list[Alert]:
    return list(Alert.objects.filter(state=Alert.State.OPEN).order_by("pk"))


def snap_and_evaluate(tick: datetime) -> None:
    snapshots.snapshot_take(tick=tick)
    alerts_evaluate(tick=tick)


# ------------------------------------------------------------------------------------ rule kinds


def test_group_lag_opens_after_t_and_resolves_when_consumed(r: redis.Redis, db, base: datetime) -> None:
    for i in range(5):
        r.xadd("orders", {"n": str(i)})
    r.xgroup_create("orders", "billing", id="0")
    r.xgroup_create("orders", "audit", id="0")  # lags as much, but the rule's group glob leaves it out
    make_rule(Kind.GROUP_LAG_ABOVE, threshold=3, for_seconds=30, stream_glob="ord*", group_glob="bill*")
    ticks = [base + timedelta(seconds=10 * i) for i in range(6)]

    for tick in ticks[:4]:
        snap_and_evaluate(tick)
        # Lag 5 > 3 at every tick since ticks[0]: the alert opens once that is 30 s ago.
        assert len(open_alerts()) == (1 if tick - ticks[0] >= timedelta(seconds=30) else 0)
    (alert,) = open_alerts()
    assert (alert.connection, bytes(alert.target_key), alert.target_group) == (CONN, b"orders", "billing")
    assert alert.since == ticks[0] and alert.opened_at == ticks[3] and alert.last_value == 5
    assert "Lag 5 is above 3" in alert.message

    r.xreadgroup("billing", "worker", {"orders": ">"})
    snap_and_evaluate(ticks[4])
    alert.refresh_from_db()
    assert alert.state == Alert.State.RESOLVED and alert.resolved_at == ticks[4]
    assert open_alerts() == []


def test_a_dip_restarts_the_lag_streak_and_a_new_rule_sees_the_history(r: redis.Redis, db, base: datetime) -> None:
    r.xgroup_create("orders", "billing", id="$", mkstream=True)
    ticks = [base + timedelta(seconds=10 * i) for i in range(8)]
    for i, tick in enumerate(ticks):
        if i == 2:
            r.xreadgroup("billing", "worker", {"orders": ">"})  # lag back to 0 at ticks[2]
        else:
            r.xadd("orders", {"n": str(i)})
        snapshots.snapshot_take(tick=tick)
    # Created after the fact: the samples already show lag > 0 from ticks[3] on.
    make_rule(Kind.GROUP_LAG_ABOVE, threshold=0, for_seconds=40)
    alerts_evaluate(tick=ticks[6])
    assert open_alerts() == []  # ticks[3] is only 30 s before ticks[6]
    alerts_evaluate(tick=ticks[7])
    (alert,) = open_alerts()
    assert alert.since == ticks[3]


def test_oldest_pending_idle_opens_and_resolves_on_ack(r: redis.Redis, db, base: datetime) -> None:
    first = r.xadd("orders", {"n": "1"})
    r.xadd("orders", {"n": "2"})
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker", {"orders": ">"}, count=1)
    r.xclaim("orders", "billing", "worker", 0, [first], idle=600_000)  # idle for ten minutes
    make_rule(Kind.OLDEST_PENDING_ABOVE, for_seconds=300)
    make_rule(Kind.OLDEST_PENDING_ABOVE, for_seconds=900, name="patient")

    snap_and_evaluate(base)
    (alert,) = open_alerts()
    assert alert.rule.name != "patient" and alert.target_group == "billing"
    assert alert.last_value >= 600_000 and "idle for 10m" in alert.message

    r.xack("orders", "billing", first)
    snap_and_evaluate(base + timedelta(seconds=10))
    assert open_alerts() == [] and Alert.objects.get().resolved_at == base + timedelta(seconds=10)


def test_dlq_growth_within_t(r: redis.Redis, db, base: datetime) -> None:
    for _ in range(2):
        r.xadd("orders:dlq", {"dlq_error": "boom", "dlq_original_stream": "orders"})
    make_rule(Kind.DLQ_GROWTH, threshold=3, for_seconds=60)
    snap_and_evaluate(base)
    assert open_alerts() == []

    for _ in range(5):
        r.xadd("orders:dlq", {"dlq_error": "boom", "dlq_original_stream": "orders"})
    snap_and_evaluate(base + timedelta(seconds=10))
    (alert,) = open_alerts()
    assert bytes(alert.target_key) == b"orders:dlq" and alert.last_value == 5
    assert "from 2 to 7" in alert.message and alert.target_url == "/c/default/dlq/orders%3Adlq/"

    # 61 s later nothing was added: no growth within the last 60 s.
    snap_and_evaluate(base + timedelta(seconds=71))
    assert open_alerts() == []


def test_consumer_inactive_opens_and_resolves_when_the_consumer_goes(r: redis.Redis, db, base: datetime) -> None:
    r.xadd("orders", {"n": "1"})
    r.xadd("orders", {"n": "2"})
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "w1", {"orders": ">"}, count=1)
    r.xreadgroup("billing", "w2", {"orders": ">"}, count=1)
    snapshots.mirror_sync(conn=CONN)
    assert ConsumerMirror.objects.count() == 2
    # Redis only lets idle time grow with the clock: the mirror row stands for a sync ten minutes on.
    ConsumerMirror.objects.filter(name_text="w1").update(idle_ms=600_000)
    make_rule(Kind.CONSUMER_INACTIVE, for_seconds=300)

    alerts_evaluate(tick=base)
    (alert,) = open_alerts()
    assert (alert.target_group, alert.target_consumer) == ("billing", "w1")
    assert alert.target_url == "/c/default/streams/orders/groups/billing/"

    r.xgroup_delconsumer("orders", "billing", "w1")
    snapshots.mirror_sync(conn=CONN)
    alerts_evaluate(tick=base + timedelta(seconds=10))
    assert open_alerts() == []


def test_stream_silent_needs_a_usual_flow_and_stays_open_until_entries_arrive(r: redis.Redis, db, base: datetime) -> None:
    ms = int(base.timestamp() * 1000)
    r.xadd("sensors", {"t": "1"}, id=f"{ms - 20 * 60_000}-0")  # last entry 20 minutes before the tick
    r.xadd("retired", {"t": "1"}, id=f"{ms - 5 * 3600_000}-0")  # silent for hours: not "usually receiving"
    r.xadd("live", {"t": "1"}, id=f"{ms - 60_000}-0")  # one minute ago
    r.xadd("live:dlq", {"dlq_error": "x"}, id=f"{ms - 20 * 60_000}-0")  # a quiet DLQ is good news
    snapshots.mirror_sync(conn=CONN)
    make_rule(Kind.STREAM_SILENT, threshold=1, for_seconds=600)

    alerts_evaluate(tick=base)
    (alert,) = open_alerts()
    assert bytes(alert.target_key) == b"sensors" and alert.since == base - timedelta(minutes=20)

    # Hours later the silence is long past the baseline: still open, the same alert.
    later = base + timedelta(hours=3)
    alerts_evaluate(tick=later)
    assert [a.pk for a in open_alerts()] == [alert.pk]

    r.xadd("sensors", {"t": "2"}, id=f"{ms + 3 * 3600_000 - 5_000}-0")
    snapshots.mirror_sync(conn=CONN)
    alerts_evaluate(tick=later + timedelta(seconds=10))
    assert open_alerts() == []


def test_stream_silent_counts_the_baseline_from_the_samples(r: redis.Redis, db, base: datetime) -> None:
    ms = int(base.timestamp() * 1000)
    r.xadd("sensors", {"t": "1"}, id=f"{ms - 20 * 60_000}-0")
    snapshots.mirror_sync(conn=CONN)
    stream = StreamMirror.objects.get(key_hash=name_hash(b"sensors"))
    # Entries added per snapshot in the hour before the silent window (which starts 10 minutes ago).
    StreamSample.objects.bulk_create([
        StreamSample(stream=stream, at=base - timedelta(minutes=m), length=1, added=added)
        for m, added in ((50, 1), (30, 2))
    ])
    make_rule(Kind.STREAM_SILENT, threshold=5, for_seconds=600)
    alerts_evaluate(tick=base)
    assert open_alerts() == []  # 3 entries in the baseline: fewer than N = 5

    StreamSample.objects.create(stream=stream, at=base - timedelta(minutes=25), length=1, added=4)
    alerts_evaluate(tick=base + timedelta(seconds=10))
    assert len(open_alerts()) == 1  # 7 >= 5


def test_entries_the_snapshots_saw_end_a_silence_the_mirror_has_not_caught_up_with(r: redis.Redis, db, base: datetime) -> None:
    ms = int(base.timestamp() * 1000)
    r.xadd("sensors", {"t": "1"}, id=f"{ms - 20 * 60_000}-0")
    snapshots.mirror_sync(conn=CONN)
    stream = StreamMirror.objects.get()
    StreamSample.objects.create(stream=stream, at=base - timedelta(minutes=2), length=2, added=1)
    make_rule(Kind.STREAM_SILENT, threshold=1, for_seconds=600)
    alerts_evaluate(tick=base)
    assert open_alerts() == []


def test_alerts_stay_open_while_their_connection_is_unreachable(r: redis.Redis, db, base: datetime) -> None:
    first = r.xadd("orders", {"n": "1"})
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker", {"orders": ">"})
    r.xclaim("orders", "billing", "worker", 0, [first], idle=600_000)
    make_rule(Kind.OLDEST_PENDING_ABOVE, for_seconds=300)
    snap_and_evaluate(base)
    assert len(open_alerts()) == 1

    # A tick whose snapshot could not reach the server holds no samples: no evidence either way.
    tick = base + timedelta(seconds=10)
    SnapshotRun.objects.create(tick=tick, started_at=tick, finished_at=tick, errors=[{"conn": CONN, "error": "down"}])
    alerts_evaluate(tick=tick)
    assert len(open_alerts()) == 1


def test_disabling_a_rule_resolves_its_alerts(r: redis.Redis, db, base: datetime) -> None:
    for _ in range(3):
        r.xadd("orders:dlq", {"dlq_error": "x"})
    rule = make_rule(Kind.DLQ_GROWTH, threshold=1, for_seconds=60)
    snap_and_evaluate(base)
    for _ in range(3):
        r.xadd("orders:dlq", {"dlq_error": "x"})
    snap_and_evaluate(base + timedelta(seconds=10))
    assert len(open_alerts()) == 1
    AlertRule.objects.filter(pk=rule.pk).update(enabled=False)
    alerts_evaluate(tick=base + timedelta(seconds=10))
    assert open_alerts() == []


def test_open_alerts_show_on_the_affected_pages(r: redis.Redis, viewer_client: Client, base: datetime) -> None:
    first = r.xadd("orders", {"n": "1"})
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker", {"orders": ">"})
    r.xclaim("orders", "billing", "worker", 0, [first], idle=600_000)
    make_rule(Kind.OLDEST_PENDING_ABOVE, for_seconds=300, name="<i>stuck</i>")
    snap_and_evaluate(base)
    for url in ("/c/default/streams/orders/", "/c/default/streams/orders/groups/billing/", "/"):
        html = viewer_client.get(url).content.decode()
        assert "&lt;i&gt;stuck&lt;/i&gt;" in html and "<i>stuck" not in html, url
    page = viewer_client.get("/alerts/").content.decode()
    assert 'href="/c/default/streams/orders/groups/billing/"' in page and "1 open" in page


# -------------------------------------------------------------------------------------- webhooks


class Hook:
    """A local HTTP server recording POSTs and answering with the statuses it is given, then 200."""

    def __init__(self) -> None:
        self.requests: list[dict] = []
        self.statuses: list[int] = []
        hook = self

        class Handler(BaseHTTPRequestHandler):
            def do_POST(self) -> None:  # noqa: N802 - http.server's naming
                body = self.rfile.read(int(self.headers.get("Content-Length", "0")))
                hook.requests.append({"path": self.path, "type": self.headers.get("Content-Type"), "json": json.loads(body)})
                status = hook.statuses.pop(0) if hook.statuses else 200
                self.send_response(status)
                self.end_headers()

            def log_message(self, *args: object) -> None:
                pass

        self.server = ThreadingHTTPServer(("127.0.0.1", 0), Handler)
        self.url = f"http://127.0.0.1:{self.server.server_port}/hooks/T0KEN-secret"
        self.thread = threading.Thread(target=self.server.serve_forever, daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


@pytest.fixture
def hook() -> Iterator[Hook]:
    server = Hook()
    yield server
    server.close()


def an_alert(rule: AlertRule) -> Alert:
    return Alert.objects.create(
        rule=rule, connection=CONN, target_key=b"orders", key_hash=name_hash(b"orders"), target_text="orders",
        target_group="billing", target_group_name=b"billing", target_hash="t", last_value=42, message="Lag 42 is above 10",
    )


def test_webhook_is_retried_after_a_500_and_each_transition_sent_once(db, hook: Hook) -> None:
    rule = make_rule(Kind.GROUP_LAG_ABOVE, threshold=10, for_seconds=60, webhook_url=hook.url)
    alert = an_alert(rule)
    hook.statuses = [500]

    tasks.alert_notify.apply(args=[alert.pk])  # eager: the retry runs at once, without its countdown

    assert len(hook.requests) == 2
    sent = hook.requests[-1]
    assert sent["path"] == "/hooks/T0KEN-secret" and sent["type"] == "application/json"
    assert sent["json"]["event"] == "alert.open"
    assert sent["json"]["alert"] | {"id": None} == sent["json"]["alert"] | {
        "id": None, "state": "open", "connection": CONN, "stream": "orders", "group": "billing", "value": 42,
        "message": "Lag 42 is above 10",
    }
    assert sent["json"]["rule"]["name"] == rule.name and sent["json"]["rule"]["threshold"] == 10
    alert.refresh_from_db()
    assert (alert.notified_state, alert.notify_attempts, alert.notify_error) == ("open", 2, "")
    assert alert.notified_at is not None

    tasks.alert_notify.apply(args=[alert.pk])  # a duplicate task sends nothing
    assert len(hook.requests) == 2

    Alert.objects.filter(pk=alert.pk).update(state=Alert.State.RESOLVED, resolved_at=timezone.now())
    tasks.alert_notify.apply(args=[alert.pk])
    assert [r["json"]["event"] for r in hook.requests] == ["alert.open", "alert.open", "alert.resolved"]


def test_webhook_gives_up_after_the_last_attempt_without_leaking_the_url(db, hook: Hook) -> None:
    rule = make_rule(Kind.GROUP_LAG_ABOVE, threshold=10, for_seconds=60, webhook_url=hook.url)
    alert = an_alert(rule)
    hook.statuses = [500] * 50
    tasks.alert_notify.apply(args=[alert.pk])
    alert.refresh_from_db()
    assert len(hook.requests) == alert_webhooks.WEBHOOK_MAX_ATTEMPTS == alert.notify_attempts
    assert alert.notified_at is None and alert.notify_error.startswith("HTTP 500 from http://127.0.0.1:")
    assert "T0KEN" not in alert.notify_error


def test_backoff_doubles_up_to_five_minutes() -> None:
    assert [alert_webhooks.notify_backoff(n) for n in range(8)] == [5, 10, 20, 40, 80, 160, 300, 300]


def test_evaluation_enqueues_a_delivery_per_transition_after_commit(
    r: redis.Redis, db, base: datetime, hook: Hook, django_capture_on_commit_callbacks
) -> None:
    first = r.xadd("orders", {"n": "1"})
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker", {"orders": ">"})
    r.xclaim("orders", "billing", "worker", 0, [first], idle=600_000)
    make_rule(Kind.OLDEST_PENDING_ABOVE, for_seconds=300, webhook_url=hook.url)
    make_rule(Kind.OLDEST_PENDING_ABOVE, for_seconds=300, name="no webhook")
    snapshots.snapshot_take(tick=base)
    with django_capture_on_commit_callbacks() as callbacks:
        alerts_evaluate(tick=base)
    assert len(open_alerts()) == 2 and len(callbacks) == 1  # only the rule with a webhook notifies


# ------------------------------------------------------------------------- rule changes and audit

RULE_POST = {
    "name": "billing lag", "kind": Kind.GROUP_LAG_ABOVE, "connection": "", "stream_glob": "orders*",
    "group_glob": "billing", "threshold": "100", "for_duration": "5m", "enabled": "on",
    "webhook_url": "https://hooks.example.com/services/T00/B00/very-secret",
}


def test_only_admins_create_rules_and_every_attempt_is_audited(viewer_client: Client, operator_client: Client, admin_client_: Client) -> None:
    for client in (viewer_client, operator_client):
        assert client.get("/alerts/rules/new/").status_code == 403
        assert client.post("/alerts/rules/new/", RULE_POST).status_code == 403
    assert not AlertRule.objects.exists()
    denied = AuditEvent.objects.filter(action="alert_rule.create", outcome="denied")
    assert sorted(denied.values_list("username", flat=True)) == ["otto-operator", "vera-viewer"]

    assert admin_client_.get("/alerts/rules/new/").status_code == 200
    response = admin_client_.post("/alerts/rules/new/", RULE_POST)
    assert response.status_code == 302 and response["Location"] == "/alerts/"
    rule = AlertRule.objects.get()
    assert (rule.name, rule.for_seconds, rule.threshold, rule.created_by.username) == ("billing lag", 300, 100.0, "ada-admin")
    event = AuditEvent.objects.get(action="alert_rule.create", outcome="ok")
    assert event.username == "ada-admin" and event.parameters["rule_id"] == rule.pk
    assert event.parameters["webhook"] == "https://hooks.example.com/…"
    assert "very-secret" not in json.dumps(event.parameters)


def test_update_keeps_a_blank_webhook_records_changes_and_never_shows_the_secret(admin_client_: Client, admin_user) -> None:
    admin_client_.post("/alerts/rules/new/", RULE_POST)
    rule = AlertRule.objects.get()
    form = admin_client_.get(f"/alerts/rules/{rule.pk}/").content.decode()
    assert "very-secret" not in form and "https://hooks.example.com/…" in form

    response = admin_client_.post(f"/alerts/rules/{rule.pk}/", {**RULE_POST, "threshold": "250", "webhook_url": ""})
    assert response.status_code == 302
    rule.refresh_from_db()
    assert rule.threshold == 250 and rule.webhook_url == RULE_POST["webhook_url"]
    event = AuditEvent.objects.get(action="alert_rule.update")
    assert event.parameters["changes"] == {"threshold": [100.0, 250.0]}

    admin_client_.post(f"/alerts/rules/{rule.pk}/", {**RULE_POST, "webhook_url": "", "remove_webhook": "on"})
    rule.refresh_from_db()
    assert rule.webhook_url == ""
    assert AuditEvent.objects.filter(action="alert_rule.update").count() == 2


def test_delete_is_post_only_and_audited(admin_client_: Client, viewer_client: Client) -> None:
    admin_client_.post("/alerts/rules/new/", RULE_POST)
    rule = AlertRule.objects.get()
    assert admin_client_.get(f"/alerts/rules/{rule.pk}/delete/").status_code == 405
    assert viewer_client.post(f"/alerts/rules/{rule.pk}/delete/").status_code == 403
    assert admin_client_.post(f"/alerts/rules/{rule.pk}/delete/").status_code == 302
    assert not AlertRule.objects.exists()
    assert list(AuditEvent.objects.filter(action="alert_rule.delete").values_list("outcome", flat=True).order_by("pk")) == ["denied", "ok"]


def test_rule_changes_need_the_csrf_token(admin_user) -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(admin_user)
    assert client.post("/alerts/rules/new/", RULE_POST).status_code == 403
    assert not AlertRule.objects.exists()


def test_read_only_mode_blocks_rule_changes(admin_client_: Client, settings) -> None:
    settings.BUSCONSOLE_READ_ONLY = True
    assert admin_client_.post("/alerts/rules/new/", RULE_POST).status_code == 403
    assert AuditEvent.objects.get().outcome == "denied"


def test_invalid_input_is_shown_back_and_changes_nothing(admin_client_: Client) -> None:
    response = admin_client_.post("/alerts/rules/new/", {**RULE_POST, "for_duration": "forever", "webhook_url": "ftp://example.com/hook"})
    assert response.status_code == 400
    html = response.content.decode()
    assert "Give T as seconds" in html and "http:// or https://" in html
    assert not AlertRule.objects.exists() and not AuditEvent.objects.exists()


def test_everyone_sees_alerts_and_rules_admins_see_the_buttons(viewer_client: Client, admin_client_: Client) -> None:
    admin_client_.post("/alerts/rules/new/", RULE_POST)
    rule = AlertRule.objects.get()
    Alert.objects.create(rule=rule, connection=CONN, target_key=b"<script>x", key_hash=name_hash(b"<script>x"),
                         target_text="<script>x", target_hash="h", message="m")
    viewer_page = viewer_client.get("/alerts/").content.decode()
    assert "billing lag" in viewer_page and "&lt;script&gt;x" in viewer_page and "<script>x" not in viewer_page
    assert "very-secret" not in viewer_page and "/alerts/rules/new/" not in viewer_page
    assert "/alerts/rules/new/" in admin_client_.get("/alerts/").content.decode()
    resolved = viewer_client.get("/alerts/?state=resolved").content.decode()
    assert "No alerts for this filter." in resolved


# ------------------------------------------------------------------- end to end, real Celery worker


@pytest.mark.django_db(transaction=True)
def test_a_snapshot_opens_an_alert_and_a_real_worker_posts_it(r: redis.Redis, base: datetime, hook: Hook) -> None:
    """snapshot commit -> snapshot_taken -> evaluation -> on_commit -> Celery -> worker -> webhook."""
    db_name = connection.settings_dict["NAME"]
    env = {**os.environ, "DATABASE_URL": f"sqlite:///{db_name}", "DJANGO_SETTINGS_MODULE": "busconsole.settings",
           "PYTHONUNBUFFERED": "1"}
    worker = Worker("alerts", env)
    try:
        first = r.xadd("orders", {"n": "1"})
        r.xgroup_create("orders", "billing", id="0")
        r.xreadgroup("billing", "worker", {"orders": ">"})
        r.xclaim("orders", "billing", "worker", 0, [first], idle=600_000)
        make_rule(Kind.OLDEST_PENDING_ABOVE, for_seconds=300, webhook_url=hook.url)

        snapshots.snapshot_take(tick=base)  # commits, so the receivers run: no explicit evaluation here

        (alert,) = open_alerts()
        wait_for(lambda: hook.requests, timeout=60, what="the worker to POST the webhook")
        assert hook.requests[0]["json"]["alert"]["id"] == alert.pk
        assert hook.requests[0]["json"]["event"] == "alert.open"
        wait_for(lambda: Alert.objects.filter(pk=alert.pk, notified_state="open").exists(), timeout=30,
                 what="the delivery to be recorded")
    finally:
        worker.stop()


def test_ensure_alert_rules_creates_defaults_once(db) -> None:
    from io import StringIO

    from django.core.management import call_command

    from streams_app.alerts.models import AlertRule

    call_command("ensure_alert_rules", stdout=StringIO())
    kinds = sorted(AlertRule.objects.values_list("kind", flat=True))
    assert kinds == ["dlq_growth", "group_lag_above", "oldest_pending_above"]
    AlertRule.objects.filter(kind="group_lag_above").delete()
    call_command("ensure_alert_rules", stdout=StringIO())  # rules exist: an admin's choice stands
    assert AlertRule.objects.count() == 2
