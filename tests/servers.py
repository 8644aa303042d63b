"""A pytest plugin that starts a private redis-server before Django's settings are read.

Loaded with ``-p tests.servers`` (see pyproject.toml) so that it runs before pytest-django imports
the settings: the settings then point BUS_REDIS_URL (db 0, the monitored bus) and REDIS_URL (db 1,
the console's own broker, cache and channel layer) at this server. Nothing here is mocked.
"""

from __future__ import annotations

import os
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parent.parent
#: The Celery command of the interpreter running the suite (``make test`` uses the venv's).
CELERY = (sys.executable, "-m", "celery")


def free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return sock.getsockname()[1]


@dataclass
class RedisServer:
    """A real redis-server process on 127.0.0.1 and a port chosen at run time."""

    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None
    directory: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="busconsole-redis-"))

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not on PATH: run `make setup` (installs Debian's redis-server)")
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.directory, "--databases", "16", "--loglevel", "warning"],
            stdout=subprocess.DEVNULL,
            stderr=subprocess.DEVNULL,
        )
        deadline = time.monotonic() + 10
        while time.monotonic() < deadline:
            if self.process.poll() is not None:
                raise RuntimeError(f"redis-server exited with {self.process.returncode} on port {self.port}")
            try:
                with socket.create_connection(("127.0.0.1", self.port), timeout=0.2) as sock:
                    sock.sendall(b"PING\r\n")
                    if sock.recv(16).startswith(b"+PONG"):
                        return self
            except OSError:
                time.sleep(0.05)
        raise RuntimeError(f"redis-server did not answer on port {self.port}")

    def stop(self) -> None:
        if self.process and self.process.poll() is None:
            self.process.terminate()
            try:
                self.process.wait(5)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait(5)
        self.process = None

    def cleanup(self) -> None:
        self.stop()
        shutil.rmtree(self.directory, ignore_errors=True)


_server: RedisServer | None = None


@pytest.hookimpl(tryfirst=True)
def pytest_load_initial_conftests(early_config, parser, args) -> None:
    global _server
    _server = RedisServer().start()
    os.environ["BUS_REDIS_URL"] = _server.url(0)
    os.environ.pop("BUS_REDIS_URLS", None)
    os.environ["REDIS_URL"] = _server.url(1)
    os.environ.setdefault("DEBUG", "1")
    os.environ["BUSCONSOLE_VAR_DIR"] = tempfile.mkdtemp(prefix="busconsole-var-")
    os.environ["BUSCONSOLE_READ_ONLY"] = "0"


def pytest_unconfigure(config) -> None:
    if _server is not None:
        _server.cleanup()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """The suite's shared redis-server (db 0 is the monitored bus, db 1 the console's own)."""
    assert _server is not None
    yield _server
