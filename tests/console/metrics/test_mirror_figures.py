"""The figures a snapshot stages per stream (``mirror.stream_figures``, one loop over the groups) equal
what XINFO's groups give by plain Python: their pending entries summed, the largest lag Redis reports
and how many lags it cannot tell, with groups of every kind of lag, none, and many."""

from __future__ import annotations

import random

from streams_app.metrics.mirror import STREAM_FIGURES, stream_figures
from streams_app.redis_ops.types import GroupInfo, StreamInfo


def test_stream_figures_count_the_groups_as_plain_python_does() -> None:
    rng = random.Random(3)
    for i in range(300):
        groups = tuple(
            GroupInfo(name=b"g%d" % j, consumers=1, pending=rng.randrange(0, 9), last_delivered_id="1-0",
                      entries_read=None, lag=rng.choice([None, 0, 0, 4, 12, 12]))
            for j in range(rng.choice([0, 1, 2, 2, 5]))
        )
        last = rng.choice([None, f"{rng.randrange(1, 10**13)}-{rng.randrange(0, 9)}", "7"])
        s = StreamInfo(key=b"s%d" % i, length=rng.randrange(0, 50), first_id="1-0", last_id=last,
                       last_generated_id=last, entries_added=rng.choice([None, 9]), max_deleted_entry_id=None,
                       radix_tree_keys=None, groups=groups)
        got = dict(zip(STREAM_FIGURES, stream_figures(s), strict=True))
        lags = [g.lag for g in groups if g.lag is not None]
        assert got["pending"] == sum(g.pending for g in groups)
        assert got["lag"] == (max(lags) if lags else None)
        assert got["lag_unknown_groups"] == len(groups) - len(lags)
        assert got["groups_count"] == len(groups)
        assert got["last_entry_ms"] == (int(last.split("-")[0]) if last else None)
        assert (got["length"], got["last_id"], got["entries_added"]) == (s.length, last, s.entries_added)
