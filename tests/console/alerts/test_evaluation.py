"""Alert rules evaluated against real Redis state: each kind opens after its T and resolves, a dip restarts
a streak, a new rule sees the history, an unreachable connection keeps alerts open, a disabled rule
resolves them.

Snapshots are taken with :func:`streams_app.metrics.snapshots.snapshot_take` at explicit ticks and the rules
are evaluated at those ticks, so "for T" is exercised without waiting. Idle times that Redis only lets
time grow are set with ``XCLAIM ... IDLE`` (pending entries) or written into the mirror rows (consumers).
Expected alerts follow from the entries, groups and ticks the test chose.
"""

from __future__ import annotations

from datetime import datetime, timedelta

import redis

from streams_app.alerts.evaluation import alerts_evaluate
from streams_app.alerts.models import Alert, AlertRule
from streams_app.metrics import mirror, snapshots
from streams_app.metrics.models import ConsumerMirror, SnapshotRun, StreamMirror, StreamSample, name_hash
from streams_app.views.presenters import alert_url
from tests.console.alerts.helpers import Kind, make_rule, open_alerts, snap_and_evaluate
from tests.console.helpers import CONN
from tests.console.redis_ops.pel import FRESH, lowest, pel, pel_max


def test_group_lag_opens_after_t_and_resolves_when_consumed(r: redis.Redis, db, base: datetime) -> None:
    for i in range(5):
        r.xadd("orders", {"n": str(i)})
    r.xgroup_create("orders", "billing", id="0")
    r.xgroup_create("orders", "audit", id="0")  # lags as much, but the rule's group glob leaves it out
    make_rule(Kind.GROUP_LAG_ABOVE, threshold=3, for_seconds=30, stream_glob="ord*", group_glob="bill*")
    ticks = [base + timedelta(seconds=10 * i) for i in range(6)]

    for tick in ticks[:4]:
        snap_and_evaluate(tick)
        # Lag 5 > 3 at every tick since ticks[0]: the alert opens once that is 30 s ago.
        assert len(open_alerts()) == (1 if tick - ticks[0] >= timedelta(seconds=30) else 0)
    (alert,) = open_alerts()
    assert (alert.connection, bytes(alert.target_key), alert.target_group) == (CONN, b"orders", "billing")
    assert alert.since == ticks[0] and alert.opened_at == ticks[3] and alert.last_value == 5
    assert "Lag 5 is above 3" in alert.message

    r.xreadgroup("billing", "worker", {"orders": ">"})
    snap_and_evaluate(ticks[4])
    alert.refresh_from_db()
    assert alert.state == Alert.State.RESOLVED and alert.resolved_at == ticks[4]
    assert open_alerts() == []


def test_a_dip_restarts_the_lag_streak_and_a_new_rule_sees_the_history(r: redis.Redis, db, base: datetime) -> None:
    r.xgroup_create("orders", "billing", id="$", mkstream=True)
    ticks = [base + timedelta(seconds=10 * i) for i in range(8)]
    for i, tick in enumerate(ticks):
        if i == 2:
            r.xreadgroup("billing", "worker", {"orders": ">"})  # lag back to 0 at ticks[2]
        else:
            r.xadd("orders", {"n": str(i)})
        snapshots.snapshot_take(tick=tick)
    # Created after the fact: the samples already show lag > 0 from ticks[3] on.
    make_rule(Kind.GROUP_LAG_ABOVE, threshold=0, for_seconds=40)
    alerts_evaluate(tick=ticks[6])
    assert open_alerts() == []  # ticks[3] is only 30 s before ticks[6]
    alerts_evaluate(tick=ticks[7])
    (alert,) = open_alerts()
    assert alert.since == ticks[3]


def test_oldest_pending_idle_opens_and_resolves_on_ack(r: redis.Redis, db, base: datetime) -> None:
    first = r.xadd("orders", {"n": "1"})
    r.xadd("orders", {"n": "2"})
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker", {"orders": ">"}, count=1)
    r.xclaim("orders", "billing", "worker", 0, [first], idle=600_000)  # idle for ten minutes
    make_rule(Kind.OLDEST_PENDING_ABOVE, for_seconds=300)
    make_rule(Kind.OLDEST_PENDING_ABOVE, for_seconds=900, name="patient")

    snap_and_evaluate(base)
    (alert,) = open_alerts()
    assert alert.rule.name != "patient" and alert.target_group == "billing"
    assert alert.last_value >= 600_000 and "idle for 10m" in alert.message

    r.xack("orders", "billing", first)
    snap_and_evaluate(base + timedelta(seconds=10))
    assert open_alerts() == [] and Alert.objects.get().resolved_at == base + timedelta(seconds=10)


