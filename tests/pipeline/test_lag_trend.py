"""The lag trend rollup per group, which uses each hour's finest samples, against the samples written here.

The history is written to the real Redis, exported by the real exporter and rolled up by real Spark
(``run_all``, the entry point ``spark-submit`` uses); the rollup files are read back with pyarrow. The
expected values are computed here from the generated entries, never by the pipeline's code (docs/architecture.md#tests).
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest

from streams_app.metrics.models import GroupMirror, GroupSample, StreamMirror, name_hash
from tests.pipeline import data
from tests.pipeline.rollups import at, rollup, run

pytestmark = [pytest.mark.spark, pytest.mark.django_db]


# ---------------------------------------------------------------------------------------- lag trend


def test_lag_trend_per_group_uses_each_hours_finest_samples(spark, lake_dir: Path) -> None:
    base = at(data.T0 + 9 * data.HOUR_MS)  # 09:00
    stream = StreamMirror.objects.create(
        connection="default", key=b"orders", key_hash=name_hash(b"orders"), key_text="orders",
        first_seen=base, last_seen=base, synced_at=base,
    )
    group = GroupMirror.objects.create(
        stream=stream, name=b"bill\xffing", name_hash=name_hash(b"bill\xffing"), name_text="bill\\xffing",
        first_seen=base, last_seen=base,
    )
    samples = [  # (minutes after 09:00, resolution, lag, pending, idle)
        (0, "1h", 3, 1, 100),  # 09:00: only an hourly rollup
        (60, "1h", 50, 50, 50), (60, "1m", 40, 40, 40),  # 10:00 also has raw samples: both ignored
        (65, "raw", 5, 2, None), (75, "raw", None, 3, 700), (85, "raw", 8, 1, 200),
        (95, "raw", 12, 6, None), (105, "raw", 9, 2, 50), (115, "raw", 20, 4, None),
        (120, "1m", 1, 0, None), (121, "1m", 2, 1, None), (122, "1m", 4, 1, 10),  # 11:00: 1-minute rows
    ]
    for minutes, resolution, lag, pending, idle in samples:
        GroupSample.objects.create(group=group, at=base + timedelta(minutes=minutes), resolution=resolution,
                                   lag=lag, pending=pending, oldest_pending_idle_ms=idle)
    run(spark, lake_dir, ["lag_trend"], as_of=base + timedelta(hours=6))

    finest = {0: "1h", 1: "raw", 2: "1m"}
    got = {int((x["hour"] - base).total_seconds() // 3600): x for x in rollup(lake_dir, "lag_trend")}
    assert set(got) == {0, 1, 2}
    for hour, row in got.items():
        used = [s for s in samples if s[0] // 60 == hour and s[1] == finest[hour]]
        lags = [s[2] for s in used if s[2] is not None]
        idles = [s[4] for s in used if s[4] is not None]
        assert (row["group"], row["group_text"], row["stream"]) == (b"bill\xffing", "bill\\xffing", b"orders")
        assert row["samples"] == len(used)
        assert row["mean_lag"] == pytest.approx(sum(lags) / len(lags))
        assert (row["max_lag"], row["last_lag"], row["lag_change"]) == (max(lags), lags[-1], lags[-1] - lags[0])
        assert row["max_pending"] == max(s[3] for s in used)
        assert row["max_idle_ms"] == (max(idles) if idles else None)
