"""The stream and DLQ pages read the chart panel's mirror row and the open-alert check in one query, and
show what each says whether or not the other is there (an alert can outlive its stream's mirror row).

Expected text is the rule's name the test used; the mirror row comes from a real snapshot of a real Redis.
"""

from __future__ import annotations

import redis
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext
from django.utils import timezone

from streams_app.alerts.models import Alert
from streams_app.metrics import snapshots
from streams_app.metrics.models import StreamMirror, name_hash
from tests.console.alerts.helpers import Kind, make_rule
from tests.console.helpers import CONN

NO_DATA = "No data yet: snapshots start within a minute."


def open_alert(key: bytes, name: str) -> None:
    rule = make_rule(Kind.STREAM_SILENT, name=name)
    Alert.objects.create(
        rule=rule,
        connection=CONN,
        target_key=key,
        key_hash=name_hash(key),
        target_text=key.decode(),
        target_hash=f"h-{name}",
        message=f"{name} is open",
    )


def page(client: Client, url: str) -> tuple[str, list[str]]:
    with CaptureQueriesContext(connection) as queries:
        response = client.get(url)
    assert response.status_code == 200
    return response.content.decode(), [q["sql"] for q in queries.captured_queries]


def panel_reads(sqls: list[str]) -> list[str]:
    return [s for s in sqls if "streams_app_streammirror" in s or "streams_app_alert" in s]


def test_no_mirror_row_no_alert_is_one_query(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd("fresh", {"a": "1"})
    html, sqls = page(viewer_client, "/c/default/streams/fresh/")
    assert NO_DATA in html and "alert-strip" not in html
    assert len(panel_reads(sqls)) == 1, panel_reads(sqls)


def test_a_mirror_row_without_alerts_is_one_query(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd("orders", {"a": "1"})
    snapshots.snapshot_take(tick=timezone.now().replace(microsecond=0))
    assert StreamMirror.objects.filter(key=b"orders").exists()
    html, sqls = page(viewer_client, "/c/default/streams/orders/")
    assert NO_DATA not in html and 'data-chart="length"' in html and "alert-strip" not in html
    assert len(panel_reads(sqls)) == 1, panel_reads(sqls)


def test_a_mirror_row_and_open_alerts_show_both(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd("orders", {"a": "1"})
    snapshots.snapshot_take(tick=timezone.now().replace(microsecond=0))
    open_alert(b"orders", "first-rule")
    open_alert(b"orders", "second-rule")
    html, _ = page(viewer_client, "/c/default/streams/orders/")
    assert NO_DATA not in html and 'data-chart="length"' in html
    assert "first-rule" in html and "second-rule" in html


def test_an_alert_without_a_mirror_row_still_shows(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd("fresh", {"a": "1"})
    open_alert(b"fresh", "orphan-rule")
    open_alert(b"other", "elsewhere-rule")
    html, _ = page(viewer_client, "/c/default/streams/fresh/")
    assert NO_DATA in html and "orphan-rule" in html and "elsewhere-rule" not in html


def test_dlq_page_reads_mirror_and_alerts_alike(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd("orders:dlq", {"type": "x", "dlq_error": "boom", "dlq_original_stream": "orders"})
    snapshots.snapshot_take(tick=timezone.now().replace(microsecond=0))
    open_alert(b"orders:dlq", "dlq-rule")
    html, _ = page(viewer_client, "/c/default/dlq/orders%3Adlq/")
    assert NO_DATA not in html and 'data-chart="dead-letters-waiting"' in html and "dlq-rule" in html
