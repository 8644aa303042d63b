"""The anomalies rollup flags the planted spike and drop only (a z-score against the same hour of day
on the preceding days, computed here in plain Python), and hours after the last entry count as zero
until ``as_of``.

The history is written to the real Redis, exported by the real exporter and rolled up by real Spark
(``run_all``, the entry point ``spark-submit`` uses); the rollup files are read back with pyarrow. The
expected values are computed here from the generated entries, never by the pipeline's code (docs/architecture.md#tests).
"""

from __future__ import annotations

import statistics
from pathlib import Path

import pytest

from tests.pipeline import data
from tests.pipeline.rollups import at, rollup, run

pytestmark = [pytest.mark.spark, pytest.mark.django_db]


# ---------------------------------------------------------------------------------------- anomalies


def expected_anomalies(counts: dict[int, int], last_start: int, threshold: float = 3.0) -> dict[int, float]:
    """z per flagged hour by the rule of ``transform.anomalies``, over a dense hour grid."""
    hours = range(min(counts), last_start + 1, data.HOUR_MS)
    dense = {h: counts.get(h, 0) for h in hours}
    flagged = {}
    for h, x in dense.items():
        baseline = [dense[h - k * data.DAY_MS] for k in range(1, 15) if h - k * data.DAY_MS in dense]
        if len(baseline) < 3:
            continue
        z = (x - statistics.mean(baseline)) / max(statistics.stdev(baseline), 1.0)
        if abs(z) >= threshold:
            flagged[h] = z
    return flagged


def test_anomalies_flag_the_planted_spike_and_drop_only(spark, r, lake_dir: Path) -> None:
    entries, counts = data.hourly_traffic()
    data.write(r, entries)
    end = data.T0 + 10 * data.DAY_MS  # the end of the last generated hour
    run(spark, lake_dir, ["anomalies"], as_of=at(end))

    expected = expected_anomalies(counts, end - data.HOUR_MS)
    spike, drop = data.T0 + 8 * data.DAY_MS + 14 * data.HOUR_MS, data.T0 + 9 * data.DAY_MS + 3 * data.HOUR_MS
    assert set(expected) == {spike, drop}  # the generated pattern itself stays under the threshold
    got = {int(x["hour"].timestamp() * 1000): x for x in rollup(lake_dir, "anomalies")}
    assert set(got) == set(expected)
    for hour, z in expected.items():
        assert got[hour]["z"] == pytest.approx(z, rel=1e-9)
        assert got[hour]["entries"] == counts[hour] and got[hour]["threshold"] == 3.0
    assert got[spike]["direction"] == "spike" and got[drop]["direction"] == "drop"
    assert got[spike]["baseline_points"] == 8 and got[drop]["baseline_points"] == 9


def test_hours_after_the_last_entry_count_as_zero_until_as_of(spark, r, lake_dir: Path) -> None:
    entries, counts = data.hourly_traffic()
    data.write(r, entries)
    end = data.T0 + 10 * data.DAY_MS + 3 * data.HOUR_MS  # three silent hours after the data
    run(spark, lake_dir, ["anomalies"], as_of=at(end + 1800_000))
    expected = expected_anomalies(counts, end - data.HOUR_MS)
    got = {int(x["hour"].timestamp() * 1000) for x in rollup(lake_dir, "anomalies")}
    assert got == set(expected) and {end - h * data.HOUR_MS for h in (1, 2, 3)} <= got
