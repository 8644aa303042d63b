"""Annotations on the chart panels of the stream, group and DLQ pages.

Real snapshots of a real Redis feed the charts; the test writes annotations in and out of the window, on
the stream, on another stream, on the connection and on every connection, and reads the markers back
from the page: which ones are drawn (by id), their order on the time axis, and a span's width against
the plain arithmetic of its length over the window's.
"""

from __future__ import annotations

import hashlib
import re
from datetime import timedelta

import pytest
import redis
from django.test import Client
from django.utils import timezone

from streams_app.annotations.models import Annotation
from streams_app.metrics import snapshots
from streams_app.metrics.charts import GEOMETRY

pytestmark = pytest.mark.django_db


def note(text: str, *, ago_s: float, span_s: float = 0, conn: str = "", key: bytes | None = None) -> Annotation:
    at = timezone.now() - timedelta(seconds=ago_s)
    return Annotation.objects.create(
        at=at, end_at=at + timedelta(seconds=span_s), text=text, connection=conn, key=key,
        key_hash=hashlib.sha256(key).hexdigest() if key else "", key_text=key.decode() if key else "",
    )


def marks(html: str, figure: str) -> list[tuple[int, float, str]]:
    """(annotation id, x, band width or "") of each marker in the chart ``figure``, in page order."""
    block = re.search(rf'data-chart="{figure}">(.*?)</figure>', html, re.S)
    assert block is not None, figure
    found = []
    for g in re.finditer(r'<g class="chart-mark[^"]*"[^>]*data-annotation="(\d+)"[^>]*>(.*?)</g>', block.group(1), re.S):
        x = float(re.search(r'<line class="chart-mark-line" x1="([\d.]+)"', g.group(2)).group(1))
        band = re.search(r'<rect class="chart-mark-band" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', g.group(2))
        found.append((int(g.group(1)), x, band.group(1) if band else ""))
    return found


@pytest.fixture
def orders(r: redis.Redis) -> None:
    r.xadd("orders", {"n": "1"})
    r.xgroup_create("orders", "billing", id="0")
    r.xadd("orders:dlq", {"dlq_original_stream": "orders", "dlq_error": "boom"})  # its source: orders
    now = timezone.now()
    for i in range(3):
        r.xadd("orders", {"n": str(i)})
        snapshots.snapshot_take(tick=snapshots.snapshot_tick_for(now=now - timedelta(seconds=30 * (3 - i))))


def test_markers_fall_on_the_charts_of_their_scope_and_window(orders, viewer_client: Client) -> None:
    deploy = note("deploy <v1.4>", ago_s=1200, conn="default", key=b"orders")
    incident = note("incident", ago_s=1800, span_s=900, conn="default")
    everywhere = note("maintenance", ago_s=600)
    old = note("last week", ago_s=6 * 86400, conn="default", key=b"orders")  # outside the 1 h window
    other = note("payments deploy", ago_s=300, conn="default", key=b"payments")  # another stream
    elsewhere = note("other connection", ago_s=300, conn="replica")

    html = viewer_client.get("/c/default/streams/orders/groups/billing/").content.decode()
    drawn = marks(html, "lag-entries-not-yet-delivered")
    assert [m[0] for m in drawn] == [incident.pk, deploy.pk, everywhere.pk]  # oldest first, the out-of-scope left out
    xs = [m[1] for m in drawn]
    assert xs == sorted(xs)
    geo = GEOMETRY["full"]
    # the incident's band: 900 s of the window's 3600 s, in plot units (independent of when "now" was read)
    assert drawn[0][2] and abs(float(drawn[0][2]) - 900 / 3600 * geo.plot_width) < 0.3
    # 20 minutes ago and 10 minutes ago: 600 s apart on the axis
    assert abs((xs[2] - xs[1]) - 600 / 3600 * geo.plot_width) < 0.3
    for skipped in (old, other, elsewhere):
        assert f'data-annotation="{skipped.pk}"' not in html
    # every chart of the panel carries them, and the list under it says them in words (escaped)
    assert html.count(f'data-annotation="{deploy.pk}"') == 3
    assert "deploy &lt;v1.4&gt;" in html and "deploy <v1.4>" not in html

    stream = viewer_client.get("/c/default/streams/orders/").content.decode()
    assert [m[0] for m in marks(stream, "length")] == [incident.pk, deploy.pk, everywhere.pk]
    # the DLQ's charts show its origin stream's annotations too
    dlq = viewer_client.get("/c/default/dlq/orders%3Adlq/").content.decode()
    assert [m[0] for m in marks(dlq, "dead-letters-waiting")] == [incident.pk, deploy.pk, everywhere.pk]

    # the 7 d window reaches last week's marker
    week = viewer_client.get("/c/default/streams/orders/charts/?window=7d", HTTP_HX_REQUEST="true").content.decode()
    assert [m[0] for m in marks(week, "length")] == [old.pk, incident.pk, deploy.pk, everywhere.pk]
