"""Alert webhooks: delivery to a local HTTP server with a retry after a 500, one send per transition,
giving up without leaking the URL, the backoff, the enqueue after commit, and end to end through a real
``celery worker`` process.

What was sent is checked as the local server received it (path, content type, JSON body) against the
alert and rule the test made. The server listens on 127.0.0.1, which webhooks reach only because these
tests put it on the allow list (``BUSCONSOLE_WEBHOOK_ALLOW``), as an admin would for an on-premise receiver.
"""

from __future__ import annotations

import ipaddress
import json
import threading
from collections.abc import Iterator
from datetime import datetime
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import pytest
import redis
from django.utils import timezone

from streams_app import tasks
from streams_app.alerts import webhooks as alert_webhooks
from streams_app.alerts.evaluation import alerts_evaluate
from streams_app.alerts.models import Alert, AlertRule
from streams_app.metrics import snapshots
from streams_app.metrics.models import name_hash
from tests.console.alerts.helpers import Kind, make_rule, open_alerts
from tests.console.celery_procs import Worker, celery_env
from tests.console.helpers import CONN
from tests.polling import wait_for


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
        # A short poll: shutdown() waits for serve_forever's next poll (0.5 s by default) at every close.
        self.thread = threading.Thread(target=self.server.serve_forever, args=(0.02,), daemon=True)
        self.thread.start()

    def close(self) -> None:
        self.server.shutdown()
        self.server.server_close()


#: The allow list the local receiver needs, as the environment spells it.
ALLOW_LOCAL = "127.0.0.1/32"


@pytest.fixture
def hook(settings) -> Iterator[Hook]:
    settings.BUSCONSOLE_WEBHOOK_ALLOW = (ipaddress.ip_network(ALLOW_LOCAL),)
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


@pytest.mark.django_db(transaction=True)
@pytest.mark.slow
def test_a_snapshot_opens_an_alert_and_a_real_worker_posts_it(r: redis.Redis, base: datetime, hook: Hook) -> None:
    """snapshot commit -> snapshot_taken -> evaluation -> on_commit -> Celery -> worker -> webhook."""
    worker = Worker("alerts", celery_env(BUSCONSOLE_WEBHOOK_ALLOW=ALLOW_LOCAL))
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
