"""Compaction merges the files several exports left in a partition, and a compaction interrupted at any
step leaves the lake readable and complete.

Three exports of a growing stream leave three files in most partitions. A compaction is then stopped
by an exception after each of its steps (merged files staged, directories swapped), and each time a
real Spark session reads the lake and must find every entry exactly once, the IDs compared with the
ones the test wrote. A final, uninterrupted compaction leaves one file per partition and no staging
directory behind, and the exporter's next run (which compacts by default) appends to it correctly.
"""

from __future__ import annotations

from pathlib import Path

import pyarrow.parquet as pq
import pytest

from pipeline import compact, extract
from pipeline import lake as layout
from streams_app.lake import export
from tests.pipeline import data

pytestmark = [pytest.mark.spark, pytest.mark.django_db]


class Stop(Exception):
    pass


def ids_in_lake(spark, lake_dir: Path) -> list[str]:
    frame = extract.read(spark, str(lake_dir), layout.ENTRIES, ("stream", "entry_id"))
    return sorted(f"{bytes(row.stream)!r} {row.entry_id}" for row in frame.collect())


def parquet_files(lake_dir: Path) -> list[Path]:
    return sorted(p for p in (lake_dir / layout.ENTRIES).rglob("*.parquet"))


def test_interrupted_compactions_keep_the_lake_complete(spark, r, lake_dir: Path) -> None:
    entries = sorted(data.traffic(), key=lambda e: e.ms)
    thirds = [entries[i * len(entries) // 3 : (i + 1) * len(entries) // 3] for i in range(3)]
    for part in thirds:
        data.write(r, part)
        assert not export.export_run(tables=False, compact=False).failed
    expected = sorted(f"{e.key!r} {e.id}" for e in entries)
    before = parquet_files(lake_dir)
    assert len(before) > len({p.parent for p in before}), "no partition has several files to merge"
    assert ids_in_lake(spark, lake_dir) == expected

    for at in ("staged", "swapped"):

        def stop(step: str, directory: str, at: str = at) -> None:
            if step == at:
                raise Stop(directory)

        with pytest.raises(Stop):
            compact.compact(str(lake_dir), on_step=stop)
        # a hidden staging directory is left, which no reader sees
        assert any(p.name.startswith(compact.STAGING) for p in (lake_dir / layout.ENTRIES).rglob("*"))
        assert ids_in_lake(spark, lake_dir) == expected, at

    stats = compact.compact(str(lake_dir))
    after = parquet_files(lake_dir)
    assert len(after) == len({p.parent for p in after}) == len({p.parent for p in before})
    assert stats.files_after <= stats.files_before
    assert not any(p.name.startswith(compact.STAGING) for p in lake_dir.rglob("*"))
    assert ids_in_lake(spark, lake_dir) == expected
    for path in after:  # named after the ID range the file holds, like every file of the lake
        rows = sorted(entries_in(path), key=lambda i: tuple(map(int, i.split("-"))))
        assert path.name == f"part-{rows[0]}_{rows[-1]}.parquet"

    more = [data.Entry(b"orders", f"{entries[-1].ms + 1}-0", ((b"type", b"late"),))]
    data.write(r, more)
    assert not export.export_run(tables=False).failed  # compacts by default
    assert ids_in_lake(spark, lake_dir) == sorted([*expected, f"{b'orders'!r} {more[0].id}"])
    final = parquet_files(lake_dir)
    assert len(final) == len({p.parent for p in final})


def entries_in(path: Path) -> list[str]:
    return pq.ParquetFile(path).read(columns=["entry_id"]).column("entry_id").to_pylist()
