"""Family mode keeps the members whose work is stuck: lag as well as pending, and what a glob rule could
fire on (docs/operations.md#stream-families), over the real Redis.

Lag and pending come from Redis's own XINFO GROUPS in the test; which members are kept and how many the
cap leaves out are worked out here from the test's own construction.
"""

from __future__ import annotations

import re
from datetime import timedelta

import redis
from django.core.management import call_command
from django.test import Client, override_settings

from streams_app.alerts.evaluation import alerts_evaluate
from streams_app.alerts.models import Alert, AlertRule
from streams_app.metrics import snapshots
from streams_app.metrics.models import GroupSample, SnapshotRun, StreamSample
from tests.console.helpers import CONN
from tests.console.metrics.helpers import T0

FAMILY = override_settings(BUSCONSOLE_FAMILY_MODE_KEYS=10, BUSCONSOLE_FAMILY_TICK_KEYS=1000)


def _stream(r: redis.Redis, key: str, entries: int) -> None:
    with r.pipeline(transaction=False) as p:
        for i in range(entries):
            p.xadd(key, {"i": i})
        p.execute()


def _sampled(at) -> set[bytes]:
    return {bytes(k) for k in StreamSample.objects.filter(at=at).values_list("stream__key", flat=True)}


def _until_a_pass_completed(tick) -> tuple[object, SnapshotRun]:
    for _ in range(10):
        run = snapshots.snapshot_take(tick=tick)
        if run.families[CONN]["pass_complete"]:
            return tick, run
        tick += timedelta(seconds=10)
    raise AssertionError("no pass completed in 10 ticks")


@FAMILY
@override_settings(BUSCONSOLE_FAMILY_MEMBERS_MAX=100)
def test_a_group_with_lag_and_nothing_pending_is_kept_and_the_default_lag_rule_opens_on_it(
    r: redis.Redis, db
) -> None:
    for i in range(5):
        _stream(r, f"job:{i}", 1100)  # the five longest of job:*
    for i in range(5, 20):
        _stream(r, f"job:{i}", 1)
    _stream(r, "job:20", 1001)  # its consumers are down: 1,001 entries never delivered
    r.xgroup_create("job:20", "billing", id="0")
    _stream(r, "job:21", 3)  # Redis 7.0 cannot tell this group's lag once an entry is deleted
    r.xgroup_create("job:21", "billing", id="0")
    r.xdel("job:21", r.xrange("job:21")[1][0])
    lagging, holey = r.xinfo_groups("job:20")[0], r.xinfo_groups("job:21")[0]
    assert (lagging["lag"], lagging["pending"]) == (1001, 0)
    assert (holey["lag"], holey["pending"], holey["last-delivered-id"]) == (None, 0, b"0-0")
    call_command("ensure_alert_rules", verbosity=0)
    rule = AlertRule.objects.get(name="Group lagging behind")
    assert (rule.stream_glob, rule.threshold, rule.for_seconds) == ("*", 1000, 300)

    tick, _ = _until_a_pass_completed(T0)
    tick += timedelta(seconds=10)
    snapshots.snapshot_take(tick=tick)
    assert {b"job:20", b"job:21"} <= _sampled(tick)
    lags = dict(GroupSample.objects.filter(at=tick, group__stream__key__in=[b"job:20", b"job:21"])
                .values_list("group__stream__key", "lag"))
    assert {bytes(k): v for k, v in lags.items()} == {b"job:20": 1001, b"job:21": None}

    later = tick + timedelta(seconds=rule.for_seconds)
    snapshots.snapshot_take(tick=later)
    alerts_evaluate(tick=later)  # as after the snapshot's commit
    opened = Alert.objects.filter(rule=rule, state=Alert.State.OPEN)
    assert [(bytes(a.target_key), a.target_group) for a in opened] == [(b"job:20", "billing")]


