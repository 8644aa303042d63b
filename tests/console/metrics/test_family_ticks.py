"""The snapshot tick by stream family (docs/operations.md#stream-families), over the real Redis.

Below ``BUSCONSOLE_FAMILY_MODE_KEYS`` every tick also writes one FamilySample per family, equal to a
plain-Python grouping of Redis's own XINFO replies. Above it (family mode) the rolling pass spread over
several ticks reads at most ``BUSCONSOLE_FAMILY_TICK_KEYS`` keys a tick (Redis's own INFO commandstats),
its rows equal plain-Python sums over the keys the test made with explicit entry counts, per-stream
samples and mirror rows exist only for the interesting members (computed here from the test's own
construction), and the mirror marks nothing deleted.
"""

from __future__ import annotations

import re
from datetime import timedelta
from typing import Any

import pytest
import redis
from django.test import override_settings

from streams_app.alerts.models import AlertRule
from streams_app.metrics import mirror_schedule, pruning, snapshots
from streams_app.metrics.models import FamilySample, StreamMirror, StreamSample, name_hash
from tests.console.helpers import CONN
from tests.console.metrics.helpers import T0


def _family(key: bytes) -> bytes:
    """The test's own grouping of its key shapes: a numeric segment becomes ``*``, else the key itself."""
    return re.sub(rb"(^|:)[0-9]+(?=:|$)", rb"\1*", key)


def _expected_rows(r: redis.Redis) -> dict[bytes, dict[str, Any]]:
    """Per family, the sums of Redis's XINFO STREAM and XINFO GROUPS over SCAN's stream keys."""
    out: dict[bytes, dict[str, Any]] = {}
    firsts: dict[bytes, list[tuple[int, int, str]]] = {}
    lasts: dict[bytes, list[tuple[int, int, str]]] = {}
    for key in r.scan_iter(count=100, _type="stream"):
        info, groups = r.xinfo_stream(key), r.xinfo_groups(key)
        fam = out.setdefault(_family(key), {"keys": 0, "entries": 0, "entries_added": 0, "groups": 0, "pending": 0,
                                             "dlq_keys": 0, "dlq_depth": 0, "busiest": []})
        fam["keys"] += 1
        fam["entries"] += info["length"]
        fam["entries_added"] += info["entries-added"]
        fam["groups"] += len(groups)
        fam["pending"] += sum(g["pending"] for g in groups)
        fam["busiest"].append((info["length"], key))
        for entry, into in ((info["first-entry"], firsts), (info["last-entry"], lasts)):
            if entry:
                ms, seq = entry[0].decode().split("-")
                into.setdefault(_family(key), []).append((int(ms), int(seq), entry[0].decode()))
        if key.endswith(b":dlq"):  # the console's default convention: <stream>:dlq feeds <stream>
            fed = out.setdefault(_family(key[:-4]), {"keys": 0, "entries": 0, "entries_added": 0, "groups": 0,
                                                      "pending": 0, "dlq_keys": 0, "dlq_depth": 0, "busiest": []})
            fed["dlq_keys"] += 1
            fed["dlq_depth"] += info["length"]
    for fam, sums in out.items():
        sums["oldest_id"] = min(firsts[fam])[2] if fam in firsts else ""
        sums["newest_id"] = max(lasts[fam])[2] if fam in lasts else ""
        sums["busiest"] = [{"key": k.decode(), "length": n} for n, k in sorted(sums["busiest"], key=lambda x: (-x[0], x[1]))[:5]]
    return out


def _rows_at(at) -> dict[bytes, dict[str, object]]:
    fields = ("keys", "entries", "entries_added", "groups", "pending", "dlq_keys", "dlq_depth", "oldest_id",
              "newest_id", "busiest")
    return {row.family.encode(): {f: getattr(row, f) for f in fields}
            for row in FamilySample.objects.filter(connection=CONN, at=at)}


