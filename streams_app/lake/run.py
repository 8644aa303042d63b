"""One pipeline run: export to the lake, the Spark rollup jobs, then the load into the console's tables.

Used by ``manage.py run_pipeline``, by the background job kind ``pipeline`` (the "Run pipeline now"
button and the beat schedule) and by the tests. Runs are serialized by the pipeline lock
(:class:`streams_app.lake.export.PipelineLock`) and recorded as :class:`~streams_app.models.PipelineRun` rows,
which give the reports page its "as of".

Re-running after a failure at any point is safe: the export continues from its checkpoints, the Spark
jobs recompute every rollup from the whole lake, and the load upserts.

The Spark session is local unless ``SPARK_MASTER`` names a cluster. A session this module starts is
stopped at the end of the run (a Celery worker should not keep a 2 GB JVM between daily runs); one
that was running already (the tests', a notebook's) is used and left running.
"""

from __future__ import annotations

import logging
import threading
import time
from collections.abc import Callable, Iterator, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime
from typing import TYPE_CHECKING, Any

from django.conf import settings
from django.db import connections
from django.utils import timezone

from busconsole.locks import lock_held
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.lake import export
from streams_app.lake import rollups as rollup_load
from streams_app.lake.models import PipelineRun
from streams_app.redis_ops.errors import InvalidArgument

if TYPE_CHECKING:
    from pyspark.sql import SparkSession

    from streams_app.accounts.roles import UserLike

log = logging.getLogger(__name__)

PhaseFn = Callable[[str, dict[str, Any]], None]
HEARTBEAT_S = 15.0
STEPS = 7  # export, five Spark jobs, load: what a job's done/total count
_SCHEDULE_LOCK = "pipeline-schedule"


@contextmanager
def _heartbeat(beats: Sequence[Callable[[], None]]) -> Iterator[None]:
    """Call ``beats`` every :data:`HEARTBEAT_S` seconds in a thread while the block runs.

    A Spark job can run for minutes without a natural point to report progress, and both the
    pipeline lock and a job's lock expire when not renewed; a failed beat is logged, and the run
    notices at its next renewal from the main thread.
    """
    stop = threading.Event()

    def loop() -> None:
        try:
            while not stop.wait(HEARTBEAT_S):
                for beat in beats:
                    try:
                        beat()
                    except Exception:  # noqa: BLE001 - reported, then the next beat tries again
                        log.warning("pipeline heartbeat failed", exc_info=True)
        finally:
            connections.close_all()  # this thread's own database connections

    thread = threading.Thread(target=loop, name="pipeline-heartbeat", daemon=True)
    thread.start()
    try:
        yield
    finally:
        stop.set()
        thread.join(5)


def pipeline_run(
    *,
    conns: Sequence[str] | None = None,
    match: bytes = b"*",
    since: str | None = None,
    lake_uri: str | None = None,
    as_of: datetime | None = None,
    spark: SparkSession | None = None,
    job: Job | None = None,
    on_phase: PhaseFn | None = None,
    beats: Sequence[Callable[[], None]] = (),
) -> PipelineRun:
    """Export, run every Spark job, load the rollups; the run's record (state ``done``), or raise."""
    # Imported here, not at the top: they load pyspark, which only a pipeline run needs (the web
    # process, which imports this module for the button and the job kind, never starts Spark).
    from pyspark.sql import SparkSession as Session

    from pipeline import main
    from pipeline.session import build_session

    lake_uri = lake_uri or settings.BUSCONSOLE_LAKE
    as_of = as_of or timezone.now()
    stats: dict[str, Any] = {}
    # stop the session at the end only if this run started it (not the tests', not a shell's)
    own_session = spark is None and Session.getActiveSession() is None

    def phase(name: str, info: dict[str, Any]) -> None:
        if on_phase:
            on_phase(name, info)

    with export.pipeline_lock() as lock:  # ExportBusy while another run holds it: no run recorded
        run = PipelineRun.objects.create(started_at=timezone.now(), as_of=as_of, job=job)
        started = time.monotonic()
        try:
            with _heartbeat([lock.renew, *beats]):
                exported = export.export_run(
                    conns=conns, match=match, since=since, lake_uri=lake_uri, now=as_of,
                    on_progress=lambda s: phase("export", s.as_dict()),
                )
                stats["export"] = exported.as_dict()
                phase("exported", stats["export"])
                lock.renew()
                if spark is None:
                    opened = time.monotonic()
                    spark = build_session(settings.SPARK_MASTER, app_name="busconsole")
                    stats["spark_startup_s"] = round(time.monotonic() - opened, 3)
                results = main.run_all(
                    spark, lake_uri, as_of=as_of,
                    on_step=lambda result: (lock.renew(), phase("spark", asdict(result))),
                )
                stats["jobs"] = {r.job: {"rows": r.rows, "seconds": r.seconds} for r in results}
                loading = time.monotonic()
                stats["loaded"] = rollup_load.rollups_load(lake_uri=lake_uri)
                stats["load_s"] = round(time.monotonic() - loading, 3)
                phase("loaded", stats["loaded"])
        except BaseException as exc:
            stats["seconds"] = round(time.monotonic() - started, 3)
            PipelineRun.objects.filter(pk=run.pk).update(
                state=PipelineRun.State.FAILED, finished_at=timezone.now(), stats=stats,
                error=f"{type(exc).__name__}: {exc}"[:4000],
            )
            raise
        finally:
            if own_session and spark is not None:
                spark.stop()
    stats["seconds"] = round(time.monotonic() - started, 3)
    run.state, run.finished_at, run.stats = PipelineRun.State.DONE, timezone.now(), stats
    run.save(update_fields=["state", "finished_at", "stats"])
    return run


