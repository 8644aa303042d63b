"""The resident Spark driver (``python -m pipeline.service``) takes the console's runs and keeps its JVM.

A real service on a socket of its own and a real Celery worker whose ``BUSCONSOLE_SPARK_SERVICE``
names it: the worker's pipeline jobs hand their Spark jobs to the service, whose one JVM (watched in
its process tree) serves run after run, while no JVM ever runs under the worker. A run the service
cannot take as asked goes to a child process; a failed, a bad, a cancelled request and a service that
dies mid-run each end as their client is told, and the first three leave the service serving.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import tempfile
import threading
from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime
from pathlib import Path

import pytest

from streams_app.jobs.models import Job
from streams_app.lake import export
from streams_app.lake import run as pipeline_run
from streams_app.lake.models import PipelineRun, ThroughputRollup
from tests.console.celery_procs import Worker, celery_env
from tests.console.lake.test_run_child import javas, tree
from tests.pipeline import data
from tests.pipeline.conftest import FAST_JVM
from tests.polling import wait_for
from tests.servers import REPO

pytestmark = [pytest.mark.spark, pytest.mark.django_db(transaction=True)]

SPARK_CONF = f"spark.sql.shuffle.partitions=3,spark.driver.extraJavaOptions={FAST_JVM}"


class Service:
    def __init__(self, path: str, env: dict[str, str]) -> None:
        self.path = path
        self.log = Path(tempfile.mkstemp(prefix="spark-service-", suffix=".log")[1])
        self.process = subprocess.Popen(
            [sys.executable, "-m", "pipeline.service", "--socket", path, "--master", "local[1]"],
            cwd=REPO, env=env, stdout=self.log.open("wb"), stderr=subprocess.STDOUT,
        )
        wait_for(lambda: self.alive() and os.path.exists(path), timeout=30, what="the Spark service's socket")

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"the Spark service exited:\n{self.output()[-3000:]}")
        return True

    def jvms(self) -> set[int]:
        return set(javas(tree(self.process.pid)))

    def ask(self, request: bytes) -> list[dict]:
        """Send one raw request line, read the answer to its end."""
        with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
            sock.settimeout(120)
            sock.connect(self.path)
            sock.sendall(request)
            answer = b""
            while chunk := sock.recv(65536):
                answer += chunk
        return [json.loads(line) for line in answer.splitlines()]

    def stop(self) -> bool:
        """Stop it (SIGTERM, as `make run` does); whether it was still running."""
        running = self.process.poll() is None
        if running:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
        self.log.unlink(missing_ok=True)
        return running


@pytest.fixture(scope="module")
def where(tmp_path_factory) -> Iterator[tuple[Path, str]]:
    """The lake, and a socket path short enough for AF_UNIX (pytest's temporary paths may not be)."""
    directory = tempfile.mkdtemp(prefix="bc-spark-")
    yield tmp_path_factory.mktemp("lake"), os.path.join(directory, "spark.sock")
    shutil.rmtree(directory, ignore_errors=True)


def service_env() -> dict[str, str]:
    return {**os.environ, "SPARK_DRIVER_MEMORY": "512m", "BUSCONSOLE_SPARK_CONF": SPARK_CONF}


@pytest.fixture(scope="module")
def service(where) -> Iterator[Service]:
    process = Service(where[1], service_env())
    yield process
    if process.stop():  # a service stopped, not killed, removes its socket
        assert not os.path.exists(where[1]), "the service left its socket behind"


@pytest.fixture(scope="module")
def worker(django_db_setup, django_db_blocker, where, service) -> Iterator[Worker]:
    with django_db_blocker.unblock():
        env = celery_env(BUSCONSOLE_LAKE=str(where[0]), SPARK_MASTER="local[1]", SPARK_DRIVER_MEMORY="512m",
                         BUSCONSOLE_SPARK_CONF=SPARK_CONF, BUSCONSOLE_SPARK_SERVICE=where[1])
    process = Worker("pipeline-resident", env)
    yield process
    process.stop()


def run_job(worker: Worker, service: Service, spark_conf: dict[str, str] | None = None) -> tuple[Job, set[int]]:
    """Start a pipeline job and wait for its end; the job, and every JVM seen under the worker meanwhile."""
    job = pipeline_run.pipeline_job_start(user=None, spark_conf=spark_conf)
    under_worker: set[int] = set()

    def finished() -> Job | None:
        worker.alive()
        service.alive()
        under_worker.update(javas(tree(worker.process.pid)))
        found = Job.objects.get(pk=job.pk)
        return found if found.is_finished else None

    return wait_for(finished, timeout=300, what="the pipeline job", step=0.2), under_worker


def hourly_entries() -> int:
    rows = ThroughputRollup.objects.filter(scope="stream", resolution="hour", stream__in=[b"orders", b"bin\xfekey"])
    return sum(row.entries for row in rows)


def test_runs_go_to_the_resident_driver_whose_jvm_stays(worker: Worker, service: Service, r) -> None:
    first = data.traffic()
    data.write(r, first)
    done, under_worker = run_job(worker, service, spark_conf={"spark.sql.shuffle.partitions": "5"})

    assert done.state == Job.State.DONE, done.error
    run = PipelineRun.objects.get(job=done)
    assert run.stats["driver"] == "resident" and run.stats["jobs_s"] > 0
    assert run.stats["shuffle_partitions"] == 5  # the job's option, for this run only
    assert set(run.stats["jobs"]) == {"throughput", "latency", "failures", "lag_trend", "anomalies"}
    assert hourly_entries() == len(first)
    jvms = service.jvms()
    assert len(jvms) == 1, jvms
    assert not under_worker, "a JVM ran under the worker"

    # A second run, over more history: the same JVM, no session started, the service's own partitions.
    later = [replace(e, id=f"{e.ms + 4 * data.HOUR_MS}-{e.id.split('-')[1]}") for e in data.traffic(seed=8)]
    data.write(r, later)
    done, under_worker = run_job(worker, service)

    assert done.state == Job.State.DONE, done.error
    run = PipelineRun.objects.get(job=done)
    assert (run.stats["driver"], run.stats["spark_startup_s"]) == ("resident", 0.0)
    assert run.stats["shuffle_partitions"] == 3  # BUSCONSOLE_SPARK_CONF's, as the session was started
    assert hourly_entries() == len(first) + len(later)
    assert service.jvms() == jvms and not under_worker


def test_a_run_the_driver_cannot_take_goes_to_a_child(worker: Worker, service: Service, r) -> None:
    data.write(r, data.traffic())
    jvms = service.jvms()
    # the driver's memory is fixed when its JVM starts: the service declines, a child runs it
    done, under_worker = run_job(worker, service, spark_conf={"spark.driver.memory": "600m"})

    assert done.state == Job.State.DONE, done.error
    assert PipelineRun.objects.get(job=done).stats["driver"] == "child"
    assert under_worker, "the child's JVM was never seen under the worker"
    assert service.jvms() == jvms


def test_a_failed_run_reaches_the_job_and_the_driver_goes_on(worker: Worker, service: Service, r) -> None:
    data.write(r, data.traffic())
    done, _ = run_job(worker, service, spark_conf={"spark.sql.shuffle.partitions": "many"})

    assert done.state == Job.State.FAILED
    assert "SparkRunFailed" in done.error and "resident" in done.error, done.error
    assert "spark.sql.shuffle.partitions" in done.error, done.error

    done, _ = run_job(worker, service)  # the failed run's option did not stay in the session
    assert done.state == Job.State.DONE, done.error
    assert PipelineRun.objects.get(job=done).stats["shuffle_partitions"] == 3


def test_a_later_run_reuses_the_generated_code(where, r, tmp_path: Path) -> None:
    """A new service keeps every query's generated classes (Spark's cache holds 100 by default, fewer
    than a run over every dataset generates): a later run compiles only those whose code holds its
    own ``as_of``."""
    data.write(r, [*data.traffic(), *data.metrics(), *(d.entry for d in data.dead_letters())])
    export.export_run(lake_uri=str(tmp_path / "lake"))
    fresh = Service(os.path.join(os.path.dirname(where[1]), "fresh.sock"), service_env())
    try:
        request = {"lake": str(tmp_path / "lake"), "master": "local[1]"}
        compiled = []
        for hour in (1, 2, 3):
            line = json.dumps({**request, "as_of": f"2026-01-06T{hour:02}:00:00+00:00"}).encode() + b"\n"
            answer = fresh.ask(line)
            assert answer[-1] == {"exit": 0}, answer
            compiled.append(next(item["classes_compiled"] for item in answer if "classes_compiled" in item))
    finally:
        fresh.stop()
    assert compiled[1] == compiled[2] < compiled[0] / 4, compiled


def test_a_runs_options_are_its_own(service: Service, where) -> None:
    request = {"lake": str(where[0]), "master": "local[1]", "out": str(Path(where[0]) / "rollups-options")}
    figures = service.ask(json.dumps({**request, "conf": {"spark.sql.shuffle.partitions": "7"}}).encode() + b"\n")
    assert figures[-1] == {"exit": 0} and {"shuffle_partitions": 7} in [
        {k: v for k, v in item.items() if k == "shuffle_partitions"} for item in figures], figures
    figures = service.ask(json.dumps(request).encode() + b"\n")  # no options: the session's own again
    assert figures[-1] == {"exit": 0} and any(item.get("shuffle_partitions") == 3 for item in figures), figures


def test_bad_requests_are_answered_and_change_nothing(service: Service) -> None:
    for request in (b"not json\n", b'["a list"]\n', b'{"lake": "/tmp/x"}\n',
                    b'{"lake": "/tmp/x", "master": "local[1]", "conf": {"executor.memory": "4g"}}\n'):
        answer = service.ask(request)
        assert answer[-1] == {"exit": 2}, answer
        assert answer[0]["error"].startswith("bad request"), answer
    answer = service.ask(b'{"lake": "/tmp/x", "master": "spark://elsewhere:7077"}\n')
    assert len(answer) == 1 and "spark://elsewhere:7077" in answer[0]["unserved"], answer
    # a client that connects and says nothing does not hold the service
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as silent:
        silent.connect(service.path)
        answer = service.ask(b"not json either\n")
        assert answer[-1] == {"exit": 2}, answer
    assert "sent no request" in service.output()
    service.alive()


def test_a_client_that_leaves_cancels_its_run(service: Service, where) -> None:
    out = Path(where[0]) / "rollups-left"
    request = {"lake": str(where[0]), "master": "local[1]", "out": str(out),
               "as_of": datetime.now(UTC).isoformat()}
    with socket.socket(socket.AF_UNIX, socket.SOCK_STREAM) as sock:
        sock.settimeout(60)
        sock.connect(service.path)
        sock.sendall(json.dumps(request).encode() + b"\n")
        first = json.loads(sock.makefile("rb").readline())
        assert first["resident"] is True, first  # the run starts: leave now
    wait_for(lambda: "RunCancelled" in service.output(), timeout=60, what="the service to cancel the run")

    answer = service.ask(json.dumps({**request, "out": str(Path(where[0]) / "rollups-after")}).encode() + b"\n")
    assert answer[-1] == {"exit": 0}, answer
    assert {item["job"] for item in answer if "job" in item} == {
        "throughput", "latency", "failures", "lag_trend", "anomalies"}


def test_a_driver_whose_jvm_died_restarts_and_the_run_goes_to_a_child(worker: Worker, service: Service, r) -> None:
    data.write(r, data.traffic())
    jvms, pid = service.jvms(), service.process.pid
    assert jvms
    for jvm in jvms:
        os.kill(jvm, signal.SIGKILL)  # what the kernel's OOM killer would pick: the biggest process
    wait_for(lambda: not service.jvms(), what="the JVM to go", timeout=30)

    done, _ = run_job(worker, service)
    assert done.state == Job.State.DONE, done.error
    assert PipelineRun.objects.get(job=done).stats["driver"] == "child"  # nothing ran in the service

    # the service restarted in place (same process, so a supervisor sees no exit) and takes runs again
    def restarted() -> bool:
        log = service.output()
        return service.alive() and "JVM is gone" in log and "serving Spark runs" in log.rsplit("JVM is gone", 1)[1]

    wait_for(restarted, what="the service to restart", timeout=30)
    done, _ = run_job(worker, service)
    assert done.state == Job.State.DONE, done.error
    run = PipelineRun.objects.get(job=done)
    assert run.stats["driver"] == "resident" and run.stats["spark_startup_s"] > 0, run.stats
    assert service.process.pid == pid and service.jvms() and not service.jvms() & jvms


def test_a_driver_that_dies_mid_run_fails_the_run(service: Service, where) -> None:
    """Last in this module: it kills the module's service."""
    killed = threading.Event()

    def on_step(_: dict) -> None:
        if not killed.is_set():
            killed.set()
            for pid in service.jvms():
                os.kill(pid, signal.SIGKILL)
            service.process.kill()

    with pytest.raises(pipeline_run.SparkRunFailed, match="closed the connection before the run ended"):
        pipeline_run.spark_service(
            service.path, lake_uri=str(where[0]), as_of=datetime.now(UTC), master="local[1]",
            on_step=on_step,
        )
    assert killed.is_set()


def test_no_driver_listening_is_unavailable(tmp_path: Path) -> None:
    with pytest.raises(pipeline_run.SparkServiceUnavailable, match="no resident Spark driver"):
        pipeline_run.spark_service(str(tmp_path / "none.sock"), lake_uri=str(tmp_path), as_of=datetime.now(UTC),
                                   master="local[1]")
