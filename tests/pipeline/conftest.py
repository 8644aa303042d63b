"""Fixtures of the pipeline tests: one local Spark session for the whole run, a private lake per test.

Starting a JVM costs seconds, so every Spark test shares one session (``local[2]``, no UI, few shuffle
partitions, bound to 127.0.0.1); the tests marked ``spark`` use it. :data:`FAST_JVM` suits the tests'
small data: the JIT's first tier only (a short run spends more compiling with C2 than it gains) and
the serial collector (no GC threads competing for two cores). Nothing is mocked: the exporter
reads the suite's real redis-server and the jobs run on real Spark.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

FAST_JVM = "-XX:TieredStopAtLevel=1 -XX:+UseSerialGC"


@pytest.fixture(scope="session")
def spark() -> Iterator[object]:
    from pipeline.session import build_session

    session = build_session(
        "local[2]",
        app_name="busconsole-tests",
        conf={
            "spark.ui.enabled": "false",
            "spark.sql.shuffle.partitions": "4",
            "spark.default.parallelism": "2",
            "spark.driver.memory": "1g",
            "spark.driver.host": "127.0.0.1",
            "spark.driver.bindAddress": "127.0.0.1",
            "spark.driver.extraJavaOptions": FAST_JVM,
        },
    )
    yield session
    session.stop()


@pytest.fixture
def lake_dir(tmp_path: Path, settings) -> Path:
    """An empty lake for one test, also set as ``BUSCONSOLE_LAKE``."""
    path = tmp_path / "lake"
    settings.BUSCONSOLE_LAKE = str(path)
    return path
