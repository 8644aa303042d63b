"""The longest pending idle time on a real 3-primary Redis Cluster: the snapshot's probes and IDLE rounds
are pipelined per node, and every group's figure is the maximum XPENDING reports over its whole PEL.

PELs are shaped with ``XCLAIM ... IDLE`` (``tests/console/redis_ops/pel.py``); ``rc.get_node_from_key``
proves the streams sit on three nodes, so a round really is split by node.
"""

from __future__ import annotations

import pytest
from redis.cluster import RedisCluster

from streams_app.redis_ops import snapshot_reads
from streams_app.redis_ops.reads import groups as group_reads
from tests.console.redis_ops.pel import FRESH, measured, pel, pel_max

pytestmark = pytest.mark.django_db
MIN = 60_000


def test_snapshot_and_group_read_give_the_longest_idle_on_every_node(
    on_cluster: str, rc: RedisCluster
) -> None:
    keys = [f"orders:{i}" for i in range(9)]
    assert len({rc.get_node_from_key(k).name for k in keys}) == 3
    expected_ids = {}
    for i, key in enumerate(keys):
        # The lowest ID claimed just now; entry 5 + i waited longest, far behind the first K.
        idles: list[int | None] = [FRESH] + [MIN + j * 1_000 for j in range(1, 30)]
        idles[5 + 2 * i] = (10 + i) * MIN
        expected_ids[key] = pel(rc, key, "billing", idles)[5 + 2 * i]

    before = {k: pel_max(rc, k, "billing") for k in keys}
    (infos, _), slack_ms = measured(
        lambda: snapshot_reads.streams_read(on_cluster, [k.encode() for k in keys])
    )
    after = {k: pel_max(rc, k, "billing") for k in keys}
    assert [bytes(s.key).decode() for s in infos] == keys
    for info in infos:
        key = info.key.decode()
        [group] = info.groups
        figure = group.longest_idle
        assert figure is not None and figure.exact, key
        assert figure.id == before[key][1] == after[key][1] == expected_ids[key]
        assert before[key][0] - slack_ms <= figure.idle_ms <= after[key][0]

    key = keys[4]
    figure = group_reads.group_info(on_cluster, key.encode(), b"billing").longest_idle
    assert figure is not None and figure.exact and figure.id == expected_ids[key]
