"""One pipeline run: export to the lake, the Spark rollup jobs, then the load into the console's tables.

Used by ``manage.py run_pipeline``, by the background job kind ``pipeline`` (the "Run pipeline now"
button and the beat schedule) and by the tests. Runs are serialized by the pipeline lock
(:class:`streams_app.lake.export.PipelineLock`) and recorded as :class:`~streams_app.models.PipelineRun` rows,
which give the reports page its "as of".

Re-running after a failure at any point is safe: the export continues from its checkpoints, the Spark
jobs recompute every rollup from the whole lake, and the load upserts.

**The Spark jobs run in the resident driver or in a child process** (:func:`spark_jobs`), never in the
worker itself: a JVM started inside a process stays there until that process exits
(``SparkSession.stop`` does not end it), and a Celery worker that ran one pipeline kept a 734 MB JVM
between daily runs. The resident driver (:mod:`pipeline.service`, which ``make run`` starts) is a
process of its own that keeps that JVM on purpose: from its second run on, the jobs run in code its
JIT compiled already, about twice as fast as in a fresh JVM. When none answers at
``BUSCONSOLE_SPARK_SERVICE``, or it declines the run (a cluster ``SPARK_MASTER``, an option its session
cannot take), the jobs run as ``python -m pipeline`` in a child process (:func:`spark_child`), local
unless ``SPARK_MASTER`` names a cluster, with ``BUSCONSOLE_SPARK_CONF`` and the run's own options as
``--conf``. Either way the run's JSON lines are its progress, an ``{"error": ...}`` line the reason of
a failure, and a cancel or a lost lock ends the jobs (a child and its JVM die; the resident driver
cancels the run's jobs and stays up). A process that already has a session (the tests', a notebook's)
or a caller that passes ``spark`` runs the jobs in that session instead: the JVM is there already.

**A cancel stops a run as it stops every job** (:mod:`streams_app.jobs.runner`): the job's
:class:`~streams_app.jobs.runner.Progress` looks at its state at each boundary of the run (after every
chunk of the export, after every Spark job, before the load) and, while the Spark jobs run, at least
every :data:`CHECK_EVERY_S`; it raises, and the run stops there (see :func:`pipeline_run` for what is
cut mid-way and what is not).
"""

from __future__ import annotations

import collections
import json
import logging
import os
import queue
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable, Iterator, Mapping, Sequence
from contextlib import contextmanager
from dataclasses import asdict
from datetime import datetime
from typing import IO, TYPE_CHECKING, Any

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
#: How often a run waiting on its Spark child asks ``check`` whether to go on (a cancel, a lost lock).
CHECK_EVERY_S = 1.0
#: Lines of the child's stderr (Spark's log) kept for the error of a run that died without a word.
STDERR_TAIL = 30
#: The variables of a PySpark process that must not leak into a child, which would otherwise try to
#: attach to its parent's JVM instead of starting its own.
_GATEWAY_ENV = ("PYSPARK_GATEWAY_PORT", "PYSPARK_GATEWAY_SECRET")

spark_log = logging.getLogger("pipeline.spark")


class SparkRunFailed(Exception):
    """The Spark jobs' child process failed; the message is its reason (its error line, or its log's tail)."""


def _lines(stream: IO[str], sink: Callable[[str], None]) -> None:
    try:
        for line in stream:
            sink(line.rstrip("\n"))
    finally:
        sink(None)  # type: ignore[arg-type]  # None tells the sink the stream ended


class SparkServiceUnavailable(Exception):
    """No resident Spark driver took the run (none listens, or it cannot serve it as asked); nothing ran."""


class _Reply:
    """The JSON lines of a Spark run (``python -m pipeline``'s output, or :mod:`pipeline.service`'s answer)."""

    def __init__(self, on_step: Callable[[dict[str, Any]], None] | None) -> None:
        self.on_step = on_step
        self.figures: dict[str, Any] = {"jobs": []}
        self.error = ""
        self.exit: int | None = None
        self.unserved: str | None = None

    def feed(self, line: str) -> None:
        try:
            item = json.loads(line)
        except ValueError:
            spark_log.info("%s", line)  # something printed outside the protocol: keep it in the log
            return
        if not isinstance(item, dict):
            return
        if "error" in item:
            self.error = str(item["error"])
        elif "unserved" in item:
            self.unserved = str(item["unserved"])
        elif "exit" in item:
            self.exit = int(item["exit"])
        elif "job" in item:
            self.figures["jobs"].append(item)
            if self.on_step:
                self.on_step(item)
        else:
            self.figures.update(item)


