"""A pipeline run started from the console runs Spark in a child process: no JVM stays in the worker.

A real Celery worker takes the ``pipeline`` job (as after the "Run pipeline now" button); its Spark
jobs run as ``python -m pipeline`` under it, and the JVM under that child, never under the worker
itself. While the job runs the test watches the worker's process tree; once the job has ended the
tree must hold no ``java`` at all, whether the run succeeded, failed in Spark or was cancelled, and
the job must say what happened as it did when Spark ran inside the worker: its steps, its note, the
Spark error, the cancel.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.lake import run as pipeline_run
from streams_app.lake.models import PipelineRun, ThroughputRollup
from tests.console.celery_procs import Worker, celery_env
from tests.pipeline import data
from tests.pipeline.conftest import FAST_JVM
from tests.polling import wait_for

pytestmark = [pytest.mark.spark, pytest.mark.django_db(transaction=True)]


def tree(root: int) -> dict[int, tuple[int, str]]:
    """Every process under ``root`` (not itself): pid -> (parent pid, command line)."""
    parents: dict[int, tuple[int, str]] = {}
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes().replace(b"\0", b" ").decode(errors="replace").strip()
        except OSError:  # exited meanwhile
            continue
        parents[int(entry.name)] = (int(stat.rsplit(")", 1)[1].split()[1]), cmdline)
    below, found = {root}, {}
    for _ in range(20):  # depth bound: worker -> python -m pipeline -> java is 2
        added = {pid: info for pid, info in parents.items() if info[0] in below and pid not in below}
        if not added:
            break
        found.update(added)
        below |= set(added)
    return found


def javas(tree_: dict[int, tuple[int, str]]) -> dict[int, tuple[int, str]]:
    return {pid: info for pid, info in tree_.items() if info[1].split(" ", 1)[0].endswith("java")}


@pytest.fixture(scope="module")
def worker(django_db_setup, django_db_blocker, tmp_path_factory) -> Iterator[Worker]:
    lake = tmp_path_factory.mktemp("lake")
    with django_db_blocker.unblock():
        env = celery_env(BUSCONSOLE_LAKE=str(lake), SPARK_MASTER="local[1]", SPARK_DRIVER_MEMORY="512m",
                         BUSCONSOLE_SPARK_CONF=f"spark.sql.shuffle.partitions=3,spark.driver.extraJavaOptions={FAST_JVM}")
    process = Worker("pipeline", env)
    yield process
    process.stop()


def finished(job_id: int, seen: list[dict[int, tuple[int, str]]], worker: Worker) -> Job | None:
    """The job once it has ended; meanwhile records the worker's process tree."""
    seen.append(tree(worker.process.pid))
    worker.alive()
    job = Job.objects.get(pk=job_id)
    return job if job.is_finished else None


def test_a_console_run_leaves_no_jvm_in_the_worker(worker: Worker, r) -> None:
    traffic = data.traffic()
    data.write(r, [*traffic, *(d.entry for d in data.dead_letters())])
    job = pipeline_run.pipeline_job_start(user=None, spark_conf={"spark.sql.shuffle.partitions": "5"})
    seen: list[dict[int, tuple[int, str]]] = []
    done = wait_for(lambda: finished(job.pk, seen, worker), timeout=300, what="the pipeline job", step=0.2)

    assert (done.state, done.done, done.total) == (Job.State.DONE, pipeline_run.STEPS, pipeline_run.STEPS), done.error
    assert "Exported 1492 entries" in done.error  # 1300 entries + 192 dead letters: the job's note
    run = PipelineRun.objects.get(job=done)
    assert run.state == PipelineRun.State.DONE
    assert run.stats["master"] == "local[1]" and run.stats["shuffle_partitions"] == 5  # the job's option won
    assert set(run.stats["jobs"]) == {"throughput", "latency", "failures", "lag_trend", "anomalies"}
    hourly = ThroughputRollup.objects.filter(scope="stream", resolution="hour", stream__in=[b"orders", b"bin\xfekey"])
    assert sum(row.entries for row in hourly) == len(traffic)  # the DLQ streams have rows of their own

    # Spark ran in a child: a JVM was seen, always below `python -m pipeline`, never the worker's own.
    pipeline_pids = {pid for snapshot in seen for pid, (_, cmd) in snapshot.items() if "-m pipeline" in cmd}
    jvms = 0
    for snapshot in seen:
        for pid, (parent, _) in javas(snapshot).items():
            jvms += 1
            assert parent != worker.process.pid, "a JVM ran in the worker itself"
            ancestors = []
            while parent in snapshot and len(ancestors) < 20:
                ancestors.append(parent)
                parent = snapshot[parent][0]
            assert set(ancestors) & pipeline_pids, f"JVM {pid} is not below the Spark child: {snapshot}"
    assert jvms, "the run's JVM was never seen"
    assert tree(worker.process.pid) == {}  # the child was waited for before the load: nothing is left


def test_a_spark_failure_reaches_the_job(worker: Worker, r) -> None:
    data.write(r, data.traffic())
    job = pipeline_run.pipeline_job_start(user=None, spark_conf={"spark.sql.shuffle.partitions": "many"})
    seen: list[dict[int, tuple[int, str]]] = []
    done = wait_for(lambda: finished(job.pk, seen, worker), timeout=300, what="the pipeline job", step=0.2)

    assert done.state == Job.State.FAILED
    assert "SparkRunFailed" in done.error and "spark.sql.shuffle.partitions" in done.error, done.error
    run = PipelineRun.objects.get(job=done)
    assert run.state == PipelineRun.State.FAILED and "spark.sql.shuffle.partitions" in run.error
    wait_for(lambda: not javas(tree(worker.process.pid)), what="no JVM under the worker", timeout=30)


def test_a_cancel_ends_the_spark_child(worker: Worker, r) -> None:
    data.write(r, data.traffic())
    job = pipeline_run.pipeline_job_start(user=None)

    def spark_child() -> int | None:
        worker.alive()
        assert not Job.objects.get(pk=job.pk).is_finished, "the job ended before its Spark child was seen"
        return next((pid for pid, (_, cmd) in tree(worker.process.pid).items() if "-m pipeline" in cmd), None)

    child = wait_for(spark_child, timeout=120, what="the Spark child to start", step=0.1)
    assert jobs.job_cancel(job_id=job.pk)

    wait_for(lambda: not tree(worker.process.pid), what="the Spark child and its JVM to end", timeout=60)
    run = wait_for(lambda: PipelineRun.objects.filter(job_id=job.pk, state=PipelineRun.State.FAILED).first(),
                   what="the run to be recorded as stopped", timeout=30)
    assert run.error.startswith("JobCancelled")
    assert Job.objects.get(pk=job.pk).state == Job.State.CANCELLED
    assert not Path(f"/proc/{child}").exists()
