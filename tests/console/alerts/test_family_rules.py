"""Alert rules over stream families: read from the newest family rows after each snapshot, opened after T,
resolved when the figure falls back, delivered by the rule's webhook (snapshot commit, snapshot_taken,
evaluation, Celery, the webhook); DLQ growth over every family; bad
rules refused with a 400 and the audit row of a good one written by the gate; a family alert names no
stream for the family-mode snapshot to keep.

Expected figures come from Redis (XPENDING summed in the test) or from the rows the test wrote.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import redis
from django.test import Client
from django.urls import resolve

from busconsole.celery import app as celery_app
from streams_app.alerts.evaluation import alerts_evaluate
from streams_app.alerts.family_members import named_keys
from streams_app.alerts.models import Alert, AlertRule
from streams_app.audit.models import AuditEvent
from streams_app.metrics import snapshots
from streams_app.metrics.models import FamilySample, name_hash
from streams_app.timeline.tracks import timeline_build
from streams_app.timeline.window import TimeWindow
from streams_app.views.presenters import alert_url
from tests.console.alerts.helpers import RULE_POST, Kind, make_rule, open_alerts
from tests.console.alerts.test_webhooks import Hook, hook  # noqa: F401  (the local receiver and its fixture)
from tests.console.helpers import CONN


def _pending(r: redis.Redis, keys: list[str]) -> int:
    return sum(r.xpending(key, "g")["pending"] for key in keys)


def test_a_family_pending_rule_fires_after_t_and_resolves_from_the_snapshots_family_rows(
    r: redis.Redis, db, base: datetime, hook: Hook, django_capture_on_commit_callbacks  # noqa: F811
) -> None:
    keys = [f"progress:{n}" for n in range(3)]
    for key in keys:
        for i in range(2):
            r.xadd(key, {"n": str(i)})
        r.xgroup_create(key, "g", id="0")
        r.xreadgroup("g", "worker", {key: ">"})
    for i in range(9):  # another family with more pending, which the rule does not watch
        r.xadd("task:1:events", {"n": str(i)})
    r.xgroup_create("task:1:events", "g", id="0")
    r.xreadgroup("g", "worker", {"task:1:events": ">"})
    rule = make_rule(Kind.FAMILY_PENDING_ABOVE, family="progress:*", threshold=5, for_seconds=20, webhook_url=hook.url)
    ticks = [base + timedelta(seconds=10 * i) for i in range(4)]

    def snapshot(tick: datetime) -> None:
        """A snapshot whose commit sends snapshot_taken: the evaluation and the webhook's Celery task
        (eager) run as they do after a worker's snapshot."""
        celery_app.conf.task_always_eager = True
        try:
            with django_capture_on_commit_callbacks(execute=True):
                snapshots.snapshot_take(tick=tick)
        finally:
            celery_app.conf.task_always_eager = False

    for tick in ticks[:3]:
        snapshot(tick)
        assert len(open_alerts()) == (1 if tick - ticks[0] >= timedelta(seconds=20) else 0)
    (alert,) = open_alerts()
    assert FamilySample.objects.get(at=ticks[2], family="progress:*").pending == _pending(r, keys) == 6
    assert (alert.connection, bytes(alert.target_key), alert.target_group) == (CONN, b"progress:*", "")
    assert alert.since == ticks[0] and alert.opened_at == ticks[2] and alert.last_value == 6
    assert "Family progress:*: 6 pending entries, above 5" in alert.message
    link = resolve(alert_url(alert))  # the family's members page
    assert (link.url_name, link.kwargs["conn"], link.kwargs["family"]) == ("family", CONN, b"progress:*")
    (sent,) = hook.requests
    assert sent["json"]["event"] == "alert.open" and sent["json"]["rule"]["kind"] == "family_pending_above"
    assert (sent["json"]["alert"]["family"], sent["json"]["alert"]["stream"], sent["json"]["alert"]["value"]) == (
        "progress:*", None, 6)
    assert named_keys(CONN) == []  # a family alert names no stream to keep
    line = timeline_build(conn=CONN, key=None, window=TimeWindow(ticks[0], ticks[3]))
    assert [e.text for e in line.events if e.kind == "alert opened"] == [
        f"alert {rule.name} (open) on family progress:*: {alert.message}"]

    r.xack(keys[0], "g", *[e for e, _ in r.xrange(keys[0])])
    snapshot(ticks[3])
    alert.refresh_from_db()
    assert _pending(r, keys) == 4 and alert.state == Alert.State.RESOLVED and alert.resolved_at == ticks[3]
    assert [sent["json"]["event"] for sent in hook.requests] == ["alert.open", "alert.resolved"]
    assert AlertRule.objects.get(pk=rule.pk).alerts.count() == 1


