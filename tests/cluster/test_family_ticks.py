"""The rolling family pass of a family-mode snapshot on a real 3-primary Redis Cluster: the SCAN cursor
carries the node across ticks, every key on every primary is counted once, and no tick reads more than
``BUSCONSOLE_FAMILY_TICK_KEYS`` keys for the pass (Redis's own INFO commandstats, summed over the primaries).
Expected figures come from the test's own construction.
"""

from __future__ import annotations

from datetime import timedelta

import pytest
from django.test import override_settings
from redis.cluster import RedisCluster

from streams_app.metrics import snapshots
from streams_app.metrics.models import FamilySample, StreamSample, name_hash
from tests.console.metrics.helpers import T0

pytestmark = pytest.mark.django_db
N, TICK_KEYS = 40, 7


def _xinfo_calls(rc: RedisCluster) -> int:
    total = 0
    for node in rc.get_primaries():
        stats = rc.get_redis_connection(node).info("commandstats")
        total += stats.get("cmdstat_xinfo|stream", {}).get("calls", 0)
    return total


@override_settings(BUSCONSOLE_FAMILY_MODE_KEYS=5, BUSCONSOLE_FAMILY_TICK_KEYS=TICK_KEYS)
def test_the_pass_goes_across_the_primaries_tick_by_tick_and_counts_every_key_once(on_cluster, rc: RedisCluster) -> None:
    for i in range(N):
        for j in range(i % 3 + 1):
            rc.xadd(f"progress:{i}", {"j": j})
    assert len({rc.get_node_from_key(f"progress:{i}").name for i in range(N)}) == 3

    tick, ticks = T0, 0
    while ticks < 3 * N // TICK_KEYS:
        ticks += 1
        before = _xinfo_calls(rc)
        run = snapshots.snapshot_take(tick=tick)
        members = StreamSample.objects.filter(at=tick).count()
        assert _xinfo_calls(rc) - before - members <= TICK_KEYS
        if run.families["default"]["pass_complete"]:
            break
        tick += timedelta(seconds=10)
    assert run.families["default"]["pass_complete"] and ticks >= N // TICK_KEYS
    row = FamilySample.objects.get(connection="default", at=tick, family_hash=name_hash(b"progress:*"))
    assert (row.keys, row.entries, row.complete) == (N, sum(i % 3 + 1 for i in range(N)), True)
    assert row.busiest == [{"key": f"progress:{i}", "length": 3} for i in sorted(range(2, N, 3), key=lambda i: f"progress:{i}")][:5]