# ------------------------------------------------------------------------------------- as a job


def pipeline_job_start(*, user: UserLike | None) -> Job:
    """Queue a pipeline job, unless one is queued or running already (then InvalidArgument).

    The button reaches this through :func:`streams_app.services.pipeline_start` (role and audit row);
    the beat schedule and ``manage.py run_pipeline --job`` call it directly.
    """
    active = Job.objects.filter(kind=jobs.KIND_PIPELINE, state__in=[Job.State.QUEUED, Job.State.RUNNING]).first()
    if active is not None:
        raise InvalidArgument(f"A pipeline run is already {active.state} (job {active.pk}).")
    return jobs.job_create(kind=jobs.KIND_PIPELINE, conn="", user=user, key=b"", parameters={})


def pipeline_scheduled_start() -> int | None:
    """The beat task's work: start a run unless one is under way; the job id, or None."""
    with lock_held(name=_SCHEDULE_LOCK, ttl_ms=50_000) as acquired:
        if not acquired:
            return None
        try:
            return pipeline_job_start(user=None).pk
        except InvalidArgument as exc:
            log.info("scheduled pipeline run skipped: %s", exc.message)
            return None


def pipeline_job_run(job: Job, progress: jobs.Progress) -> None:
    """The ``pipeline`` job kind's runner (see :mod:`streams_app.jobs.runner`): progress in steps of :data:`STEPS`.

    ``progress`` is the jobs machinery's saver: its ``save`` renews the job's lock and raises when the
    job was cancelled, so a cancel stops the run at its next step; its ``lock`` is renewed by the
    heartbeat while a Spark job runs.

    A read-only worker runs this kind (it is in :data:`~streams_app.jobs.runner.READ_ONLY_KINDS`): the
    export only reads the monitored Redis (SCAN, XINFO, XRANGE pages), and what a run writes, the lake
    and the console's own rollup tables, is not what read-only mode protects.
    """
    done = 0

    def on_phase(name: str, info: dict[str, Any]) -> None:
        nonlocal done
        if name in ("exported", "spark", "loaded"):
            done += 1
        state = {"phase": name, **{k: v for k, v in info.items() if isinstance(v, int | float | str)}}
        # export reports every chunk: the saver throttles those; a step boundary is always saved
        progress.save(done=done, total=STEPS, progress=state, force=name != "export")

    def touch() -> None:
        Job.objects.filter(pk=job.pk, state=Job.State.RUNNING).update(updated_at=timezone.now())

    run = pipeline_run(job=job, on_phase=on_phase, beats=[progress.lock.reacquire, touch])
    exported = run.stats.get("export", {})
    progress.note(
        f"Exported {exported.get('entries', 0)} entries; loaded "
        + ", ".join(f"{n} {name}" for name, n in run.stats.get("loaded", {}).items())
        + f" rollup rows in {run.stats.get('seconds', 0):.0f} s."
    )
