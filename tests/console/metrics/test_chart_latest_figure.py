"""A chart's headline figure is its newest snapshot, said as such, beside the live card.

The DLQ page showed depth 44 on its card and 45 on its chart: with more snapshots in the window than the
chart has points, each point is the maximum of a bucket of snapshots, and the headline figure was the last
bucket's maximum, not the newest snapshot. Here a DLQ holds 45 dead letters at one snapshot and 44 at the
next and last one (one was requeued); the expected figures are XLEN at each tick, read by the test.
"""

from __future__ import annotations

import re
from datetime import timedelta

import redis
from django.test import Client
from django.utils import timezone

from streams_app.metrics import snapshots
from tests.console.helpers import dlq_url

DLQ = "{orders}:dlq"
#: Snapshots taken: more than the 220 points of a full-size chart, so buckets hold two each.
TICKS = 240


def fill(r: redis.Redis) -> list[int]:
    """One snapshot per 10 s over the last 40 minutes; the DLQ grows to 45, then loses one at the last tick.
    Returns XLEN at each tick."""
    start = snapshots.snapshot_tick_for(now=timezone.now() - timedelta(seconds=10 * TICKS), interval_s=10)
    depths = []
    ids = []
    for i in range(TICKS):
        if i == TICKS - 1:
            r.xdel(DLQ, ids.pop())  # requeued, say: the newest snapshot sees one fewer
        else:
            while r.xlen(DLQ) < min(45, 1 + i // 5):
                ids.append(r.xadd(DLQ, {"type": "t", "dlq_original_stream": "orders", "dlq_error": "E: x"}))
        depths.append(r.xlen(DLQ))
        snapshots.snapshot_take(tick=start + timedelta(seconds=10 * i))
    return depths


def test_dlq_chart_headline_is_the_newest_snapshot(r: redis.Redis, viewer_client: Client) -> None:
    depths = fill(r)
    assert depths[-2:] == [45, 44]
    body = viewer_client.get(dlq_url(DLQ)).content.decode()
    card = re.search(r'<span class="label"[^>]*>Depth[^<]*</span><span class="value">(\d+)</span>', body)
    assert card and int(card.group(1)) == r.xlen(DLQ) == 44
    caption = re.search(r'data-chart="dead-letters-waiting">(.*?)</figcaption>', body, re.S).group(1)
    last = re.search(r'<span class="chart-last"[^>]*>([^<]+)</span>', caption).group(1)
    assert last.strip() == str(depths[-1])
    assert "last snapshot" in caption  # what it is and when it was read
    assert "live now" in body.split('<section class="facts">', 1)[1].split("</section>", 1)[0]
