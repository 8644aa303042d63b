"""Create the alert rules an operator wants on day one, unless rules exist already.

`make run` calls it after migrating, so a fresh console shows alert states for the demo within a
minute; admins edit or disable the rules on /alerts/. A console whose admins deleted every rule
gets them back only when this command is run again by hand.
"""

from __future__ import annotations

from streams_app.alerts.models import AlertRule
from streams_app.management.commands._cli import GuidedCommand

DEFAULT_RULES = [
    {"name": "Dead letters arriving", "kind": AlertRule.Kind.DLQ_GROWTH, "threshold": 1, "for_seconds": 600},
    {"name": "Entries stuck in a pending list", "kind": AlertRule.Kind.OLDEST_PENDING_ABOVE, "threshold": 0,
     "for_seconds": 300},
    {"name": "Group lagging behind", "kind": AlertRule.Kind.GROUP_LAG_ABOVE, "threshold": 1000, "for_seconds": 300},
]


class Command(GuidedCommand):
    help = "Create the default alert rules when there are none."
    examples = "  python manage.py ensure_alert_rules\n"
    environment = "  DATABASE_URL     the console's database (default sqlite:///var/busconsole.sqlite3)\n"

    def handle(self, *args, **options) -> None:
        if AlertRule.objects.exists():
            self.stdout.write("Alert rules exist: left as they are.")
            return
        for rule in DEFAULT_RULES:
            AlertRule.objects.create(**rule)
        self.stdout.write(f"Created {len(DEFAULT_RULES)} default alert rules (edit them on /alerts/).")
