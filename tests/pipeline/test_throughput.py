"""The throughput rollup (per stream and type, per minute and hour) against a plain-Python count of the
same generated history, and what a second run and an empty lake leave.

The history is written to the real Redis, exported by the real exporter and rolled up by real Spark
(``run_all``, the entry point ``spark-submit`` uses); the rollup files are read back with pyarrow. The
expected values are computed here from the generated entries, never by the pipeline's code (docs/architecture.md#tests).
"""

from __future__ import annotations

from collections import Counter
from pathlib import Path

import pytest

from pipeline import main
from tests.pipeline import data
from tests.pipeline.rollups import rollup, run

pytestmark = [pytest.mark.spark, pytest.mark.django_db]


def test_throughput_per_stream_and_type_per_minute_and_hour(spark, r, lake_dir: Path) -> None:
    entries = data.traffic()
    data.write(r, entries)
    run(spark, lake_dir, ["throughput"])

    expected: Counter = Counter()
    for e in entries:
        fields = dict(e.fields)
        kind = fields[b"type"].decode() if b"type" in fields else ""
        size = sum(len(x) for pair in e.fields for x in pair)
        for resolution, width in (("minute", 60_000), ("hour", data.HOUR_MS)):
            bucket = e.ms - e.ms % width
            for scope, type_ in (("type", kind), ("stream", "")):
                expected[(e.key, scope, type_, resolution, bucket, "n")] += 1
                expected[(e.key, scope, type_, resolution, bucket, "b")] += size
    got: Counter = Counter()
    for row in rollup(lake_dir, "throughput"):
        key = (row["stream"], row["scope"], row["event_type"], row["resolution"], int(row["bucket"].timestamp() * 1000))
        assert row["conn"] == "default"
        assert row["stream_text"] == ("bin\\xfekey" if row["stream"] == b"bin\xfekey" else "orders")
        got[(*key, "n")] += row["entries"]
        got[(*key, "b")] += row["bytes"]
    assert got == expected
    assert {k[2] for k in expected if k[1] == "type"} == {"order.created", "order.paid", "ünïcode", ""}


def test_a_second_run_replaces_the_throughput_rollup_and_an_empty_lake_gives_none(spark, r, lake_dir: Path) -> None:
    """The job writes the minute rows, then adds the hours and totals it derives from the files it wrote:
    a run over a lake whose rollup exists must replace every part of it, not add a second set."""
    results = main.run_all(spark, str(lake_dir), jobs=["throughput", "anomalies"])  # nothing exported yet
    assert {name: n for result in results for name, n in result.rows.items()} == {"throughput": 0, "anomalies": 0}
    assert rollup(lake_dir, "throughput") == []

    entries = data.traffic()
    data.write(r, entries)
    run(spark, lake_dir, ["throughput"])
    first = Counter(tuple(sorted(row.items())) for row in rollup(lake_dir, "throughput"))
    main.run_all(spark, str(lake_dir), jobs=["throughput"])
    assert Counter(tuple(sorted(row.items())) for row in rollup(lake_dir, "throughput")) == first
    # every entry is counted once per scope and resolution: four parts, each summing to all the entries
    parts = Counter()
    for row, n in first.items():
        values = dict(row)
        parts[(values["scope"], values["resolution"])] += values["entries"] * n
    assert parts == {(scope, res): len(entries) for scope in ("type", "stream") for res in ("minute", "hour")}
