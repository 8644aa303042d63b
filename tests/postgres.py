"""A pytest plugin that runs the suite on a private PostgreSQL instead of SQLite (``make test-postgres``).

Loaded with ``-p tests.postgres`` after ``-p tests.servers`` (which starts Redis): before pytest-django
reads the settings, it starts a throwaway PostgreSQL server from Debian's ``postgresql`` package the way
``tests.servers`` starts redis-server (``initdb`` in a temporary directory, ``pg_ctl start`` on a free
port of 127.0.0.1 with its unix socket in that directory, trust authentication for local connections
only), creates a database and points ``DATABASE_URL`` at it. pytest-django then creates its
``test_<name>`` database beside it, and the Celery and export child processes reach that database
through the same server. At the end the server is stopped and its directory removed.

PostgreSQL refuses to run as root, and the suite runs as root on the developers' machines and in CI:
there the data directory is handed to the ``postgres`` account the Debian package creates (or
``nobody``) and ``initdb``/``pg_ctl`` run as that account through ``runuser``.

:class:`PostgresServer` is also used by ``bench/scale.py`` to compare SQLite with PostgreSQL.
"""

from __future__ import annotations

import contextlib
import glob
import os
import pwd
import shutil
import subprocess
import tempfile
import time
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from tests.servers import free_port

#: The database the suite's ``DATABASE_URL`` names (pytest-django creates ``test_busconsole`` beside it).
DATABASE = "busconsole"
#: The superuser made by ``initdb``; local connections are trusted, so it has no password.
SUPERUSER = "busconsole"


def pg_bindir() -> Path:
    """The newest ``/usr/lib/postgresql/<major>/bin`` (Debian keeps the server binaries off PATH)."""
    found = sorted(glob.glob("/usr/lib/postgresql/*/bin/pg_ctl"), key=lambda p: int(Path(p).parts[-3]))
    if found:
        return Path(found[-1]).parent
    on_path = shutil.which("pg_ctl")
    if on_path:
        return Path(on_path).parent
    raise RuntimeError("no PostgreSQL server binaries: run `make system-postgres` (installs Debian's postgresql)")


def _run_as() -> str | None:
    """The account to run the server as when we are root (initdb refuses root), else None."""
    if os.geteuid() != 0:
        return None
    for name in ("postgres", "nobody"):
        try:
            pwd.getpwnam(name)
        except KeyError:
            continue
        return name
    raise RuntimeError("running as root and no 'postgres' or 'nobody' account to run PostgreSQL as")


@dataclass
class PostgresServer:
    """A real PostgreSQL server on 127.0.0.1 and a port chosen at run time, in a throwaway directory.

    ``durable=False`` (the suite) turns off fsync and synchronous commit: a crash loses nothing a test
    needs, and the suite runs faster. A benchmark comparing databases keeps the defaults.
    """

    port: int = field(default_factory=free_port)
    durable: bool = False
    directory: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="busconsole-pg-"))
    user: str | None = field(default_factory=_run_as)

    @property
    def datadir(self) -> str:
        return os.path.join(self.directory, "data")

    def url(self, database: str = DATABASE) -> str:
        return f"postgres://{SUPERUSER}@127.0.0.1:{self.port}/{database}"

    def _cmd(self, *args: str, **kwargs) -> subprocess.CompletedProcess:
        argv = list(args)
        if self.user:
            argv = ["runuser", "-u", self.user, "--", *argv]
        return subprocess.run(argv, check=True, capture_output=True, text=True, timeout=120, **kwargs)

    def start(self) -> PostgresServer:
        bindir = pg_bindir()
        if self.user:
            # The account must own the directory and be able to reach it (mkdtemp makes it 0700).
            info = pwd.getpwnam(self.user)
            os.chown(self.directory, info.pw_uid, info.pw_gid)
        try:
            self._cmd(str(bindir / "initdb"), "-D", self.datadir, "-U", SUPERUSER, "--auth=trust",
                      "--encoding=UTF8", "--locale=C.UTF-8", "--no-sync")
        except subprocess.CalledProcessError as exc:
            raise RuntimeError(f"initdb failed: {exc.stderr or exc.stdout}") from exc
        options = [
            f"-p {self.port}", "-c listen_addresses=127.0.0.1", f"-k {self.directory}",
            "-c max_connections=200",
        ]
        if not self.durable:
            options += ["-c fsync=off", "-c synchronous_commit=off", "-c full_page_writes=off"]
        log = os.path.join(self.directory, "server.log")
        try:
            self._cmd(str(bindir / "pg_ctl"), "-D", self.datadir, "-l", log, "-w", "-t", "60",
                      "-o", " ".join(options), "start")
        except subprocess.CalledProcessError as exc:
            tail = Path(log).read_text(errors="replace")[-2000:] if os.path.exists(log) else ""
            raise RuntimeError(f"pg_ctl start failed: {exc.stderr or exc.stdout}\n{tail}") from exc
        self.createdb(DATABASE)
        return self

    def createdb(self, name: str) -> None:
        import psycopg

        deadline = time.monotonic() + 20
        while True:
            try:
                with psycopg.connect(self.url("postgres"), autocommit=True) as conn:
                    conn.execute(f'CREATE DATABASE "{name}"')
                return
            except psycopg.OperationalError:
                if time.monotonic() > deadline:
                    raise
                time.sleep(0.1)

    def stop(self) -> None:
        if not os.path.exists(os.path.join(self.datadir, "postmaster.pid")):
            return
        with contextlib.suppress(subprocess.CalledProcessError):  # already gone
            self._cmd(str(pg_bindir() / "pg_ctl"), "-D", self.datadir, "-m", "immediate", "-w", "stop")

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


_server: PostgresServer | None = None


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args) -> None:
    global _server
    _server = PostgresServer().start()
    os.environ["DATABASE_URL"] = _server.url()


def pytest_report_header(config) -> str:
    return f"database: PostgreSQL on 127.0.0.1:{_server.port}" if _server else "database: (none started)"


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_teardown(item, nextitem):
    """Before the last test's teardown (which drops the test database), end the sessions other threads
    left open on it: Django keeps a connection per thread (``CONN_MAX_AGE``), PostgreSQL refuses to drop
    a database that has sessions, and SQLite never minded. The main thread's own session is kept."""
    if nextitem is None and _server is not None:
        _end_stray_sessions(_server)
    yield


def _end_stray_sessions(server: PostgresServer) -> None:
    import psycopg
    from django.db import connection

    own = connection.connection.info.backend_pid if connection.connection is not None else 0
    with psycopg.connect(server.url("postgres"), autocommit=True) as conn:
        conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity"
            " WHERE datname = %s AND pid <> pg_backend_pid() AND pid <> %s",
            (connection.settings_dict["NAME"], own),
        )


def pytest_unconfigure(config) -> None:
    global _server
    if _server is not None:
        _server.cleanup()
        _server = None
