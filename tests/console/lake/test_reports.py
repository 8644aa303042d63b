"""``/reports/``: who may read it and who may start a pipeline run; what it shows from the rollup tables.

The rollup rows are written straight into the tables here (the Spark side has its own tests in
tests/pipeline/); the page's numbers are then checked against those rows.
"""

from __future__ import annotations

import hashlib
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import pytest
from django.test import Client

from streams_app.audit.models import AuditEvent
from streams_app.jobs.models import Job
from streams_app.lake.models import (
    AnomalyRollup,
    ErrorSignatureRollup,
    LagTrendRollup,
    LatencyRollup,
    PipelineRun,
    RetryRollup,
    ThroughputRollup,
)

pytestmark = pytest.mark.django_db

MONDAY = datetime(2026, 1, 5, tzinfo=UTC)


def digest(raw: bytes) -> str:
    return hashlib.sha256(raw).hexdigest()


@pytest.fixture
def rollups() -> None:
    stream = {"connection": "default", "stream": b"orders", "stream_hash": digest(b"orders"), "stream_text": "orders"}
    for hours, entries in ((14, 40), (14 + 7 * 24, 60), (15, 7)):  # two Mondays 14:00 and one 15:00
        ThroughputRollup.objects.create(**stream, scope="stream", event_type="", resolution="hour",
                                        bucket=MONDAY + timedelta(hours=hours), entries=entries, bytes=entries * 10)
    LatencyRollup.objects.create(connection="default", stream="orders", group="billing", event_type="order.paid",
                                 hour=MONDAY + timedelta(hours=14), runs=120, failed=3, mean_ms=4.5, p50_ms=3.25,
                                 p95_ms=9.5, p99_ms=31.75, max_ms=40.0)
    ErrorSignatureRollup.objects.create(
        **stream, dlq=b"orders:dlq", dlq_hash=digest(b"orders:dlq"), dlq_text="orders:dlq",
        signature="ValueError: order <num> not found", search="ValueError: order", count=17,
        first_seen=MONDAY, last_seen=MONDAY + timedelta(hours=3), example_error="ValueError: order 7 not found",
        example_entry_id="1-0", rank=1,
    )
    RetryRollup.objects.create(**stream, retries=5, count=17)
    for hours, lag in ((13, 4), (14, 90)):
        LagTrendRollup.objects.create(**stream, group=b"billing", group_hash=digest(b"billing"), group_text="billing",
                                      hour=MONDAY + timedelta(days=7, hours=hours), samples=6, mean_lag=lag,
                                      max_lag=lag, last_lag=lag, lag_change=0, max_pending=1, max_idle_ms=None)
    AnomalyRollup.objects.create(**stream, hour=MONDAY + timedelta(days=7, hours=14), entries=60, baseline_mean=20.0,
                                 baseline_std=2.0, baseline_points=7, z=20.0, threshold=3.0, direction="spike")
    PipelineRun.objects.create(started_at=MONDAY + timedelta(days=8), finished_at=MONDAY + timedelta(days=8, minutes=1),
                               as_of=MONDAY + timedelta(days=8), state="done")


def test_anonymous_is_sent_to_login(client: Client) -> None:
    response = client.get("/reports/")
    assert response.status_code == 302 and "/login" in response["Location"]


def test_viewer_reads_the_rollups(viewer_client: Client, rollups: None) -> None:
    response = viewer_client.get("/reports/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "As of <strong>2026-01-13 00:00 UTC</strong>" in page
    # heat map: from the oldest hour loaded to the newest, Monday 14:00 occurs twice: (40 + 60) / 2,
    # the darkest cell; Monday 15:00 once (the second one is after the newest hour)
    assert 'title="Mon 14:00 UTC: 50.0 entries per hour"' in page and 'fill-opacity="1.000"' in page
    assert 'title="Mon 15:00 UTC: 7.0 entries per hour"' in page and 'fill-opacity="0.140"' in page
    assert "31.8 ms" in page and "order.paid" in page  # p99, the type
    assert "ValueError: order &lt;num&gt; not found" in page
    assert f'href="/c/default/dlq/orders%3Adlq/?error={quote("ValueError: order").replace("%20", "+")}"' in page
    assert "spike" in page
    assert 'data-chart="orders-billing"' in page and 'data-points="2"' in page  # the lag trend chart
    assert "Run pipeline now" not in page  # a viewer has no button


def test_heatmap_partial_for_one_stream(viewer_client: Client, rollups: None) -> None:
    response = viewer_client.get(f"/reports/?stream={digest(b'other')}", headers={"HX-Request": "true"})
    assert response.status_code == 200
    body = response.content.decode()
    assert body.lstrip().startswith('<div id="heatmap">') and "No throughput rollups yet" in body
    assert viewer_client.get("/reports/?stream=not-a-digest").status_code == 400


def test_operator_starts_a_run_and_a_viewer_cannot(operator_client: Client, viewer_client: Client) -> None:
    assert "Run pipeline now" in operator_client.get("/reports/").content.decode()

    denied = viewer_client.post("/reports/run/")
    assert denied.status_code == 403
    assert not Job.objects.exists()
    assert AuditEvent.objects.get(action="pipeline.run").outcome == "denied"

    response = operator_client.post("/reports/run/")
    job = Job.objects.get(kind="pipeline")
    assert response.status_code == 302 and response["Location"] == f"/jobs/{job.pk}/"
    assert job.created_by.username == "otto-operator" and job.state == "queued"
    assert AuditEvent.objects.filter(action="pipeline.run", outcome="ok", parameters__job=job.pk).exists()

    again = operator_client.post("/reports/run/", follow=True)  # one run at a time
    assert Job.objects.filter(kind="pipeline").count() == 1
    assert "already queued" in again.content.decode()
    assert operator_client.get("/reports/run/").status_code == 405
