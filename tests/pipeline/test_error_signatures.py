"""Error signatures and the retries histogram of the failures rollup, against a plain-Python computation
over the same generated history, with the lake laid out by month or partly by day.

The history is written to the real Redis, exported by the real exporter and rolled up by real Spark
(``run_all``, the entry point ``spark-submit`` uses); the rollup files are read back with pyarrow. The
expected values are computed here from the generated entries, never by the pipeline's code, except that error signatures are grouped with :func:`normalize_error`, whose rules have their own
literal cases here, checked against both the Python and the Spark implementation (docs/architecture.md#tests).
"""

from __future__ import annotations

from collections import Counter, defaultdict
from datetime import UTC, datetime
from pathlib import Path

import pyarrow as pa
import pyarrow.compute as pc
import pyarrow.parquet as pq
import pytest

from pipeline import extract, failures, main, signatures
from pipeline.signatures import NO_ERROR, normalize_error
from streams_app.lake import export
from tests.pipeline import data
from tests.pipeline.rollups import at, rollup

pytestmark = [pytest.mark.spark, pytest.mark.django_db]


# ------------------------------------------------------------------------------------ normalization

CASES = [
    ("ValueError: order 12345 not found", "ValueError: order <num> not found"),
    ("KeyError: 'sku-42'", "KeyError: <str>"),
    (
        'app.errors.PaymentDeclined: card "4111 1111" declined for 550e8400-e29b-41d4-a716-446655440000',
        "app.errors.PaymentDeclined: card <str> declined for <uuid>",
    ),
    ("ConnectionError: lost 0x7f3a2b1c at 10.0.0.7:6379", "ConnectionError: lost <hex> at <num>.<num>:<num>"),
    ("RuntimeError: object 5f9d88b9c2a1e3f4a6b7c8d9 missing", "RuntimeError: object <hex> missing"),
    ("TimeoutError: can't reach 'db-1' after 3 tries", "TimeoutError: can't reach <str> after <num> tries"),
    ("  boom   42 \n times  ", "boom <num> times"),
    ("HTTP404Error: page 7", "HTTP404Error: page <num>"),
    ("ValueError: ", "ValueError"),
    ("deadbeefcafe and facade words 12", "deadbeefcafe and facade words <num>"),
    ("ValueError: user42 at 2026-01-05T10:00:00Z", "ValueError: user<num> at <num>-<num>-<num>T<num>:<num>:<num>Z"),
    ("Error:no space 1", "Error:no space <num>"),
    ("ValueError: a\tb\n\nc", "ValueError: a b c"),
    ("ValueError: " + "x" * 400, "ValueError: " + "x" * 288),
    ("", NO_ERROR),
    ("   ", NO_ERROR),
    (None, NO_ERROR),
]


def test_error_normalization_rules_in_python_and_spark(spark) -> None:
    assert [normalize_error(text) for text, _ in CASES] == [expected for _, expected in CASES]
    frame = spark.createDataFrame([(i, text) for i, (text, _) in enumerate(CASES)], "i int, error string")
    rows = frame.select("i", failures.signature_column(frame["error"]).alias("sig")).orderBy("i").collect()
    assert [row["sig"] for row in rows] == [expected for _, expected in CASES]
    assert signatures.search_text("ValueError: order <num> not found") == "ValueError: order"
    assert signatures.search_text(NO_ERROR) == ""


# ----------------------------------------------------------------------------------------- failures


def lay_out_by_day(lake: Path, dlq: bytes) -> None:
    """Move one DLQ's dead letters into a directory per day, as exports wrote them before the monthly layout."""
    directory = lake / "dlq" / "connection=default" / f"stream_hex={dlq.hex()}"
    for path in list(directory.glob("day=*/*.parquet")):
        table = pq.read_table(path, partitioning=None)
        days = table.column("date")
        for day in sorted(set(days.to_pylist())):
            part = table.filter(pc.equal(days, pa.scalar(day, pa.date32())))
            ids = part.column("entry_id")
            target = directory / f"day={day.isoformat()}" / f"part-{ids[0]}_{ids[-1]}.parquet"
            assert target.parent != path.parent  # the test's data must really move
            target.parent.mkdir(exist_ok=True)
            pq.write_table(part, target)
        path.unlink()


@pytest.mark.parametrize("before", [False, True], ids=["by-month", "some-by-day"])
def test_error_signatures_and_retries_histogram(spark, r, lake_dir: Path, before: bool) -> None:
    dead = data.dead_letters()
    data.write(r, [d.entry for d in dead])
    assert not export.export_run(tables=False).failed
    months = {p.parent.name for p in (lake_dir / "dlq").rglob("*.parquet")}
    assert months == {"day=2026-01-01"}  # one directory per DLQ and month (the data is of 2026-01-05)
    if before:  # a lake exported before: one DLQ by day, beside the others by month
        lay_out_by_day(lake_dir, b"orders:dlq")
        assert {p.parent.name for p in (lake_dir / "dlq").rglob("*.parquet")} == {"day=2026-01-01", "day=2026-01-05"}
    read = _local_bytes_read(spark)
    main.run_all(spark, str(lake_dir), as_of=datetime.now(UTC), jobs=["failures"])
    read = _local_bytes_read(spark) - read
    # the job reads the dead letters once for both rollups: no more than one scan of them reads
    once = _local_bytes_read(spark)
    extract.dead_letters(spark, str(lake_dir)).write.format("noop").mode("overwrite").save()
    once = _local_bytes_read(spark) - once
    assert 0 < read < 1.3 * once, (read, once)

    groups: dict[tuple, list[data.DeadLetter]] = defaultdict(list)
    for d in dead:
        groups[(d.stream, d.entry.key, normalize_error(d.error))].append(d)
    got = {(x["stream"], x["dlq"], x["signature"]): x for x in rollup(lake_dir, "error_signatures")}
    assert set(got) == set(groups)
    for key, members in groups.items():
        row = got[key]
        latest = max(members, key=lambda d: d.failed_ms)
        assert row["count"] == len(members)
        assert row["first_seen"] == at(min(d.failed_ms for d in members))
        assert row["last_seen"] == at(latest.failed_ms)
        assert (row["example_error"], row["example_entry_id"]) == (latest.error or "", latest.entry.id)
    for stream in {d.stream for d in dead}:
        ranked = sorted((k for k in groups if k[0] == stream), key=lambda k: (-len(groups[k]), k[2]))
        assert [got[k]["rank"] for k in ranked] == list(range(1, len(ranked) + 1))
    assert (b"jobs", b"jobs:dlq", NO_ERROR) in got and (b"omni-stream:t", b"omni-dlq:group:t:agent", "boom <num> times") in got

    histogram = Counter((d.stream, -1 if d.retries is None else d.retries) for d in dead)
    got_hist = {(x["stream"], x["retries"]): x["count"] for x in rollup(lake_dir, "retries")}
    assert got_hist == dict(histogram)


def _local_bytes_read(spark) -> int:
    """Bytes the JVM has read through Hadoop's local file system so far (every thread's)."""
    jvm = spark.sparkContext._jvm
    return sum(int(s.getBytesRead()) for s in jvm.org.apache.hadoop.fs.FileSystem.getAllStatistics() if s.getScheme() == "file")