def _fill(r: redis.Redis, n: int) -> dict[bytes, int]:
    """``progress:<i>`` with (i % 4) + 1 entries, three ``task:<i>:events``, ``orders`` with a group and two
    pending entries, ``orders:dlq``; progress:3 has a group with two pending. Returns each key's XLEN."""
    made: dict[bytes, int] = {}
    for i in range(n):
        for j in range(i % 4 + 1):
            r.xadd(f"progress:{i}", {"j": j})
        made[f"progress:{i}".encode()] = i % 4 + 1
    for i in range(3):
        r.xadd(f"task:{i}:events", {"e": i})
        made[f"task:{i}:events".encode()] = 1
    for key, count in ((b"orders", 6), (b"orders:dlq", 2)):
        for j in range(count):
            r.xadd(key, {"j": j})
        made[key] = count
    for key in (b"orders", b"progress:3"):
        r.xgroup_create(key, "g", id="0")
        r.xreadgroup("g", "c", {key: ">"}, count=2)
    r.set("not-a-stream", "x")
    return made


def test_below_the_threshold_each_tick_writes_family_rows_equal_to_a_grouping_of_xinfo(r: redis.Redis, db) -> None:
    _fill(r, 10)
    snapshots.snapshot_take(tick=T0)
    assert _rows_at(T0) == _expected_rows(r)
    assert set(FamilySample.objects.filter(at=T0).values_list("complete", "keys_total").distinct()) == {(True, r.dbsize())}
    # every stream still gets its per-stream sample, as before
    assert StreamSample.objects.filter(at=T0).count() == len(list(r.scan_iter(_type="stream")))

    for _ in range(7):
        r.xadd("progress:1", {"more": 1})
    snapshots.snapshot_take(tick=T0 + timedelta(seconds=10))
    rate = FamilySample.objects.get(at=T0 + timedelta(seconds=10), family_hash=name_hash(b"progress:*")).rate_per_s
    assert rate == pytest.approx(7 / 10)


def _xinfo_calls(r: redis.Redis) -> int:
    stats = r.info("commandstats")
    return stats.get("cmdstat_xinfo|stream", {}).get("calls", 0)


@override_settings(BUSCONSOLE_FAMILY_MODE_KEYS=20, BUSCONSOLE_FAMILY_TICK_KEYS=9, BUSCONSOLE_FAMILY_MEMBERS_MAX=100)
def test_family_mode_spreads_the_pass_over_ticks_and_keeps_rows_of_the_interesting_members_only(
    r: redis.Redis, db
) -> None:
    made = _fill(r, 60)
    AlertRule.objects.create(name="watch 17", kind=AlertRule.Kind.STREAM_SILENT, stream_glob="progress:17")
    expected = _expected_rows(r)
    # The plain-Python sums of the test's own construction agree with Redis's
    assert expected[b"progress:*"]["entries"] == sum(i % 4 + 1 for i in range(60))
    assert expected[b"progress:*"]["keys"] == 60
    # The members that matter: named by a rule, families of one key (and the DLQ with its stream), pending,
    # and the five longest of each family (ties: the key that sorts first)
    by_family: dict[bytes, list[bytes]] = {}
    for key in made:
        by_family.setdefault(_family(key), []).append(key)
    busiest = {k for keys in by_family.values() for k in sorted(keys, key=lambda k: (-made[k], k))[:5]}
    interesting = {b"progress:17", b"orders", b"orders:dlq", b"progress:3"} | busiest
    assert len(interesting) < len(made) // 2

    tick, ticks = T0, 0
    while True:
        before = _xinfo_calls(r)
        run = snapshots.snapshot_take(tick=tick)
        read = _xinfo_calls(r) - before
        sampled = {bytes(k) for k in StreamSample.objects.filter(at=tick).values_list("stream__key", flat=True)}
        assert sampled <= interesting, sampled - interesting
        assert read - len(sampled) <= 9, (tick, read, len(sampled))  # the pass's share: TICK_KEYS at most
        assert run.families[CONN]["mode"] == "family", run.families
        ticks += 1
        if run.families[CONN]["pass_complete"]:
            break
        assert not FamilySample.objects.filter(connection=CONN).exists()  # no rows from half a pass
        assert ticks < 20
        tick += timedelta(seconds=10)
    assert ticks >= len(made) // 9
    assert _rows_at(tick) == expected
    assert set(FamilySample.objects.values_list("complete", "keys_total").distinct()) == {(True, r.dbsize())}

    tick += timedelta(seconds=10)
    snapshots.snapshot_take(tick=tick)  # the next tick reads the completed pass's members: all of them
    assert {bytes(k) for k in StreamSample.objects.filter(at=tick).values_list("stream__key", flat=True)} == interesting

    result = mirror_schedule.mirror_sync_guarded()[CONN]
    assert not isinstance(result, str) and result.streams_deleted == 0
    rows = StreamMirror.objects.filter(connection=CONN)
    assert {bytes(k) for k in rows.values_list("key", flat=True)} == interesting
    assert not rows.filter(deleted_at__isnull=False).exists()


