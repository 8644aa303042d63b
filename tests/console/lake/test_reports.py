"""``/reports/``: who may read it and who may start a pipeline run; what it shows from the rollup tables.

The rollup rows are written straight into the tables here (the Spark side has its own tests in
tests/pipeline/); the page's numbers are then checked against those rows.
"""

from __future__ import annotations

import hashlib
import html
import re
from datetime import UTC, datetime, timedelta
from urllib.parse import parse_qs, quote_plus, urlsplit

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
    for minute in (14 * 60, (14 + 7 * 24) * 60 + 59):  # the data starts at its first hour, ends with its last
        ThroughputRollup.objects.create(**stream, scope="stream", event_type="", resolution="minute",
                                        bucket=MONDAY + timedelta(minutes=minute), entries=1, bytes=10)
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
                               as_of=MONDAY + timedelta(days=8), state="done",
                               stats={"driver": "resident", "jobs_s": 7.43})


def test_anonymous_is_sent_to_login(client: Client) -> None:
    response = client.get("/reports/")
    assert response.status_code == 302 and "/login" in response["Location"]


def test_viewer_reads_the_rollups(viewer_client: Client, rollups: None) -> None:
    response = viewer_client.get("/reports/")
    assert response.status_code == 200
    page = response.content.decode()
    assert "As of <strong>2026-01-13 00:00 UTC</strong>" in page
    assert "Its Spark jobs ran in the resident driver in 7.4 s." in page
    # heat map: from the oldest hour loaded to the newest, both covered whole (the minute rows say so),
    # Monday 14:00 occurs twice: 40 + 60, the darkest cell; Monday 15:00 once (the second one is after
    # the newest hour): 7 in 60 minutes against 100 in 120
    assert 'title="Mon 14:00 UTC: 100 entries in 2 full hours (average 50.0 per hour)"' in page
    assert 'fill-opacity="1.000"' in page
    assert 'title="Mon 15:00 UTC: 7 entries in 1 full hour"' in page and 'fill-opacity="0.140"' in page
    assert 'id="heatmap-partial"' not in page
    assert "31.8 ms" in page and "order.paid" in page  # p99, the type
    assert "ValueError: order &lt;num&gt; not found" in page
    assert f'href="/c/default/dlq/orders%3Adlq/?signature={quote_plus("ValueError: order <num> not found")}"' in page
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


def lag_rows(group: bytes, lags: list[int | None], *, pending: int = 0, idle_ms: int | None = None,
             peak: int | None = None) -> None:
    """One LagTrendRollup row per hour up to Monday (week 2) 14:00, the newest hour, for ``group`` on orders."""
    stream = {"connection": "default", "stream": b"orders", "stream_hash": digest(b"orders"), "stream_text": "orders"}
    newest = MONDAY + timedelta(days=7, hours=14)
    for back, lag in enumerate(reversed(lags)):
        LagTrendRollup.objects.create(
            **stream, group=group, group_hash=digest(group), group_text=group.decode(), hour=newest - timedelta(hours=back),
            samples=60, mean_lag=lag, max_lag=peak if peak is not None and lag is not None else lag, last_lag=lag,
            lag_change=None if lag is None else 0, max_pending=pending, max_idle_ms=idle_ms,
        )


def test_lag_trend_shows_the_stuck_groups_ahead_of_bigger_bursts(viewer_client: Client) -> None:
    for n in range(7):  # busy groups: bursts of hundreds that are worked off within the hour (last lag 0)
        lag_rows(f"busy-{n}".encode(), [0, 0, 0], peak=100 * (n + 1))
    lag_rows(b"analytics", [5, 5, 5])  # stopped reading: a small lag that never moves
    # lag unknown (an entry ahead of the group was deleted), 150 entries pending for 40 minutes
    lag_rows(b"crashed", [None, None], pending=150, idle_ms=40 * 60_000)

    page = viewer_client.get("/reports/").content.decode()
    section = page[page.index("<h2>Consumer lag trend</h2>"):]
    charts = re.findall(r'data-chart="([^"]+)"', section)
    assert len(charts) == 6
    assert charts[:2] == ["orders-crashed", "orders-analytics"]  # unknown first, then the largest lag behind
    assert charts[2:] == [f"orders-busy-{n}" for n in (6, 5, 4, 3)]  # then by peak
    assert "Not catching up: lag 5 at the end of the hour from 2026-01-12 14:00 UTC, +0 over that hour." in section
    assert "Lag unknown in the hour from 2026-01-12 14:00 UTC, with 150 pending, the longest waiting 40m" in section
    assert "lag unknown in every hour of this window" in section  # its chart says why it draws nothing


def test_each_error_signature_links_to_exactly_its_dead_letters(viewer_client: Client, r) -> None:
    errors = ["ValueError: order 7 not found", "ValueError: order 8 was cancelled", "ValueError: order 9 not found",
              "ValueError: order 'x7' not found", "ValueError: order 10 was cancelled", "TimeoutError: order 7"]
    for n, error in enumerate(errors):
        r.xadd("orders:dlq", {"data": "{}", "dlq_original_stream": "orders", "dlq_original_id": f"1-{n}",
                              "dlq_group": "billing", "dlq_error": error, "dlq_retries": "3"})
    stream = {"connection": "default", "stream": b"orders", "stream_hash": digest(b"orders"), "stream_text": "orders"}
    patterns = {"ValueError: order <num> not found": r"ValueError: order [0-9]+ not found",
                "ValueError: order <num> was cancelled": r"ValueError: order [0-9]+ was cancelled"}
    for rank, signature in enumerate(patterns, 1):
        ErrorSignatureRollup.objects.create(
            **stream, dlq=b"orders:dlq", dlq_hash=digest(b"orders:dlq"), dlq_text="orders:dlq", signature=signature,
            search="ValueError: order", count=2, first_seen=MONDAY, last_seen=MONDAY, example_error="", rank=rank,
            example_entry_id="1-0",
        )

    page = viewer_client.get("/reports/").content.decode()
    hrefs = re.findall(r'<a href="(/c/default/dlq/[^"]+)">Entries</a>', page)
    assert len(hrefs) == 2 and hrefs[0] != hrefs[1]
    by_signature = {}
    for href in hrefs:
        query = parse_qs(urlsplit(html.unescape(href)).query)
        by_signature[query["signature"][0]] = html.unescape(href)
    assert set(by_signature) == set(patterns)
    for signature, pattern in patterns.items():
        expected = [entry_id.decode() for entry_id, fields in r.xrevrange("orders:dlq")
                    if re.fullmatch(pattern, fields[b"dlq_error"].decode())]
        assert len(expected) == 2
        listing = viewer_client.get(by_signature[signature])
        assert listing.status_code == 200
        body = listing.content.decode()
        assert re.findall(r'<tr id="dlq-[^"]+" data-id="([^"]+)"', body) == expected