def test_stuck_alert_opens_on_the_longest_idle_entry_after_the_oldest_was_claimed(
    r: redis.Redis, db, base: datetime
) -> None:
    """The issue's case: the lowest pending ID was just claimed (idle ~0) while 147 entries behind it have
    waited ten minutes. The rule reads the longest idle over the PEL, so it opens now; a figure taken from
    the lowest ID (what it read before) stays under T and would not."""
    ids = pel(r, "orders", "billing", [FRESH] + [600_000] * 147)
    make_rule(Kind.OLDEST_PENDING_ABOVE, for_seconds=300)
    lowest_idle, lowest_id = lowest(r, "orders", "billing")
    assert lowest_id == ids[0] and lowest_idle < 300_000  # the lowest ID alone would not breach
    before = pel_max(r, "orders", "billing")

    snap_and_evaluate(base)
    (alert,) = open_alerts()
    assert alert.target_group == "billing" and before[0] <= alert.last_value <= pel_max(r, "orders", "billing")[0]
    assert before[1] in alert.message and "idle for 10m" in alert.message

    # Every long-waiting entry acked: only the fresh one is left, and the alert resolves.
    r.xack("orders", "billing", *ids[1:])
    snap_and_evaluate(base + timedelta(seconds=10))
    assert open_alerts() == []


def test_dlq_growth_within_t(r: redis.Redis, db, base: datetime) -> None:
    for _ in range(2):
        r.xadd("orders:dlq", {"dlq_error": "boom", "dlq_original_stream": "orders"})
    make_rule(Kind.DLQ_GROWTH, threshold=3, for_seconds=60)
    snap_and_evaluate(base)
    assert open_alerts() == []

    for _ in range(5):
        r.xadd("orders:dlq", {"dlq_error": "boom", "dlq_original_stream": "orders"})
    snap_and_evaluate(base + timedelta(seconds=10))
    (alert,) = open_alerts()
    assert bytes(alert.target_key) == b"orders:dlq" and alert.last_value == 5
    assert "from 2 to 7" in alert.message and alert_url(alert) == "/c/default/dlq/orders%3Adlq/"

    # 61 s later nothing was added: no growth within the last 60 s.
    snap_and_evaluate(base + timedelta(seconds=71))
    assert open_alerts() == []


def test_consumer_inactive_opens_and_resolves_when_the_consumer_goes(r: redis.Redis, db, base: datetime) -> None:
    r.xadd("orders", {"n": "1"})
    r.xadd("orders", {"n": "2"})
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "w1", {"orders": ">"}, count=1)
    r.xreadgroup("billing", "w2", {"orders": ">"}, count=1)
    mirror.mirror_sync(conn=CONN)
    assert ConsumerMirror.objects.count() == 2
    # Redis only lets idle time grow with the clock: the mirror row stands for a sync ten minutes on.
    ConsumerMirror.objects.filter(name_text="w1").update(idle_ms=600_000)
    make_rule(Kind.CONSUMER_INACTIVE, for_seconds=300)

    alerts_evaluate(tick=base)
    (alert,) = open_alerts()
    assert (alert.target_group, alert.target_consumer) == ("billing", "w1")
    assert alert_url(alert) == "/c/default/streams/orders/groups/billing/"

    r.xgroup_delconsumer("orders", "billing", "w1")
    mirror.mirror_sync(conn=CONN)
    alerts_evaluate(tick=base + timedelta(seconds=10))
    assert open_alerts() == []