def spark_jobs(
    *,
    lake_uri: str,
    as_of: datetime,
    master: str,
    conf: Mapping[str, str] | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    check: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run the Spark jobs in the resident driver when one takes them (:func:`spark_service`), else in a
    child process (:func:`spark_child`); their figures, with ``driver`` saying which, or raise.

    The resident driver is asked at ``BUSCONSOLE_SPARK_SERVICE`` (empty: never). Only a run it
    declined before starting goes to a child: one that failed or was cut off there is a failed run.
    """
    path = settings.BUSCONSOLE_SPARK_SERVICE
    if path:
        try:
            return {**spark_service(path, lake_uri=lake_uri, as_of=as_of, master=master, conf=conf,
                                    on_step=on_step, check=check), "driver": "resident"}
        except SparkServiceUnavailable as exc:
            log.info("the Spark jobs run in a child process: %s", exc)
    return {**spark_child(lake_uri=lake_uri, as_of=as_of, master=master, conf=conf, on_step=on_step,
                          check=check), "driver": "child"}


def spark_service(
    path: str,
    *,
    lake_uri: str,
    as_of: datetime,
    master: str,
    conf: Mapping[str, str] | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    check: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run the Spark jobs in the resident driver listening at ``path`` (:mod:`pipeline.service`); its figures.

    Raises :class:`SparkServiceUnavailable` when nothing listens there or the driver declines the
    run (another master, an option its running session cannot take), and :class:`SparkRunFailed`
    when the run fails or the driver goes away during it. ``check`` is called every
    :data:`CHECK_EVERY_S` and stops the run by raising: closing the connection cancels the run there.
    """
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        try:
            sock.connect(path)
        except OSError as exc:  # no file, nobody listening, a path too long for a socket
            raise SparkServiceUnavailable(f"no resident Spark driver at {path} ({exc.strerror or exc})") from None
        request = {"lake": lake_uri, "as_of": as_of.isoformat(), "master": master, "conf": dict(conf or {})}
        sock.sendall(json.dumps(request).encode() + b"\n")
        sock.settimeout(CHECK_EVERY_S)
        reply = _Reply(on_step)
        pending = b""
        while reply.exit is None:
            try:
                chunk = sock.recv(65536)
            except TimeoutError:
                if check:
                    check()
                continue
            except OSError as exc:
                raise SparkRunFailed(f"the resident Spark driver failed: the connection broke ({exc})") from None
            if not chunk:
                break
            *lines, pending = (pending + chunk).split(b"\n")
            for line in lines:
                reply.feed(line.decode(errors="replace"))
                if reply.unserved is not None:
                    raise SparkServiceUnavailable(f"the resident Spark driver declined: {reply.unserved}")
    finally:
        sock.close()
    if reply.exit is None:
        raise SparkRunFailed("the resident Spark driver failed: it closed the connection before the run ended"
                             + (f" ({reply.error})" if reply.error else ""))
    if reply.exit != 0:
        raise SparkRunFailed(f"the Spark jobs failed (resident driver): {reply.error or 'no reason given'}")
    return reply.figures


def spark_child(
    *,
    lake_uri: str,
    as_of: datetime,
    master: str,
    conf: Mapping[str, str] | None = None,
    on_step: Callable[[dict[str, Any]], None] | None = None,
    check: Callable[[], None] | None = None,
) -> dict[str, Any]:
    """Run the Spark jobs as ``python -m pipeline`` in a child process; its figures, or raise.

    ``on_step`` hears of each job as the child reports it; ``check`` is called every
    :data:`CHECK_EVERY_S` while the child works and stops the run by raising (the child is then
    terminated, and killed if it does not go). The child dies with this process too, however this
    one dies (see :func:`pipeline.main._die_with_parent`), and its JVM with it.

    Returns ``spark_startup_s``, ``master``, ``shuffle_partitions`` and ``jobs`` (the steps' figures).
    Raises :class:`SparkRunFailed` with the child's reason when it exits non-zero.
    """
    command = [
        sys.executable, "-m", "pipeline", "--lake", lake_uri, "--as-of", as_of.isoformat(), "--master", master,
        "--parent-pid", str(os.getpid()),
    ]
    for key, value in (conf or {}).items():
        command += ["--conf", f"{key}={value}"]
    env = {k: v for k, v in os.environ.items() if k not in _GATEWAY_ENV}
    env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(settings.BASE_DIR), env.get("PYTHONPATH")]))
    lines: queue.Queue[str | None] = queue.Queue()
    tail: collections.deque[str] = collections.deque(maxlen=STDERR_TAIL)

    def logged(line: str | None) -> None:
        if line is not None:
            tail.append(line)
            spark_log.info("%s", line)

    reply = _Reply(on_step)
    child = subprocess.Popen(command, cwd=settings.BASE_DIR, env=env, stdin=subprocess.DEVNULL,
                             stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True, bufsize=1)
    readers = [threading.Thread(target=_lines, args=(child.stdout, lines.put), daemon=True),
               threading.Thread(target=_lines, args=(child.stderr, logged), daemon=True)]
    for reader in readers:
        reader.start()
    try:
        while True:
            try:
                line = lines.get(timeout=CHECK_EVERY_S)
            except queue.Empty:
                if check:
                    check()
                continue
            if line is None:
                break
            reply.feed(line)
        code = child.wait()
    finally:
        if child.poll() is None:
            child.terminate()
            try:
                child.wait(10)
            except subprocess.TimeoutExpired:
                child.kill()
                child.wait()
        for reader in readers:
            reader.join(5)
    if code != 0:
        reason = reply.error or "\n".join(tail) or "no output"
        raise SparkRunFailed(f"the Spark jobs failed (exit {code}): {reason}")
    return reply.figures


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
    spark_conf: Mapping[str, str] | None = None,
    job: Job | None = None,
    on_phase: PhaseFn | None = None,
    check: Callable[[], None] | None = None,
) -> PipelineRun:
    """Export, run every Spark job, load the rollups; the run's record (state ``done``), or raise.

    The Spark jobs run in the resident driver or a child process (:func:`spark_jobs`) with
    ``BUSCONSOLE_SPARK_CONF`` and ``spark_conf`` over it, unless ``spark`` is given or this process has
    an active session (then in that session, whose options are its own).

    **Where a run may be stopped.** ``on_phase`` hears of every boundary: ``export`` after each chunk
    of the export (a stream's new entries, up to :data:`~streams_app.lake.export.CHUNK_ROWS`; in the
    export's parallel mode, each stream a worker process finished), ``exported``, ``spark`` after each
    Spark job, ``loading`` before the load and ``loaded``; an exception it raises stops the run there.
    ``check`` is called while the Spark jobs run (every :data:`CHECK_EVERY_S` in a child or the
    resident driver, every ``pipeline.main._Lanes.POLL_S`` in this process's session) and stops them
    by raising: the child is terminated (its JVM dies with it), the resident driver or the session
    cancels the run's Spark jobs by their tag, which Spark honours between tasks and by interrupting
    running ones, not at once; a rollup a job was writing may be left half written until the next run,
    which recomputes every rollup from the whole lake. Never cut mid-way, so a stop waits for the one
    in hand: a chunk of the export (it lands whole; in parallel mode, the streams the worker processes
    have begun), and the load, which once begun runs to its end.
    """
    # Imported here, not at the top: it loads pyspark, which only a pipeline run in this process
    # needs (the web process, which imports this module for the button and the job kind, never does).
    from pyspark.sql import SparkSession as Session

    lake_uri = lake_uri or settings.BUSCONSOLE_LAKE
    as_of = as_of or timezone.now()
    stats: dict[str, Any] = {}
    spark = spark or Session.getActiveSession()

    def phase(name: str, info: dict[str, Any]) -> None:
        if on_phase:
            on_phase(name, info)

    with export.pipeline_lock() as lock:  # ExportBusy while another run holds it: no run recorded
        run = PipelineRun.objects.create(started_at=timezone.now(), as_of=as_of, job=job)
        started = time.monotonic()
        try:
            with _heartbeat([lock.renew]):
                exported = export.export_run(
                    conns=conns, match=match, since=since, lake_uri=lake_uri, now=as_of,
                    on_progress=lambda s: phase("export", s.as_dict()),
                )
                stats["export"] = exported.as_dict()
                phase("exported", stats["export"])
                lock.renew()

                def spark_step(result: dict[str, Any]) -> None:
                    lock.renew()
                    phase("spark", result)

                if spark is None:
                    ran = spark_jobs(
                        lake_uri=lake_uri, as_of=as_of, master=settings.SPARK_MASTER,
                        conf={**settings.BUSCONSOLE_SPARK_CONF, **(spark_conf or {})},
                        on_step=spark_step, check=check,
                    )
                    stats.update({k: ran[k] for k in ("spark_startup_s", "jobs_s", "master", "shuffle_partitions",
                                                      "driver") if k in ran})
                    results = ran["jobs"]
                else:
                    from pipeline import main

                    results = [asdict(r) for r in main.run_all(
                        spark, lake_uri, as_of=as_of,
                        on_step=lambda result: spark_step(asdict(result)), check=check,
                    )]
                stats["jobs"] = {r["job"]: {"rows": r["rows"], "seconds": r["seconds"]} for r in results}
                lock.renew()
                phase("loading", {})  # the last look before the rollups replace the reports' tables
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
    stats["seconds"] = round(time.monotonic() - started, 3)
    run.state, run.finished_at, run.stats = PipelineRun.State.DONE, timezone.now(), stats
    run.save(update_fields=["state", "finished_at", "stats"])
    return run


