"""A throwaway Spark standalone cluster (one master, one worker) from the pyspark this Python has.

For the test that runs the jobs on a real cluster and for ``bench/pipeline.py --standalone``; the
README's "Spark on a cluster" shows the same two commands by hand. The pip package ships the whole
of Spark's launch scripts and jars under ``pyspark/``, which is the ``SPARK_HOME`` that
``bin/spark-class`` needs (it does not find one from a virtualenv by itself).

Everything listens on 127.0.0.1 on free ports; the master's and worker's logs and the worker's
directory (where executors run) live in ``workdir``. Its ``conf/spark-defaults.conf`` (read by a
driver started with :meth:`Standalone.env`) gives the driver and the executors the JVM flags a local
session has (:data:`pipeline.session.SHORT_RUN_JVM`): this cluster lives for one short run, where the
optimizing JIT and G1's concurrent threads burn as much CPU as the jobs on the same cores; a real
cluster's executors are long-lived and keep the JVM's defaults. :meth:`Standalone.stop` ends each daemon's whole
process group, so the executors a worker started go with it.
"""

from __future__ import annotations

import contextlib
import os
import signal
import socket
import subprocess
import time
from pathlib import Path
from types import TracebackType

from pipeline.session import SHORT_RUN_JVM

MASTER_CLASS = "org.apache.spark.deploy.master.Master"
WORKER_CLASS = "org.apache.spark.deploy.worker.Worker"
#: The spark-defaults.conf of the cluster (see the module's doc).
DEFAULTS = {"spark.driver.extraJavaOptions": SHORT_RUN_JVM, "spark.executor.extraJavaOptions": SHORT_RUN_JVM}


def spark_home() -> str:
    """``$SPARK_HOME``, else the installed pyspark's directory (which has ``bin/spark-class``)."""
    if os.environ.get("SPARK_HOME"):
        return os.environ["SPARK_HOME"]
    import pyspark

    return os.path.dirname(pyspark.__file__)


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


class Standalone:
    """``with Standalone(workdir) as cluster:`` a master at ``cluster.url`` with one worker registered."""

    def __init__(self, workdir: Path, *, cores: int = 1, memory: str = "1g", timeout: float = 90.0) -> None:
        self.workdir = Path(workdir)
        self.cores, self.memory, self.timeout = cores, memory, timeout
        self.port = free_port()
        self.url = f"spark://127.0.0.1:{self.port}"
        self.processes: list[subprocess.Popen[bytes]] = []

    def env(self) -> dict[str, str]:
        """What a daemon (and a driver talking to it) needs: SPARK_HOME, loopback, small daemon heaps, and
        a conf directory of its own: :data:`DEFAULTS`, not the machine's spark-defaults.conf or log4j2 file."""
        conf_dir = self.workdir / "conf"
        conf_dir.mkdir(parents=True, exist_ok=True)
        (conf_dir / "spark-defaults.conf").write_text("".join(f"{k} {v}\n" for k, v in DEFAULTS.items()))
        return {
            **os.environ,
            "SPARK_HOME": spark_home(),
            "SPARK_CONF_DIR": str(conf_dir),
            "SPARK_LOCAL_IP": "127.0.0.1",
            "SPARK_DAEMON_MEMORY": "256m",
            "SPARK_WORKER_DIR": str(self.workdir / "work"),
        }

    def _daemon(self, name: str, args: list[str]) -> tuple[subprocess.Popen[bytes], Path]:
        log = self.workdir / f"{name}.log"
        process = subprocess.Popen(
            [os.path.join(spark_home(), "bin", "spark-class"), *args], env=self.env(), cwd=self.workdir,
            stdin=subprocess.DEVNULL, stdout=log.open("wb"), stderr=subprocess.STDOUT, start_new_session=True,
        )
        self.processes.append(process)
        return process, log

    def _wait(self, process: subprocess.Popen[bytes], log: Path, marker: str, what: str) -> None:
        deadline = time.monotonic() + self.timeout
        while marker not in log.read_text(errors="replace"):
            if process.poll() is not None or time.monotonic() > deadline:
                tail = log.read_text(errors="replace")[-3000:]
                raise RuntimeError(f"the standalone {what} did not come up:\n{tail}")
            time.sleep(0.1)

    def start(self) -> Standalone:
        self.workdir.mkdir(parents=True, exist_ok=True)
        try:
            master, log = self._daemon("master", [
                MASTER_CLASS, "--host", "127.0.0.1", "--port", str(self.port), "--webui-port", str(free_port()),
            ])
            self._wait(master, log, "I have been elected leader", "master")
            worker, log = self._daemon("worker", [
                WORKER_CLASS, self.url, "--host", "127.0.0.1", "--cores", str(self.cores), "--memory", self.memory,
                "--webui-port", str(free_port()), "--work-dir", str(self.workdir / "work"),
            ])
            self._wait(worker, log, "Successfully registered with master", "worker")
        except BaseException:
            self.stop()
            raise
        return self

    def stop(self) -> None:
        """SIGTERM each daemon's process group (worker first), SIGKILL what is left after 20 s."""
        for process in reversed(self.processes):
            _signal_group(process, signal.SIGTERM)
        for process in reversed(self.processes):
            with contextlib.suppress(subprocess.TimeoutExpired):
                process.wait(20)
            _signal_group(process, signal.SIGKILL)  # the group's stragglers (an executor) too
            process.wait()
        self.processes.clear()

    def __enter__(self) -> Standalone:
        return self.start()

    def __exit__(self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None) -> None:
        self.stop()


def _signal_group(process: subprocess.Popen[bytes], sig: int) -> None:
    with contextlib.suppress(ProcessLookupError):
        os.killpg(process.pid, sig)
