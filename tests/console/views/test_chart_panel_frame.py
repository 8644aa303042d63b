"""The chart panel's frame built in Python (``streams_app/templatetags/metrics.py``, ``_panel_html``) gives
what its template (``_chart_panel.html``, kept here as it stood) gave, for real panels: charts from real
snapshots of a real Redis, no data, open alerts on the stream, a group and a consumer with hostile names
and messages, annotations in the window and a stream no longer there (the panel's note).
"""

from __future__ import annotations

import hashlib
from datetime import timedelta

import pytest
import redis
from django.template import Context, Template
from django.utils import timezone

from streams_app.alerts.models import Alert
from streams_app.annotations.models import Annotation
from streams_app.metrics import panels, snapshots
from streams_app.metrics.charts import window_of
from streams_app.metrics.models import StreamMirror, name_hash
from streams_app.templatetags import metrics as metrics_tags
from tests.console.helpers import CONN
from tests.console.metrics.test_panel_alerts_read import open_alert

pytestmark = pytest.mark.django_db

OLD_PANEL = '{% comment %}\nA block of charts (streams_app.metrics.panels.Panel) with its 1 h / 24 h / 7 d switch, and the open\nalerts of what the page shows (``alerts``). htmx replaces the whole section: after each snapshot (the\n"metrics-snapshot" event static/js/metrics.js raises) and when a window is picked. The switch links keep real hrefs (the page itself with ?window=) for use without JS.\n{% endcomment %}{% load metrics %}<section class="chart-panel" hx-get="{{ panel.refresh_url }}" hx-trigger="metrics-snapshot from:body" hx-swap="outerHTML" data-metrics-live>\n  <div class="chart-head">\n    <h2>{{ panel.title }}</h2>\n    <nav class="window-switch" aria-label="Time window">{% window_links panel %}</nav>\n    {% if panel.as_of %}<span class="chart-asof">snapshot of {{ panel.as_of|date:"H:i:s" }} UTC</span>{% endif %}\n  </div>\n  {% if alerts %}\n  <ul class="alert-strip" aria-label="Open alerts">\n    {% for a in alerts %}<li><span class="pill bad">alert</span> <strong>{{ a.rule.name }}</strong>{% if a.target_consumer %} · consumer <span class="mono">{{ a.target_consumer }}</span>{% elif a.target_group %} · group <span class="mono">{{ a.target_group }}</span>{% endif %}: {{ a.message }} <span class="muted small">open since {{ a.opened_at|date:"M j, H:i" }} UTC</span></li>{% endfor %}\n  </ul>\n  {% endif %}\n  {% if panel.note %}<p class="muted small">{{ panel.note }}</p>{% endif %}\n  {% if panel.no_data %}<p class="chart-nodata">No data yet: snapshots start within a minute.</p>\n  {% else %}<div class="chart-grid">{% for chart in panel.charts %}{% include "streams_app/_chart.html" %}{% endfor %}</div>\n  {% if panel.notes %}{% include "streams_app/_annotation_list.html" with notes=panel.notes left_out=panel.notes_left_out %}{% endif %}{% endif %}\n</section>\n'
HOSTILE = "<b>\"x\"&'\u202e</b>"


def _old(panel: panels.Panel, alerts: list[Alert]) -> str:
    return Template(OLD_PANEL).render(Context({"panel": panel, "alerts": alerts}))


def _new(panel: panels.Panel, alerts: list[Alert]) -> str:
    return metrics_tags._panel_html(Context(), panel, alerts)


@pytest.fixture
def orders(r: redis.Redis) -> None:
    r.xadd("orders", {"n": "1"})
    r.xgroup_create("orders", "billing", id="0")
    r.xadd("orders:dlq", {"dlq_original_stream": "orders", "dlq_error": "boom"})
    now = timezone.now()
    for i in range(3):
        r.xadd("orders", {"n": str(i)})
        snapshots.snapshot_take(tick=snapshots.snapshot_tick_for(now=now - timedelta(seconds=30 * (3 - i))))


@pytest.mark.parametrize("window", ["1h", "24h", "7d"])
def test_the_panel_is_what_its_template_showed(orders, window: str) -> None:
    at = timezone.now() - timedelta(seconds=600)
    Annotation.objects.create(
        at=at, end_at=at + timedelta(seconds=60), text=HOSTILE, connection=CONN, key=b"orders",
        key_hash=hashlib.sha256(b"orders").hexdigest(), key_text="orders",
    )
    open_alert(b"orders", HOSTILE)
    open_alert(b"orders", "second")
    Alert.objects.filter(rule__name="second").update(target_group="<grp>", target_consumer="")
    open_alert(b"orders", "third")
    Alert.objects.filter(rule__name="third").update(target_group="<grp>", target_consumer="c<1>")
    alerts = list(Alert.objects.filter(state=Alert.State.OPEN).select_related("rule").order_by("pk"))
    shown = window_of(window)
    cases = [
        (panels.stream_panel(conn=CONN, key=b"orders", window=shown, url="/s/charts/"), alerts),
        (panels.stream_panel(conn=CONN, key=b"orders", window=shown, url="/s/charts/"), []),
        (panels.dlq_panel(conn=CONN, key=b"orders:dlq", window=shown, url="/d/charts/"), alerts[:1]),
        (panels.group_panel(conn=CONN, key=b"orders", group=b"billing", window=shown, url="/g/charts/"), []),
        (panels.stream_panel(conn=CONN, key=b"never-seen", window=shown, url="/n/charts/"), alerts),
    ]
    StreamMirror.objects.filter(connection=CONN, key_hash=name_hash(b"orders")).update(deleted_at=timezone.now())
    cases.append((panels.stream_panel(conn=CONN, key=b"orders", window=shown, url="/s/charts/"), alerts[1:]))
    assert any(p.charts and p.notes for p, _ in cases) and any(p.no_data for p, _ in cases)
    assert any(p.note for p, _ in cases)
    for panel, shown_alerts in cases:
        new = _new(panel, shown_alerts)
        assert new == _old(panel, shown_alerts)
        assert "<b>" not in new
