"""Loading rollups into the console's tables: idempotent upserts, and a whole run as a background job."""

from __future__ import annotations

from datetime import UTC, datetime
from pathlib import Path

import pyarrow.dataset as ds
import pytest

from pipeline import main
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.lake import export
from streams_app.lake import rollups as rollup_load
from streams_app.lake import run as pipeline_run
from streams_app.lake.models import (
    AnomalyRollup,
    ErrorSignatureRollup,
    LatencyRollup,
    PipelineRun,
    RetryRollup,
    ThroughputRollup,
)
from tests.pipeline import data

pytestmark = [pytest.mark.spark, pytest.mark.django_db]

MODELS = (ThroughputRollup, LatencyRollup, ErrorSignatureRollup, RetryRollup, AnomalyRollup)


def table_rows() -> dict[str, list[tuple]]:
    """Every rollup row: its id and values, without the load time."""
    out = {}
    for model in MODELS:
        names = [f.attname for f in model._meta.concrete_fields if f.name != "updated_at"]
        rows = model.objects.order_by("pk").values_list(*names)
        out[model.__name__] = [tuple(bytes(v) if isinstance(v, memoryview) else v for v in row) for row in rows]
    return out


def parquet_rows(lake: Path, name: str) -> list[dict]:
    files = [str(p) for p in (lake / "rollups" / name).glob("*.parquet")]
    return ds.dataset(files, format="parquet").to_table().to_pylist()


def test_loading_the_same_rollups_twice_gives_the_same_rows(spark, r, lake_dir: Path, settings) -> None:
    settings.BUSCONSOLE_PIPELINE_MINUTE_HOURS = 1
    traffic = data.traffic()
    data.write(r, [*traffic, *data.metrics(), *(d.entry for d in data.dead_letters())])
    export.export_run(tables=False)
    end = max(e.ms for e in traffic)
    main.run_all(spark, str(lake_dir), as_of=datetime.fromtimestamp(end / 1000, UTC))

    first = rollup_load.rollups_load()
    rows = table_rows()
    second = rollup_load.rollups_load()
    assert second == first and table_rows() == rows
    assert all(rows[model.__name__] for model in MODELS if model is not AnomalyRollup)

    # What was loaded is the rollup: every hourly row, minute rows of the newest hour only.
    throughput = parquet_rows(lake_dir, "throughput")
    newest = max(row["bucket"] for row in throughput if row["resolution"] == "minute")
    kept = [row for row in throughput if row["resolution"] == "hour" or (newest - row["bucket"]).total_seconds() < 3600]
    assert ThroughputRollup.objects.count() == len(kept) < len(throughput)
    assert ErrorSignatureRollup.objects.count() == len(parquet_rows(lake_dir, "error_signatures"))
    orders = ErrorSignatureRollup.objects.filter(stream=b"orders", rank=1).get()
    assert orders.search and orders.search.casefold() in orders.example_error.casefold()

    # The next run finds more entries in an hour already loaded: that row changes in place.
    hour = ThroughputRollup.objects.filter(stream=b"orders", scope="stream", resolution="hour").order_by("bucket").last()
    extra_ms = int(hour.bucket.timestamp() * 1000) + 3_599_000
    r.xadd(b"orders", {b"type": b"order.paid"}, id=f"{extra_ms}-0")
    export.export_run(tables=False)
    main.run_all(spark, str(lake_dir), as_of=datetime.fromtimestamp(end / 1000, UTC), jobs=["throughput"])
    rollup_load.rollups_load()
    again = ThroughputRollup.objects.get(pk=hour.pk)
    assert again.entries == hour.entries + 1
    assert ThroughputRollup.objects.filter(stream=b"orders", scope="stream", resolution="hour").count() == 3


def test_a_pipeline_job_exports_rolls_up_and_loads(spark, r, lake_dir: Path) -> None:
    data.write(r, [*data.traffic(), *(d.entry for d in data.dead_letters())])
    job = pipeline_run.pipeline_job_start(user=None)
    with pytest.raises(Exception, match="already queued"):
        pipeline_run.pipeline_job_start(user=None)

    jobs.job_run(job.pk)  # what the Celery task does, in this process

    job.refresh_from_db()
    assert (job.state, job.done, job.total) == (Job.State.DONE, pipeline_run.STEPS, pipeline_run.STEPS)
    assert "Exported 1492 entries" in job.error  # 1300 entries + 192 dead letters, as the job's note
    run = PipelineRun.objects.get(job=job)
    assert run.state == PipelineRun.State.DONE and run.stats["loaded"]["throughput"] > 0
    assert ErrorSignatureRollup.objects.filter(stream=b"payments").exists()
    assert spark.range(3).count() == 3  # the shared session was left running