def _row(family: str, at: datetime, **figures: int) -> FamilySample:
    return FamilySample.objects.create(
        connection=CONN, family=family, family_hash=name_hash(family.encode()), kind="detected", at=at,
        keys=figures.pop("keys", 1), entries=figures.pop("entries", 1), **figures,
    )


def test_family_dlq_growth_over_every_family_from_the_rows_written(db, base: datetime) -> None:
    make_rule(Kind.FAMILY_DLQ_GROWTH, threshold=3, for_seconds=60)
    t = [base + timedelta(seconds=30 * i) for i in range(5)]
    for i, (a, b) in enumerate([(0, 1), (1, 2), (2, 2), (5, 3)]):
        _row("orders:*", t[i], dlq_depth=a)
        _row("job:*", t[i], dlq_depth=b)
    alerts_evaluate(tick=t[3])  # orders:* from 1 (t[1], within 60 s) to 5: grew by 4; job:* by 1
    (alert,) = open_alerts()
    assert bytes(alert.target_key) == b"orders:*" and alert.last_value == 4
    assert "grew by 4 (from 1 to 5)" in alert.message
    _row("job:*", t[4], dlq_depth=9)  # orders:* is gone from the newest pass: its alert resolves
    alerts_evaluate(tick=t[4])
    assert [bytes(a.target_key) for a in open_alerts()] == [b"job:*"] and open_alerts()[0].last_value == 9 - 2  # lowest within 60 s: t[2]
    alert.refresh_from_db()
    assert alert.state == Alert.State.RESOLVED


FAMILY_POST = {**RULE_POST, "name": "progress backlog", "kind": Kind.FAMILY_ENTRIES_ABOVE, "family": "progress:*",
               "threshold": "100000", "webhook_url": ""}


def test_a_family_rule_is_validated_created_through_the_gate_and_listed(admin_client_: Client) -> None:
    response = admin_client_.post("/alerts/rules/new/", {**FAMILY_POST, "kind": Kind.GROUP_LAG_ABOVE})
    assert response.status_code == 400
    assert "Only the family conditions watch a family" in response.content.decode()
    response = admin_client_.post("/alerts/rules/new/", {**FAMILY_POST, "kind": "family_bogus_above"})
    assert response.status_code == 400
    response = admin_client_.post("/alerts/rules/new/", {**FAMILY_POST, "family": "x" * 256})
    assert response.status_code == 400
    assert not AlertRule.objects.exists() and not AuditEvent.objects.filter(action="alert_rule.create").exists()

    assert admin_client_.post("/alerts/rules/new/", FAMILY_POST).status_code == 302
    rule = AlertRule.objects.get()
    assert (rule.kind, rule.family, rule.threshold) == (Kind.FAMILY_ENTRIES_ABOVE, "progress:*", 100000)
    event = AuditEvent.objects.get(action="alert_rule.create", outcome="ok")
    assert event.parameters["family"] == "progress:*" and event.parameters["kind"] == "family_entries_above"
    page = admin_client_.get("/alerts/").content.decode()
    assert "family <span class=\"mono\">progress:*</span>" in page

    admin_client_.post(f"/alerts/rules/{rule.pk}/", {**FAMILY_POST, "family": ""})
    event = AuditEvent.objects.get(action="alert_rule.update")
    assert event.parameters["changes"] == {"family": ["progress:*", ""]}
    assert "family <span class=\"mono\">every family</span>" in admin_client_.get("/alerts/").content.decode()
