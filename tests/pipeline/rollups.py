"""What the Spark rollup tests share: export the test Redis's history to the lake and run jobs on it
(:func:`run`), read a rollup's files back with pyarrow (:func:`rollup`), a millisecond as a datetime.
"""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow.dataset as ds

from pipeline import main
from streams_app.lake import export


def at(ms: int) -> datetime:
    return datetime.fromtimestamp(ms / 1000, UTC)


def rollup(lake: Path, name: str) -> list[dict]:
    files = [str(p) for p in (lake / "rollups" / name).glob("*.parquet")]
    return ds.dataset(files, format="parquet").to_table().to_pylist() if files else []


def run(spark, lake: Path, jobs: list[str], *, as_of: datetime | None = None) -> None:
    stats = export.export_run(tables="lag_trend" in jobs, now=as_of)
    assert not stats.failed
    main.run_all(spark, str(lake), as_of=as_of or datetime.now(UTC), jobs=jobs)
