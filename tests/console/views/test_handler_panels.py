"""The handler-metrics panels: the group page loads its panel; the panels show what the bus's metrics hold.

The metric entries are written in the bus's own format; the expected rows, the escaped event type and the
mean duration (25 ms over 10 runs) are worked out by hand from those entries and looked for in the HTML
a viewer gets, whole page or htmx fragment.
"""

from __future__ import annotations

import re

import redis
from django.test import Client

from tests.console.redis_ops.helpers import METRICS, metric_entry


def test_group_page_loads_the_panel_and_the_panel_shows_the_group(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd("orders", {"type": "order.created"})
    r.xgroup_create("orders", "billing", id="0")
    r.xadd(METRICS, metric_entry("processed", count=10, duration_ms=25.0, type_="<script>alert(1)</script>"))
    r.xadd(METRICS, metric_entry("failed", duration_ms=4.0, entry_id="1-1", event_id="e", error="x"))
    r.xadd(METRICS, metric_entry("processed", count=5, duration_ms=5.0, group="other"))

    page = viewer_client.get("/c/default/streams/orders/groups/billing/").content.decode()
    assert 'hx-get="/c/default/streams/orders/groups/billing/handlers/" hx-trigger="load"' in page

    panel = viewer_client.get("/c/default/streams/orders/groups/billing/handlers/", HTTP_HX_REQUEST="true").content.decode()
    assert "<html" not in panel
    rows = re.findall(r"<tr class=\"[^\"]*\">(.*?)</tr>", panel, re.S)
    assert len(rows) == 2  # this group's two event types, not the other group's
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in panel and "<script>alert" not in panel
    assert "2.50 ms" in panel  # 25 ms over 10 runs

    stream_panel = viewer_client.get("/c/default/streams/orders/handlers/?window=1h").content.decode()
    assert "<html" in stream_panel and ">other<" in stream_panel  # the stream view lists every group


def test_no_metrics_stream_is_an_empty_panel(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd("orders", {"a": "1"})
    html = viewer_client.get("/c/default/streams/orders/handlers/", HTTP_HX_REQUEST="true").content.decode()
    assert "No handler metrics for this stream in the last 5m" in html
