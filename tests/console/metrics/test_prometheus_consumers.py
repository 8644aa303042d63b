"""``/metrics`` says how many consumers a connection has and how long they have been idle: what the
Grafana dashboard's "consumers idle" panel and a stuck consumer's investigation need.

Expected values come from Redis's own XINFO CONSUMERS, read just before and just after the mirror sync
that records the idle times (so the exposed idle time lies between the two); the text is parsed with
prometheus_client's parser.
"""

from __future__ import annotations

import redis
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from streams_app.metrics import mirror, snapshots
from tests.console.helpers import CONN
from tests.console.metrics.helpers import T0, bus

LABELS = (("connection", CONN),)


def _scrape(client: Client, token: str) -> dict[str, dict[tuple, float]]:
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").content.decode()
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return out


def _consumers(r: redis.Redis) -> list[dict]:
    """Every consumer of every group of every stream, as XINFO CONSUMERS reports it."""
    return [
        c
        for key in r.scan_iter(_type="stream")
        for g in r.xinfo_groups(key)
        for c in r.xinfo_consumers(key, g["name"])
    ]


def test_consumer_count_and_idle_times_equal_redis(r: redis.Redis, client: Client, viewer, api_token) -> None:
    bus(r)  # billing: worker-1 (4 pending), worker-2 (2 pending)
    r.xgroup_createconsumer("orders", "shipping", "standby")  # holds nothing
    snapshots.snapshot_take(tick=T0)
    before = _consumers(r)
    mirror.mirror_sync(conn=CONN)
    after = _consumers(r)
    metrics = _scrape(client, api_token(viewer))

    assert metrics["busconsole_connection_consumers"][LABELS] == len(before) == len(after) == 3
    idle = metrics["busconsole_connection_consumer_idle_seconds_max"][LABELS]
    assert max(c["idle"] for c in before) / 1000 <= idle <= max(c["idle"] for c in after) / 1000
    holding = metrics["busconsole_connection_consumer_pending_idle_seconds_max"][LABELS]
    assert (max(c["idle"] for c in before if c["pending"]) / 1000 <= holding
            <= max(c["idle"] for c in after if c["pending"]) / 1000)


def test_no_consumer_holding_entries_is_zero_and_no_consumer_has_no_idle_time(
    r: redis.Redis, client: Client, viewer, api_token
) -> None:
    r.xadd("orders", {"n": "1"})
    r.xgroup_create("orders", "billing", id="0")
    snapshots.snapshot_take(tick=T0)
    mirror.mirror_sync(conn=CONN)
    metrics = _scrape(client, api_token(viewer))
    assert metrics["busconsole_connection_consumers"][LABELS] == 0
    assert LABELS not in metrics.get("busconsole_connection_consumer_idle_seconds_max", {})
    assert metrics["busconsole_connection_consumer_pending_idle_seconds_max"][LABELS] == 0

    r.xreadgroup("billing", "worker-1", {"orders": ">"})
    r.xack("orders", "billing", r.xpending_range("orders", "billing", "-", "+", 1)[0]["message_id"])
    snapshots.snapshot_take(tick=T0.replace(minute=1))
    mirror.mirror_sync(conn=CONN)
    metrics = _scrape(client, api_token(viewer))
    assert metrics["busconsole_connection_consumers"][LABELS] == len(r.xinfo_consumers("orders", "billing")) == 1
    assert LABELS in metrics["busconsole_connection_consumer_idle_seconds_max"]
    assert metrics["busconsole_connection_consumer_pending_idle_seconds_max"][LABELS] == 0
