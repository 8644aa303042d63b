"""``/metrics``, the Prometheus exposition: API token required, and every value equal to what Redis
reports (XINFO, XPENDING, XLEN read by redis-py around the snapshot) or to the snapshot run's own record.

The text is parsed with prometheus_client's parser, not the console's code.
"""

from __future__ import annotations

import redis
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from streams_app.metrics import snapshots
from tests.console.helpers import CONN
from tests.console.metrics.helpers import T0, bus


def _families(text: str) -> dict[str, dict[tuple, float]]:
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def test_metrics_needs_a_token(client: Client, viewer_client: Client, viewer, api_token) -> None:
    for anonymous_or_session in (client, viewer_client):
        response = anonymous_or_session.get("/metrics")
        assert response.status_code == 401 and response["WWW-Authenticate"].startswith("Bearer")
    assert client.get("/metrics", HTTP_AUTHORIZATION="Bearer not-a-token").status_code == 401
    response = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {api_token(viewer)}")
    assert response.status_code == 200 and response["Content-Type"].startswith("text/plain")


def test_metrics_values_equal_redis(r: redis.Redis, client: Client, viewer, api_token) -> None:
    bus(r)
    xpending_before = r.xpending_range("orders", "billing", "-", "+", 1)[0]["time_since_delivered"]
    run = snapshots.snapshot_take(tick=T0)
    xpending_after = r.xpending_range("orders", "billing", "-", "+", 1)[0]["time_since_delivered"]
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {api_token(viewer)}").content.decode()
    metrics = _families(text)

    def labels(**kw: str) -> tuple:
        return tuple(sorted({"connection": CONN, **kw}.items()))

    for key in ("orders", "orders:dlq", "bin\\xff\\x00key", "empty"):
        raw_key = key.encode("utf-8") if "\\x" not in key else b"bin\xff\x00key"
        info = r.xinfo_stream(raw_key)
        assert metrics["busconsole_stream_length"][labels(stream=key)] == info["length"]
        assert metrics["busconsole_stream_entries_added_total"][labels(stream=key)] == info["entries-added"]
        for g in r.xinfo_groups(raw_key):
            group = g["name"].decode("utf-8", "backslashreplace")
            assert metrics["busconsole_group_pending"][labels(stream=key, group=group)] == g["pending"]
            assert metrics["busconsole_group_lag"][labels(stream=key, group=group)] == g["lag"]
    age = metrics["busconsole_group_oldest_pending_age_seconds"]
    assert xpending_before / 1000 <= age[labels(stream="orders", group="billing")] <= xpending_after / 1000
    assert age[labels(stream="orders", group="shipping")] == 0  # nothing pending
    assert metrics["busconsole_dlq_depth"] == {
        labels(dlq="orders:dlq", convention="eventbus-or-streams"): r.xlen("orders:dlq")}
    assert metrics["busconsole_snapshot_duration_seconds"][()] == run.duration_ms / 1000
    assert metrics["busconsole_snapshot_errors"][()] == 0
    assert metrics["busconsole_snapshot_last_tick_timestamp_seconds"][()] == T0.timestamp()
    assert metrics["busconsole_snapshot_connection_error"] == {labels(): 0}


def test_metrics_before_any_snapshot_reports_only_the_job(client: Client, viewer, api_token, db) -> None:
    metrics = _families(client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {api_token(viewer)}").content.decode())
    assert "busconsole_stream_length" not in metrics and "busconsole_snapshot_duration_seconds" not in metrics