def _lagging(r: redis.Redis, key: str, entries: int) -> None:
    _stream(r, key, entries)
    r.xgroup_create(key, "g", id="0")


@FAMILY
@override_settings(BUSCONSOLE_FAMILY_MEMBERS_MAX=4)
def test_the_cap_keeps_the_most_stuck_work_first_and_counts_the_members_it_left_out(
    r: redis.Redis, viewer_client: Client
) -> None:
    for i in range(12):
        _stream(r, f"job:{i}", 1)
    for i in range(10, 15):
        _stream(r, f"lag:{i}", 50)  # the five longest of lag:*, no group
    for i, n in enumerate((2, 7, 3, 9, 5, 4)):  # lag n, nothing pending
        _lagging(r, f"lag:{i}", n)
    _lagging(r, "lag:6", 6)
    r.xreadgroup("g", "c", {"lag:6": ">"}, count=6)  # six pending, no lag
    stuck = {}
    for key in [f"lag:{i}".encode() for i in range(7)]:
        g = r.xinfo_groups(key)[0]
        stuck[key] = g["lag"] + g["pending"]
    assert stuck[b"lag:6"] == 6 and r.xinfo_groups("lag:6")[0]["lag"] == 0
    kept = sorted(stuck, key=lambda k: (-stuck[k], k))[:4]
    assert kept == [b"lag:3", b"lag:1", b"lag:6", b"lag:4"]

    tick, run = _until_a_pass_completed(T0)
    left_out = len(stuck) - 4  # the stuck ones beyond the cap (the five longest of each family rank after)
    assert run.families[CONN]["members_left_out"] == left_out
    tick += timedelta(seconds=10)
    run = snapshots.snapshot_take(tick=tick)
    assert _sampled(tick) == set(kept)
    assert run.families[CONN]["members_left_out"] == left_out
    page = viewer_client.get(f"/c/{CONN}/families/").content.decode()
    notice = re.search(r'<p class="warn-text small members-left-out"[^>]*>(.*?)</p>', page, re.S)
    assert notice is not None and notice.group(1).startswith(f"{left_out} members that matter "), page
    assert viewer_client.get(f"/api/v1/c/{CONN}/families/").json()["members_left_out"] == left_out


@FAMILY
@override_settings(BUSCONSOLE_FAMILY_MEMBERS_MAX=3)
def test_a_glob_rule_keeps_the_members_it_could_fire_on_before_other_stuck_ones(r: redis.Redis, db) -> None:
    for i in range(12):
        _stream(r, f"job:{i}", 1)
    for i in range(4):
        _lagging(r, f"big:{i}", 20 + i)  # the most lag, no rule watches them
    _lagging(r, "pay:0", 3)  # lag 3 > 2: the rule could fire
    _lagging(r, "pay:1", 1)  # lag 1: it could not
    _lagging(r, "pay:2", 4)
    r.xreadgroup("g", "c", {"pay:2": ">"}, count=4)  # four pending, no lag: the pending rule could fire
    assert [r.xinfo_groups(f"pay:{i}")[0]["lag"] for i in range(3)] == [3, 1, 0]
    AlertRule.objects.create(name="pay lag", kind=AlertRule.Kind.GROUP_LAG_ABOVE, stream_glob="pay:*", threshold=2)
    AlertRule.objects.create(name="pay stuck", kind=AlertRule.Kind.OLDEST_PENDING_ABOVE, stream_glob="pay:*",
                             group_glob="g", threshold=0)
    AlertRule.objects.create(name="off", kind=AlertRule.Kind.GROUP_LAG_ABOVE, stream_glob="big:*", enabled=False)

    tick, run = _until_a_pass_completed(T0)
    tick += timedelta(seconds=10)
    snapshots.snapshot_take(tick=tick)
    # the two the rules could fire on (the heavier first), then the most lag among the rest
    assert _sampled(tick) == {b"pay:2", b"pay:0", b"big:3"}
