"""What the alert tests share: a rule with defaults, the open alerts, a snapshot then an evaluation at one
tick, and the form of a rule as an admin posts it.
"""

from __future__ import annotations

from datetime import datetime

from streams_app.alerts.evaluation import alerts_evaluate
from streams_app.alerts.models import Alert, AlertRule
from streams_app.metrics import snapshots

Kind = AlertRule.Kind


def make_rule(kind: str, **fields: object) -> AlertRule:
    defaults: dict[str, object] = {"name": f"rule {kind}", "kind": kind, "stream_glob": "*", "group_glob": "*"}
    return AlertRule.objects.create(**{**defaults, **fields})


def open_alerts() -> list[Alert]:
    return list(Alert.objects.filter(state=Alert.State.OPEN).order_by("pk"))


def snap_and_evaluate(tick: datetime) -> None:
    snapshots.snapshot_take(tick=tick)
    alerts_evaluate(tick=tick)


RULE_POST = {
    "name": "billing lag", "kind": Kind.GROUP_LAG_ABOVE, "connection": "", "stream_glob": "orders*",
    "group_glob": "billing", "threshold": "100", "for_duration": "5m", "enabled": "on",
    "webhook_url": "https://hooks.example.com/services/T00/B00/very-secret",
}
