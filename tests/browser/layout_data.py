"""What the layout tests open pages over: data that stresses a layout, in Redis and the database.

Keys and IDs with no place to break, a binary key, a long group and consumer name, pending entries, a
DLQ, a job, an open alert, report rollups (:func:`make_layout_data`, which returns the hand list of
paths ``test_layout.py`` opens besides what its crawl reaches).
"""

from __future__ import annotations

import hashlib
import json
from datetime import UTC, datetime, timedelta
from urllib.parse import quote

import msgpack
import redis
from django.utils import timezone

from eventbus import keys as bus_keys
from streams_app.accounts.tokens import token_create
from streams_app.alerts.models import AlertRule
from streams_app.jobs.models import Job
from streams_app.lake.models import PipelineRun, RetryRollup, ThroughputRollup
from streams_app.metrics import snapshots
from streams_app.redis_ops import client as redis_client

# Keys with nowhere to break, as buses name them; a key that is not UTF-8; names as long as pods make them.
STREAM = b"tenant-acme-corporation:region-europe-west-1:service-order-management:orders-created-events-v2"
DLQ = STREAM + b":dlq"
BINARY = b"bin:\xff\xfe\x00raw-key-\x80\x81"
BINARY_GROUP = b"grp-\xff"
GROUP = b"billing-service-settlement-workers-europe-west-1-primary-consumer-group"
CONSUMER = b"worker-7f3c9a2e-4b1d-4e8f-9a6b-2c5d8e1f0a3b-pod-billing-7d9f8c6b5-xk2lp"
API_DOCS = "/api/v1/docs/"  # the API reference: the one HTML page under /api/
UNBROKEN = "x" * 40 + "-" + "0123456789abcdef" * 12  # a token-like value: one 233-character word


