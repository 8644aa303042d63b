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
from streams_app.lake import export
from tests.pipeline import data
from tests.pipeline.rollups import rollup, run

pytestmark = [pytest.mark.spark, pytest.mark.django_db]


def _expected(entries: list[data.Entry]) -> Counter:
    """The rollup's counts and bytes by (stream, scope, type, resolution, bucket), counted here."""
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
    return expected


def _got(lake_dir: Path) -> Counter:
    got: Counter = Counter()
    for row in rollup(lake_dir, "throughput"):
        key = (row["stream"], row["scope"], row["event_type"], row["resolution"], int(row["bucket"].timestamp() * 1000))
        assert row["conn"] == "default"
        assert row["stream_text"] == ("bin\\xfekey" if row["stream"] == b"bin\xfekey" else "orders")
        got[(*key, "n")] += row["entries"]
        got[(*key, "b")] += row["bytes"]
    return got


def test_throughput_per_stream_and_type_per_minute_and_hour(spark, r, lake_dir: Path, caplog) -> None:
    entries = data.traffic()
    data.write(r, entries)
    run(spark, lake_dir, ["throughput"])

    expected = _expected(entries)
    assert _got(lake_dir) == expected
    assert {k[2] for k in expected if k[1] == "type"} == {"order.created", "order.paid", "ünïcode", ""}
    # grouped on the streams' hashes, the names joined back: nothing made it fall back to the keys
    assert "grouping on the stream keys instead" not in caplog.text


def test_a_stream_whose_directory_names_another_still_counts_exactly(spark, r, lake_dir: Path, caplog) -> None:
    """The streams are named from one file per stream directory. A file moved by hand into another
    stream's directory, first there, leaves that stream unnamed: the job must see the groups its join
    dropped and count on the stream keys instead, never write a rollup without them."""
    entries = data.traffic()
    data.write(r, entries)
    stats = export.export_run()
    assert not stats.failed
    base = lake_dir / "entries" / "connection=default"
    (orders,) = (base / f"stream_hex={b'orders'.hex()}").rglob("*.parquet")
    binary = sorted((base / ("stream_hex=" + b"bin\xfekey".hex())).rglob("*.parquet"))
    orders.rename(binary[0].parent / "part-0-moved.parquet")  # sorts before the directory's own files

    main.run_all(spark, str(lake_dir), jobs=["throughput"])

    assert _got(lake_dir) == _expected(entries)
    assert "throughput: a stream left unnamed (" in caplog.text


def test_streams_sharing_a_hash_are_still_counted_apart(spark, r, lake_dir: Path, caplog, monkeypatch) -> None:
    """Two streams whose 64-bit ids are equal would be counted as one; every stream is given the same
    id here (no real pair of keys is known to collide) and the job must notice and count on the keys."""
    from pyspark.sql import functions as F

    from pipeline import transform

    monkeypatch.setattr(transform, "stream_id", lambda conn, stream: F.lit(0).cast("long"))
    entries = data.traffic()
    data.write(r, entries)
    run(spark, lake_dir, ["throughput"])

    assert _got(lake_dir) == _expected(entries)
    assert "throughput: a shared stream id; grouping on the stream keys instead" in caplog.text


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
