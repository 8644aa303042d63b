"""Real ``celery`` worker and beat processes for the console tests that go through the broker.

The processes run the interpreter's own Celery (``tests.servers.CELERY``) from the repository root on
the suite's Redis and on pytest-django's test database (its SQLite file, or PostgreSQL under ``make test-postgres``), so what they write is what the test reads.
Their output goes to a temporary log, shown when a process dies before its time.
"""

from __future__ import annotations

import os
import signal
import subprocess
import tempfile
from pathlib import Path
from urllib.parse import quote

from django.db import connection

from tests.polling import wait_for
from tests.servers import CELERY, REPO


def celery_env(**extra: str) -> dict[str, str]:
    """The environment of a Celery process sharing this test's database, plus ``extra`` settings."""
    return {
        **os.environ,
        # never a resident Spark driver a `make run` of this checkout may have started (var/spark.sock)
        "BUSCONSOLE_SPARK_SERVICE": "",
        "DATABASE_URL": shared_database_url(),
        "DJANGO_SETTINGS_MODULE": "busconsole.settings",
        "PYTHONUNBUFFERED": "1",
        **extra,
    }


def shared_database_url() -> str:
    """pytest-django's test database as a ``DATABASE_URL``: the SQLite file, or the same PostgreSQL
    server and account as the suite's ``DATABASE_URL`` with the test database's name (``make test-postgres``)."""
    db = connection.settings_dict
    if connection.vendor == "sqlite":
        assert db["NAME"] and os.path.exists(db["NAME"]), db["NAME"]
        return f"sqlite:///{db['NAME']}"
    assert connection.vendor == "postgresql", connection.vendor
    account = quote(db["USER"], safe="") + (f":{quote(db['PASSWORD'], safe='')}" if db["PASSWORD"] else "")
    return f"postgres://{account}@{db['HOST']}:{db['PORT']}/{quote(db['NAME'], safe='')}"


class CeleryProcess:
    """``celery -A busconsole <args>`` with its output in a temporary log."""

    def __init__(self, name: str, args: list[str], env: dict[str, str]) -> None:
        self.name = name
        self.log = Path(tempfile.mkstemp(prefix=f"celery-{name}-", suffix=".log")[1])
        self.process = subprocess.Popen([*CELERY, "-A", "busconsole", *args], cwd=REPO, env=env,
                                        stdout=self.log.open("wb"), stderr=subprocess.STDOUT)

    def output(self) -> str:
        return self.log.read_text(errors="replace")

    def alive(self) -> bool:
        if self.process.poll() is not None:
            raise AssertionError(f"{self.name} exited:\n{self.output()[-3000:]}")
        return True

    def kill(self) -> None:
        """SIGKILL: no shutdown handler runs, a task message stays unacked, a job stays 'running'."""
        self.process.send_signal(signal.SIGKILL)
        self.process.wait(10)

    def stop(self) -> None:
        if self.process.poll() is None:
            self.process.send_signal(signal.SIGTERM)
            try:
                self.process.wait(20)
            except subprocess.TimeoutExpired:
                self.kill()
        self.log.unlink(missing_ok=True)


class Worker(CeleryProcess):
    """``celery -A busconsole worker --pool solo``, started and ready to take tasks when constructed;
    on every queue of the settings, or on ``queues`` only (``-Q``, as the deployment's workers are)."""

    def __init__(self, name: str, env: dict[str, str], *, queues: list[str] | None = None) -> None:
        super().__init__(f"worker {name}", [
            "worker", "--pool", "solo", "--concurrency", "1", "--loglevel", "INFO",
            "--without-gossip", "--without-mingle", "--without-heartbeat", "-n", f"{name}@127.0.0.1",
            *(["-Q", ",".join(queues)] if queues else []),
        ], env)
        try:
            wait_for(self._ready, timeout=60, what=f"worker {name} to start", step=0.05)
        except BaseException:
            self.stop()  # a worker that never came up must not outlive the test
            raise

    def _ready(self) -> bool:
        return self.alive() and " ready." in self.output()


class Beat(CeleryProcess):
    """``celery -A busconsole beat`` keeping its schedule in ``schedule``."""

    def __init__(self, schedule: Path, env: dict[str, str]) -> None:
        super().__init__("beat", ["beat", "--loglevel", "INFO", "-s", str(schedule)], env)


class Workers:
    """Workers started on demand, one of them shared by the tests that do not kill theirs."""

    def __init__(self, env: dict[str, str]) -> None:
        self.env = env
        self.started: list[Worker] = []
        self._shared: Worker | None = None

    def start(self, name: str) -> Worker:
        worker = Worker(name, self.env)
        self.started.append(worker)
        return worker

    def shared(self) -> Worker:
        if self._shared is None or self._shared.process.poll() is not None:
            self._shared = self.start("shared")
        return self._shared

    def stop_shared(self) -> None:
        if self._shared is not None:
            self._shared.stop()
            self._shared = None

    def stop_all(self) -> None:
        for worker in self.started:
            worker.stop()
