"""The SparkSession the jobs run in: local by default, a cluster when ``master`` (``SPARK_MASTER``) says so.

The jobs do not care where they run; only a few settings differ:

* every session computes in UTC (``spark.sql.session.timeZone``): hour buckets and weekdays must
  not move with the machine's time zone;
* Parquet timestamps are written as standard ``TIMESTAMP_MICROS`` (not the legacy INT96), so the
  rollups read back the same in pyarrow;
* partition directory values stay strings (``connection=123`` is a name, not a number);
* a local master gets a small number of shuffle partitions (the default 200 makes tiny tasks on a
  laptop), a driver bound to 127.0.0.1 and no web UI, unless ``conf`` says otherwise.

Under ``spark-submit`` the master and conf come from its command line: ``master=None`` leaves them.
"""

from __future__ import annotations

import logging
import os
import sys
from collections.abc import Mapping

from pyspark import SparkConf, SparkContext
from pyspark.sql import SparkSession

BASE_CONF = {
    "spark.sql.session.timeZone": "UTC",
    "spark.sql.parquet.outputTimestampType": "TIMESTAMP_MICROS",
    "spark.sql.sources.partitionColumnTypeInference.enabled": "false",
    "spark.ui.showConsoleProgress": "false",
}
LOCAL_CONF = {
    "spark.sql.shuffle.partitions": "8",
    "spark.ui.enabled": "false",
    "spark.driver.host": "127.0.0.1",
    "spark.driver.bindAddress": "127.0.0.1",
    "spark.driver.memory": "2g",  # unless SPARK_DRIVER_MEMORY is set (see build_session)
    "spark.sql.adaptive.enabled": "true",
}


_LOCAL_SQL_CONF = {"spark.sql.shuffle.partitions": LOCAL_CONF["spark.sql.shuffle.partitions"]}


def _submitted_master() -> str:
    """The master spark-submit was given (its JVM is up already); "" when not under spark-submit."""
    if "PYSPARK_GATEWAY_PORT" not in os.environ:
        return ""
    SparkContext._ensure_initialized()
    return SparkConf().get("spark.master", "") or ""


def build_session(
    master: str | None = None, *, app_name: str = "busconsole-pipeline", conf: Mapping[str, str] | None = None
) -> SparkSession:
    """A new or the running SparkSession with :data:`BASE_CONF` (and :data:`LOCAL_CONF` for ``local``).

    The driver's memory is fixed when its JVM starts, so ``spark.driver.memory`` only takes effect in
    the first session of a process.
    """
    builder = SparkSession.builder.appName(app_name)
    settings: dict[str, str] = dict(BASE_CONF)
    if master:
        builder = builder.master(master)
        if master.startswith("local"):
            settings.update(LOCAL_CONF)
            # The JVM looks up the host's address before reading any conf: keep a local session on
            # the loopback interface from the start (and quiet its "resolves to a loopback" warning).
            os.environ.setdefault("SPARK_LOCAL_IP", "127.0.0.1")
            if os.environ.get("SPARK_DRIVER_MEMORY"):
                settings.pop("spark.driver.memory")  # spark-submit reads the variable itself
    elif _submitted_master().startswith("local"):
        # spark-submit --master local[...]: its conf is fixed, but the runtime SQL defaults still help
        submitted = SparkConf()
        settings.update({k: v for k, v in _LOCAL_SQL_CONF.items() if not submitted.contains(k)})
    settings.update(conf or {})
    for key, value in settings.items():
        builder = builder.config(key, value)
    # PySpark starts the JVM from the python that runs it; make the workers (if any) match.
    os.environ.setdefault("PYSPARK_PYTHON", sys.executable)
    session = builder.getOrCreate()
    session.sparkContext.setLogLevel("WARN")
    # py4j logs every connection at INFO, and does so again while the interpreter shuts down
    logging.getLogger("py4j").setLevel(logging.WARNING)
    return session
