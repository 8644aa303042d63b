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


def free_cluster_port() -> int:
    """A free port P <= 55535 whose cluster bus port P + 10000 is free as well (Redis Cluster needs both)."""
    import random

    for _ in range(200):
        port = random.randint(20000, 45000)
        try:
            with socket.socket() as a, socket.socket() as b:
                a.bind(("127.0.0.1", port))
                b.bind(("127.0.0.1", port + 10000))
        except OSError:
            continue
        return port
    raise RuntimeError("no free port pair for a cluster node")


@dataclass
class RedisServer:
    """A real redis-server process on 127.0.0.1 and a port chosen at run time."""

    port: int = field(default_factory=free_port)
    process: subprocess.Popen | None = None
    directory: str = field(default_factory=lambda: tempfile.mkdtemp(prefix="busconsole-redis-"))

    def url(self, db: int = 0) -> str:
        return f"redis://127.0.0.1:{self.port}/{db}"

    #: extra ``redis-server`` arguments (a cluster node adds ``--cluster-enabled yes`` and its own)
    extra: tuple[str, ...] = ()

    def start(self) -> RedisServer:
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not on PATH: run `make setup` (installs Debian's redis-server)")
        self.process = subprocess.Popen(
            [binary, "--port", str(self.port), "--bind", "127.0.0.1", "--save", "", "--appendonly", "no",
             "--dir", self.directory, "--databases", "16", "--loglevel", "warning", *self.extra],
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


@dataclass
class TlsRedisServer(RedisServer):
    """A RedisServer that also takes TLS on ``tls_port`` (``--tls-port``), with certificates of the test.

    Its plain port stays open for the test's own arranging and checking (and for plain-against-TLS
    comparisons on one server); what is under test connects to :meth:`tls_url`. ``client_auth``:
    ``tls-auth-clients yes`` (a client certificate signed by ``ca`` is required) or ``no``.
    """

    tls_port: int = field(default_factory=free_port)
    cert: str = ""
    key: str = ""
    ca: str = ""
    client_auth: bool = True

    def __post_init__(self) -> None:
        self.extra = (*self.extra, "--tls-port", str(self.tls_port), "--tls-cert-file", self.cert,
                      "--tls-key-file", self.key, "--tls-ca-cert-file", self.ca,
                      "--tls-auth-clients", "yes" if self.client_auth else "no")

    def tls_url(self, db: int = 0, *, host: str = "127.0.0.1", **params: str) -> str:
        """``rediss://host:tls_port/db`` with ``params`` (``ssl_ca_certs=...``) as its query."""
        query = "&".join(f"{k}={v}" for k, v in params.items())
        return f"rediss://{host}:{self.tls_port}/{db}" + (f"?{query}" if query else "")


@dataclass
class RedisClusterServers:
    """A real Redis Cluster: three ``redis-server --cluster-enabled yes`` primaries, no replicas.

    Made with ``redis-cli --cluster create`` as an operator would; the 16384 slots are split in three
    ranges, so keys without a shared ``{tag}`` usually live on different nodes.
    """

    nodes: list[RedisServer] = field(default_factory=list)
    size: int = 3

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    def url(self, **query: str) -> str:
        """A URL of the first node: enough for a cluster client, which discovers the others."""
        suffix = "&".join(f"{k}={v}" for k, v in query.items())
        return f"redis://127.0.0.1:{self.nodes[0].port}/0" + (f"?{suffix}" if suffix else "")

    def start(self) -> RedisClusterServers:
        for _ in range(self.size):
            node = RedisServer(port=free_cluster_port())
            node.extra = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                          "--cluster-node-timeout", "5000")
            self.nodes.append(node.start())
        subprocess.run(
            [shutil.which("redis-cli") or "redis-cli", "--cluster", "create",
             *(f"127.0.0.1:{port}" for port in self.ports), "--cluster-replicas", "0", "--cluster-yes"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60,
        )
        self.wait_ok()
        return self

    def wait_ok(self, timeout: float = 20.0) -> None:
        """Until every node says ``cluster_state:ok`` (slot assignment spreads by gossip)."""
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            while True:
                reply = subprocess.run(
                    ["redis-cli", "-p", str(node.port), "cluster", "info"], capture_output=True, text=True
                ).stdout
                if "cluster_state:ok" in reply:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"cluster node {node.port} is not ok: {reply[:200]}")
                time.sleep(0.1)

    def flush(self) -> None:
        for node in self.nodes:
            subprocess.run(["redis-cli", "-p", str(node.port), "flushall"], check=True, capture_output=True)

    def cleanup(self) -> None:
        for node in self.nodes:
            node.cleanup()


_server: RedisServer | None = None
_cluster: RedisClusterServers | None = None


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
    if _cluster is not None:
        _cluster.cleanup()


@pytest.fixture(scope="session")
def redis_server() -> Iterator[RedisServer]:
    """The suite's shared redis-server (db 0 is the monitored bus, db 1 the console's own)."""
    assert _server is not None
    yield _server


@pytest.fixture(scope="session")
def redis_cluster_servers() -> Iterator[RedisClusterServers]:
    """A real 3-primary Redis Cluster, started once per session by the first test that asks for it."""
    global _cluster
    if _cluster is None:
        _cluster = RedisClusterServers().start()
    yield _cluster