@override_settings(BUSCONSOLE_FAMILY_MODE_KEYS=20, BUSCONSOLE_FAMILY_TICK_KEYS=9, BUSCONSOLE_FAMILY_MEMBERS_MAX=100)
def test_keys_that_vanish_mid_pass_are_left_out_and_nothing_else_is_lost(r: redis.Redis, db) -> None:
    """SCAN counts every key present for the whole pass once; a key deleted meanwhile counts at most once."""
    made = _fill(r, 60)
    snapshots.snapshot_take(tick=T0)
    gone = [f"progress:{i}".encode() for i in range(0, 60, 2)]
    r.delete(*gone)
    kept = {k: n for k, n in made.items() if k.startswith(b"progress:") and k not in gone}
    tick = T0
    while not FamilySample.objects.exists():
        tick += timedelta(seconds=10)
        run = snapshots.snapshot_take(tick=tick)
        assert not run.errors
        assert tick < T0 + timedelta(seconds=200)
    row = FamilySample.objects.get(at=tick, family_hash=name_hash(b"progress:*"))
    assert len(kept) <= row.keys <= 60
    extra = row.keys - len(kept)  # deleted keys the pass read before they went: at most one tick's worth
    assert extra <= 9
    assert sum(kept.values()) <= row.entries <= sum(kept.values()) + sum(made[k] for k in gone)


def test_family_rows_follow_the_raw_retention(r: redis.Redis, db, settings) -> None:
    _fill(r, 4)
    old, new = T0, T0 + timedelta(hours=settings.BUSCONSOLE_RETENTION_RAW_H, seconds=10)
    snapshots.snapshot_take(tick=old)
    snapshots.snapshot_take(tick=new)
    families = FamilySample.objects.filter(at=new).count()
    assert families == FamilySample.objects.filter(at=old).count() > 0
    deleted = pruning.samples_prune(now=new + timedelta(seconds=1))
    assert deleted["families"] == families
    assert set(FamilySample.objects.values_list("at", flat=True)) == {new}


@override_settings(BUSCONSOLE_FAMILY_MODE_KEYS=20, BUSCONSOLE_FAMILY_TICK_KEYS=10)
def test_a_keyspace_of_few_streams_among_many_keys_is_gone_through_over_several_ticks(r: redis.Redis, db) -> None:
    """SCAN's COUNTs of one tick stay within a few times TICK_KEYS even when few keys are streams."""
    r.mset({f"plain:{i}": "x" for i in range(400)})
    for i in range(5):
        r.xadd(f"job:{i}", {"i": i})
    tick, scans = T0, []
    while not FamilySample.objects.exists():
        before = r.info("commandstats").get("cmdstat_scan", {}).get("calls", 0)
        snapshots.snapshot_take(tick=tick)
        scans.append(r.info("commandstats")["cmdstat_scan"]["calls"] - before)
        tick += timedelta(seconds=10)
        assert len(scans) < 40
    assert len(scans) > 1 and max(scans) <= 4  # at most 4 x 10 keys looked at a tick, COUNT 10 a call
    assert FamilySample.objects.get(family_hash=name_hash(b"job:*")).keys == 5


def test_a_pass_left_under_way_below_the_threshold_starts_afresh_above_it(r: redis.Redis, db, settings) -> None:
    _fill(r, 30)
    settings.BUSCONSOLE_FAMILY_MODE_KEYS, settings.BUSCONSOLE_FAMILY_TICK_KEYS = 20, 9
    snapshots.snapshot_take(tick=T0)  # a pass begins
    settings.BUSCONSOLE_FAMILY_MODE_KEYS = 1000
    snapshots.snapshot_take(tick=T0 + timedelta(seconds=10))  # stream by stream
    r.delete(*[f"progress:{i}" for i in range(10)])
    settings.BUSCONSOLE_FAMILY_MODE_KEYS = 20
    tick = T0 + timedelta(seconds=20)
    while not snapshots.snapshot_take(tick=tick).families[CONN]["pass_complete"]:
        tick += timedelta(seconds=10)
        assert tick < T0 + timedelta(seconds=200)
    assert _rows_at(tick) == _expected_rows(r)
