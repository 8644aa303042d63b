"""The rollup jobs on a real Spark standalone cluster give the local run's rollups, row for row.

A master and one worker (1 core, 1 GB) are started from the venv's pyspark (``bin/spark-class`` with
``SPARK_HOME`` set, on 127.0.0.1 and free ports, :mod:`pipeline.standalone`); the driver is
``python -m pipeline --master spark://...`` in a child process, as the console runs it. The same lake
is rolled up by the suite's local session, and every rollup is compared row for row (floats to 12
significant digits: a sum's order may differ between partitionings). The run on the cluster must also
size its shuffle from its cores (not Spark's 200) and write each rollup as at most one file per core.

Every JVM the test started is gone at the end: no process is left whose working directory is under
the cluster's directory (the master, the worker, its executor and the driver all run there).
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from pipeline import lake as layout
from pipeline import main
from pipeline.standalone import Standalone
from streams_app.lake import export
from streams_app.metrics.models import GroupMirror, GroupSample, StreamMirror, name_hash
from tests.pipeline import data
from tests.pipeline.conftest import FAST_JVM
from tests.servers import REPO

pytestmark = [pytest.mark.spark, pytest.mark.django_db]

ROLLUPS = (layout.THROUGHPUT, layout.LATENCY, layout.ERROR_SIGNATURES, layout.RETRIES, layout.LAG_TREND,
           layout.ANOMALIES)


def rows(directory: Path) -> list[tuple]:
    """A rollup's rows as sortable tuples (floats rounded to 12 significant digits)."""
    files = [str(p) for p in directory.glob("*.parquet")]
    table = ds.dataset(files, format="parquet").to_table()
    out = []
    for row in table.to_pylist():
        values = tuple(float(f"{v:.12g}") if isinstance(v, float) else v for v in (row[c] for c in sorted(row)))
        out.append(values)
    return sorted(out, key=repr)


def processes_under(directory: Path) -> list[str]:
    """Processes whose working directory is ``directory`` or below it: their command lines."""
    found = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            cwd = os.readlink(entry / "cwd")
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace")
        except OSError:  # gone meanwhile, or not ours to look at
            continue
        if cwd == str(directory) or cwd.startswith(str(directory) + "/"):
            found.append(f"{entry.name}: {cmdline[:200]}")
    return found


def history(r) -> datetime:
    """Every kind of input (entries, metrics, dead letters, group samples, ten days for anomalies); as-of."""
    hourly, _ = data.hourly_traffic()
    data.write(r, [*data.traffic(), *data.metrics(), *(d.entry for d in data.dead_letters()), *hourly])
    base = datetime.fromtimestamp((data.T0 + 9 * data.HOUR_MS) / 1000, UTC)
    stream = StreamMirror.objects.create(connection="default", key=b"orders", key_hash=name_hash(b"orders"),
                                         key_text="orders", first_seen=base, last_seen=base, synced_at=base)
    group = GroupMirror.objects.create(stream=stream, name=b"billing", name_hash=name_hash(b"billing"),
                                       name_text="billing", first_seen=base, last_seen=base)
    for minutes in range(0, 240, 7):
        GroupSample.objects.create(group=group, at=base + timedelta(minutes=minutes), resolution="raw",
                                   lag=minutes % 13, pending=minutes % 5, oldest_pending_idle_ms=minutes * 10)
    as_of = datetime.fromtimestamp((data.T0 + 10 * data.DAY_MS) / 1000, UTC)
    stats = export.export_run(tables=True, now=as_of)
    assert not stats.failed
    return as_of


def test_standalone_cluster_rollups_equal_the_local_ones(spark, r, lake_dir: Path, tmp_path: Path) -> None:
    as_of = history(r)
    main.run_all(spark, str(lake_dir), str(tmp_path / "local"), as_of=as_of)

    workdir = tmp_path / "cluster"
    with Standalone(workdir, cores=1, memory="1g") as cluster:
        run = subprocess.run(
            [sys.executable, "-m", "pipeline", "--master", cluster.url, "--lake", str(lake_dir),
             "--out", str(tmp_path / "standalone"), "--as-of", as_of.isoformat(),
             "--conf", "spark.driver.memory=512m", "--conf", "spark.executor.memory=768m",
             "--conf", "spark.driver.host=127.0.0.1", "--conf", "spark.driver.bindAddress=127.0.0.1",
             "--conf", "spark.ui.enabled=false", "--conf", f"spark.driver.extraJavaOptions={FAST_JVM}",
             "--conf", f"spark.executor.extraJavaOptions={FAST_JVM}"],
            cwd=workdir, env={**cluster.env(), "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=300,
        )
        assert run.returncode == 0, run.stderr[-4000:]
    lines = [json.loads(line) for line in run.stdout.splitlines()]
    assert lines[0]["master"] == cluster.url
    # 1 core: a standalone master's default parallelism is max(cores, 2); a tiny lake gets the least
    # rounds per core (4), not Spark's 200
    assert lines[-1]["shuffle_partitions"] == 2 * 4
    reported = [line["job"] for line in lines[1:-1]]  # as they finish: the jobs run side by side
    assert sorted(reported) == sorted(main.JOBS)
    assert reported.index("throughput") < reported.index("anomalies")  # which reads throughput's rollup

    for name in ROLLUPS:
        local, standalone = rows(tmp_path / "local" / name), rows(tmp_path / "standalone" / name)
        assert standalone == local, name
        assert local or name == layout.ANOMALIES, f"{name} is empty: the comparison would prove nothing"
        # at most a file per core (2) per write, not one per shuffle partition: the throughput rollup
        # is two writes (its minutes, then the hours and totals derived from them)
        writes = 2 if name == layout.THROUGHPUT else 1
        assert 1 <= len(list((tmp_path / "standalone" / name).glob("part-*.parquet"))) <= 2 * writes, name
    assert rows(tmp_path / "local" / layout.ANOMALIES), "the planted spike and drop are anomalies"

    assert processes_under(workdir) == []