def make_layout_data(r: redis.Redis, admin) -> dict[str, str]:
    """What stresses a layout, in Redis and the database; returns the paths of the hand list."""
    long_value = {
        "type": "order.created",
        "token": UNBROKEN,
        "data": json.dumps({"order_id": 1, "customer": "c" * 180, "note": UNBROKEN}),
    }
    ids = [r.xadd(STREAM, {**long_value, "n": str(i)}).decode() for i in range(8)]
    r.xgroup_create(STREAM, GROUP, id="0")
    r.xreadgroup(GROUP, CONSUMER, {STREAM: ">"}, count=4)
    r.xgroup_createconsumer(STREAM, GROUP, b"idle-" + CONSUMER)
    binary_ids = [
        r.xadd(BINARY, {b"\xff\xfe": b"\x00\x01" + bytes(range(200, 256)), "n": str(i)}).decode()
        for i in range(3)
    ]
    r.xgroup_create(BINARY, BINARY_GROUP, id="0")
    r.xreadgroup(BINARY_GROUP, b"c-\xfe", {BINARY: ">"}, count=2)
    dlq_ids = [
        r.xadd(
            DLQ,
            {
                **long_value,
                "dlq_original_stream": STREAM,
                "dlq_original_id": ids[i],
                "dlq_group": GROUP,
                "dlq_error": f"ValueError: {UNBROKEN} declined {i}",
                "dlq_retries": "5",
                "dlq_traceback": "Traceback (most recent call last):\n  " + UNBROKEN,
                "dlq_failed_at": "1700000000000",
            },
        ).decode()
        for i in range(3)
    ]
    r.xadd(b"orders:dlq", {"type": "t", "data": "{}", "dlq_original_stream": "orders", "dlq_error": "E"})
    # Two delayed retries as the bus schedules them: the packed entry, scored by its due time in ms.
    for i, due_ms in enumerate((1_700_000_000_000, 4_000_000_000_000)):
        member = msgpack.packb(
            [
                b"type",
                b"order.created",
                b"token",
                UNBROKEN.encode(),
                b"_retries",
                str(i + 1).encode(),
                b"_group",
                GROUP,
            ]
        )
        r.zadd(bus_keys.retry_key(STREAM.decode()), {member: due_ms})
    AlertRule.objects.create(
        name="billing lags " + "behind-" * 8,
        kind=AlertRule.Kind.GROUP_LAG_ABOVE,
        threshold=0,
        for_seconds=0,
        created_by=admin,
    )
    redis_client.reset()
    start = snapshots.snapshot_tick_for(now=timezone.now() - timedelta(minutes=2), interval_s=10)
    for i in range(3):
        r.xadd(STREAM, {**long_value, "n": f"late-{i}"})
        snapshots.snapshot_take(tick=start + timedelta(seconds=10 * i))
    job = Job.objects.create(
        kind="dlq.requeue_all",
        connection="default",
        state=Job.State.RUNNING,
        done=1,
        total=3,
        parameters={"key_text": DLQ.decode()},
        created_by=admin,
    )
    token, _ = token_create(user=admin, name="dashboards-" + "grafana" * 6)
    monday = datetime(2026, 1, 5, 14, tzinfo=UTC)
    rollup = {
        "connection": "default",
        "stream": STREAM,
        "stream_text": STREAM.decode(),
        "stream_hash": hashlib.sha256(STREAM).hexdigest(),
    }
    for hours, entries in ((0, 40), (1, 7), (24, 19), (50, 3)):
        ThroughputRollup.objects.create(
            **rollup,
            scope="stream",
            event_type="",
            resolution="hour",
            bucket=monday + timedelta(hours=hours),
            entries=entries,
            bytes=entries * 10,
        )
    RetryRollup.objects.create(**rollup, retries=3, count=2)
    PipelineRun.objects.create(
        started_at=monday, finished_at=monday + timedelta(minutes=1), as_of=monday, state="done"
    )

    s, d, b = (
        f"/c/default/streams/{quote(STREAM, safe='')}",
        f"/c/default/dlq/{quote(DLQ, safe='')}",
        f"/c/default/streams/{quote(BINARY, safe='')}",
    )
    g, c = f"{s}/groups/{quote(GROUP, safe='')}", quote(CONSUMER, safe="")
    hand = {
        "overview": "/",
        "overview charts": "/charts/overview/",
        "streams": "/c/default/streams/",
        "stream": f"{s}/",
        "stream charts": f"{s}/charts/",
        "stream handlers": f"{s}/handlers/",
        "entry": f"{s}/entries/{ids[0]}/",
        "tail": f"{s}/tail/",
        "trim preview": f"{s}/trim/preview/",
        "binary stream": f"{b}/",
        "binary entry": f"{b}/entries/{binary_ids[0]}/",
        "binary group": f"{b}/groups/{quote(BINARY_GROUP, safe='')}/",
        "group": f"{g}/",
        "group charts": f"{g}/charts/",
        "group handlers": f"{g}/handlers/",
        "consumer delete preview": f"{g}/consumers/{c}/delete/preview/",
        "dlq list": "/c/default/dlq/",
        "dlq": f"{d}/",
        "dlq charts": f"{d}/charts/",
        "dead letter": f"{d}/entries/{dlq_ids[0]}/",
        "add entry": f"{s}/add/",
        "retries list": "/c/default/retries/",
        "retries": f"{s}/retries/",
        "jobs": "/jobs/",
        "job": f"/jobs/{job.pk}/",
        "audit": "/audit/",
        "alerts": "/alerts/",
        "alert rule new": "/alerts/rules/new/",
        "alert rule": f"/alerts/rules/{AlertRule.objects.get().pk}/",
        "reports": "/reports/",
        "tokens": "/tokens/",
        "api docs": API_DOCS,
        "admin tokens": "/admin/streams_app/apitoken/",
        "404": "/no-such-page/",
        "missing stream": "/c/default/streams/no-such-stream/",
    }
    return hand