def test_stream_silent_needs_a_usual_flow_and_stays_open_until_entries_arrive(r: redis.Redis, db, base: datetime) -> None:
    ms = int(base.timestamp() * 1000)
    r.xadd("sensors", {"t": "1"}, id=f"{ms - 20 * 60_000}-0")  # last entry 20 minutes before the tick
    r.xadd("retired", {"t": "1"}, id=f"{ms - 5 * 3600_000}-0")  # silent for hours: not "usually receiving"
    r.xadd("live", {"t": "1"}, id=f"{ms - 60_000}-0")  # one minute ago
    r.xadd("live:dlq", {"dlq_error": "x"}, id=f"{ms - 20 * 60_000}-0")  # a quiet DLQ is good news
    mirror.mirror_sync(conn=CONN)
    make_rule(Kind.STREAM_SILENT, threshold=1, for_seconds=600)

    alerts_evaluate(tick=base)
    (alert,) = open_alerts()
    assert bytes(alert.target_key) == b"sensors" and alert.since == base - timedelta(minutes=20)

    # Hours later the silence is long past the baseline: still open, the same alert.
    later = base + timedelta(hours=3)
    alerts_evaluate(tick=later)
    assert [a.pk for a in open_alerts()] == [alert.pk]

    r.xadd("sensors", {"t": "2"}, id=f"{ms + 3 * 3600_000 - 5_000}-0")
    mirror.mirror_sync(conn=CONN)
    alerts_evaluate(tick=later + timedelta(seconds=10))
    assert open_alerts() == []


def test_stream_silent_counts_the_baseline_from_the_samples(r: redis.Redis, db, base: datetime) -> None:
    ms = int(base.timestamp() * 1000)
    r.xadd("sensors", {"t": "1"}, id=f"{ms - 20 * 60_000}-0")
    mirror.mirror_sync(conn=CONN)
    stream = StreamMirror.objects.get(key_hash=name_hash(b"sensors"))
    # Entries added per snapshot in the hour before the silent window (which starts 10 minutes ago).
    StreamSample.objects.bulk_create([
        StreamSample(stream=stream, at=base - timedelta(minutes=m), length=1, added=added)
        for m, added in ((50, 1), (30, 2))
    ])
    make_rule(Kind.STREAM_SILENT, threshold=5, for_seconds=600)
    alerts_evaluate(tick=base)
    assert open_alerts() == []  # 3 entries in the baseline: fewer than N = 5

    StreamSample.objects.create(stream=stream, at=base - timedelta(minutes=25), length=1, added=4)
    alerts_evaluate(tick=base + timedelta(seconds=10))
    assert len(open_alerts()) == 1  # 7 >= 5


def test_entries_the_snapshots_saw_end_a_silence_the_mirror_has_not_caught_up_with(r: redis.Redis, db, base: datetime) -> None:
    ms = int(base.timestamp() * 1000)
    r.xadd("sensors", {"t": "1"}, id=f"{ms - 20 * 60_000}-0")
    mirror.mirror_sync(conn=CONN)
    stream = StreamMirror.objects.get()
    StreamSample.objects.create(stream=stream, at=base - timedelta(minutes=2), length=2, added=1)
    make_rule(Kind.STREAM_SILENT, threshold=1, for_seconds=600)
    alerts_evaluate(tick=base)
    assert open_alerts() == []


def test_alerts_stay_open_while_their_connection_is_unreachable(r: redis.Redis, db, base: datetime) -> None:
    first = r.xadd("orders", {"n": "1"})
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "worker", {"orders": ">"})
    r.xclaim("orders", "billing", "worker", 0, [first], idle=600_000)
    make_rule(Kind.OLDEST_PENDING_ABOVE, for_seconds=300)
    snap_and_evaluate(base)
    assert len(open_alerts()) == 1

    # A tick whose snapshot could not reach the server holds no samples: no evidence either way.
    tick = base + timedelta(seconds=10)
    SnapshotRun.objects.create(tick=tick, started_at=tick, finished_at=tick, errors=[{"conn": CONN, "error": "down"}])
    alerts_evaluate(tick=tick)
    assert len(open_alerts()) == 1


def test_disabling_a_rule_resolves_its_alerts(r: redis.Redis, db, base: datetime) -> None:
    for _ in range(3):
        r.xadd("orders:dlq", {"dlq_error": "x"})
    rule = make_rule(Kind.DLQ_GROWTH, threshold=1, for_seconds=60)
    snap_and_evaluate(base)
    for _ in range(3):
        r.xadd("orders:dlq", {"dlq_error": "x"})
    snap_and_evaluate(base + timedelta(seconds=10))
    assert len(open_alerts()) == 1
    AlertRule.objects.filter(pk=rule.pk).update(enabled=False)
    alerts_evaluate(tick=base + timedelta(seconds=10))
    assert open_alerts() == []