# ------------------------------------------------------------------------------------- as a job


def pipeline_job_start(*, user: UserLike | None, spark_conf: Mapping[str, str] | None = None) -> Job:
    """Queue a pipeline job, unless one is queued or running already (then InvalidArgument).

    The button reaches this through :func:`streams_app.services.pipeline_start` (role and audit row);
    the beat schedule and ``manage.py run_pipeline --job`` call it directly. ``spark_conf`` (Spark
    options over ``BUSCONSOLE_SPARK_CONF``, ``run_pipeline --job --conf``) goes with the job.
    """
    active = Job.objects.filter(kind=jobs.KIND_PIPELINE, state__in=[Job.State.QUEUED, Job.State.RUNNING]).first()
    if active is not None:
        raise InvalidArgument(f"A pipeline run is already {active.state} (job {active.pk}).")
    parameters = {"spark_conf": dict(spark_conf)} if spark_conf else {}
    return jobs.job_create(kind=jobs.KIND_PIPELINE, conn="", user=user, key=b"", parameters=parameters)


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

    A cancel or a lost lock is noticed through ``progress``, the runner's one mechanism, as in every
    job: at each boundary of :func:`pipeline_run` (every chunk of the export, every Spark job, before
    the load) the job's state is read (a step saves, which reads it; a chunk between two throttled
    saves is looked at with ``Progress.check(force=True)``, since a skipped look would wait a whole
    chunk), and while the Spark jobs run ``Progress.check`` is their ``check``. So a cancelled run
    stops at the end of the chunk, Spark job or load in hand, and inside a Spark job within about a
    second. The runner's heartbeat renews the job's lock and touches it meanwhile.

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
        # export reports every chunk: the saver throttles those, and a chunk it does not save is looked
        # at all the same; a step boundary is always saved (and the save looks)
        if name == "export" and not progress.due():
            progress.check(force=True)
        progress.save(done=done, total=STEPS, progress=state, force=name != "export")

    run = pipeline_run(job=job, on_phase=on_phase, check=progress.check, spark_conf=job.parameters.get("spark_conf"))
    exported = run.stats.get("export", {})
    progress.note(
        f"Exported {exported.get('entries', 0)} entries; loaded "
        + ", ".join(f"{n} {name}" for name, n in run.stats.get("loaded", {}).items())
        + f" rollup rows in {run.stats.get('seconds', 0):.0f} s."
    )
