"""The alert pages and banners: open alerts on the pages of what they concern (escaped), and the alerts
list for every role with the rule buttons for admins only.

Expected text is the rule and key names the test used, escaped as HTML.
"""

from __future__ import annotations

from datetime import datetime

import redis
from django.test import Client

from streams_app.alerts.models import Alert, AlertRule
from streams_app.metrics.models import name_hash
from tests.console.alerts.helpers import RULE_POST, Kind, make_rule, snap_and_evaluate
from tests.console.helpers import CONN


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
