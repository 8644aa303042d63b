"""Named connections to the monitored Redis servers, built lazily and cached per process.

Connection URLs come from ``settings.BUS_REDIS_URLS``; passwords never leave this module.

A connection is **standalone**, **sentinel** or **cluster**. A ``redis+sentinel://`` URL
(:mod:`eventbus.sentinel`) is one primary that the sentinels name: its clients are redis-py's
``master_for``, which ask them again at each new connection and so follow a failover. Otherwise the
URL may declare the kind (``?cluster=yes`` or ``?cluster=no``); otherwise the first use asks the
server (``INFO cluster``: ``cluster_enabled:1``) and remembers the answer for the life of the
process. One reachable node is enough for a cluster URL: redis-py's
:class:`~redis.cluster.RedisCluster` discovers the others and follows MOVED/ASK.

What a caller may rely on, for either kind:

- :func:`get_client` routes every single-key command to the key's node and splits a non-transactional
  pipeline by node; stream replies stay raw on every node (see ``_RAW_REPLIES``).
- :func:`primaries` is one plain client per primary, for what answers per node only (SCAN, INFO,
  CLIENT LIST); standalone has one.
- :func:`key_client` is a plain client on the node that owns a key's slot, for what a cluster client
  cannot send: MULTI/EXEC and Lua scripts whose keys all share that slot (:func:`same_slot`).
"""

from __future__ import annotations

import inspect
import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from functools import lru_cache
from typing import Any, cast
from urllib.parse import urlsplit, urlunsplit

import redis
import redis.asyncio as aioredis
from django.conf import settings
from redis.cluster import RedisCluster
from redis.crc import key_slot
from redis.sentinel import SentinelConnectionPool

from eventbus.connection import detect, split_mode
from eventbus.sentinel import async_master_client, is_sentinel, master_client
from eventbus.sentinel import parse as parse_sentinel
from eventbus.tls import tls_options

from .errors import NotFound, OpsError, translated
from .parsers import server_release

_clients: dict[tuple[str, str], redis.Redis | RedisCluster] = {}
#: RESP2, asked for: the parsers (``parsers.py``) read its flat arrays, and redis-py 8 defaults to
#: RESP3, whose XINFO replies are maps. Every Redis and Valkey the console supports speaks it.
RESP = 2
_RAW_REPLIES = ("XRANGE", "XREVRANGE", "XREAD", "XREADGROUP", "XPENDING", "XCLAIM", "XAUTOCLAIM")


def _identity(response: Any, **options: Any) -> Any:
    return response

_lock = threading.Lock()


def _named(name: str) -> Callable[[redis.Connection], None]:
    """A connect hook that names the connection in ``CLIENT LIST`` when the server lets it.

    redis-py's own ``client_name`` fails the whole connection when ``CLIENT SETNAME`` is refused,
    so an ACL user restricted to reading could not read at all. The name only helps whoever reads
    ``CLIENT LIST``: it is worth a try, never a failure. A ``client_name`` in the connection URL
    wins over ``name``; redis-py's handshake is run without it, and the name is sent after.
    """

    def on_connect(connection: redis.Connection) -> None:
        wanted = connection.client_name or name
        connection.client_name = None
        try:
            connection.on_connect()
        finally:
            connection.client_name = wanted
        try:
            connection.send_command("CLIENT", "SETNAME", wanted)
            connection.read_response()
        except redis.ResponseError:  # NoPermissionError (ACL) or an unknown command
            pass

    return on_connect


def _named_async(name: str) -> Callable[[aioredis.connection.AbstractConnection], Awaitable[None]]:
    """:func:`_named` for the asyncio connections of the live tail."""

    async def on_connect(connection: aioredis.connection.AbstractConnection) -> None:
        wanted = connection.client_name or name
        connection.client_name = None
        try:
            await connection.on_connect()
        finally:
            connection.client_name = wanted
        try:
            await connection.send_command("CLIENT", "SETNAME", wanted)
            await connection.read_response()
        except redis.ResponseError:
            pass

    return on_connect


@dataclass(frozen=True, slots=True)
class Connection:
    """A configured server, as safe to show: no password, no username."""

    name: str
    host: str
    port: int | None
    db: int
    #: "standalone", "cluster", or "auto" (decided by the server on first use)
    declared: str = "auto"


@dataclass(frozen=True, slots=True)
class Node:
    """One primary of a connection: its ``host:port`` name and a plain client on it."""

    name: str
    host: str
    port: int
    client: redis.Redis


@dataclass(frozen=True, slots=True)
class Health:
    name: str
    ok: bool
    #: INFO's ``redis_version``: the Redis release whose commands the server speaks (Valkey 8 says 7.2.4),
    #: what the pages' feature checks read (``lag_figure``, ``inactive_figure``)
    redis_version: str | None
    error: str | None = None
    #: what the server is, for people: "Redis 7.0.15", "Valkey 8.1.8" (:func:`.parsers.server_release`)
    server: str | None = None


@lru_cache(maxsize=256)  # a pure function of two strings; every page's navigation describes every connection
def _describe(name: str, url: str) -> Connection:
    if is_sentinel(url):  # shown as "<service> via <sentinels>": the primary changes with each failover
        sentinel = parse_sentinel(url)
        return Connection(name=name, host=sentinel.where, port=None, db=sentinel.db, declared="sentinel")
    url, declared = split_mode(url)
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return Connection(name=name, host=parts.path, port=None, db=_db_of(url), declared=declared)
    return Connection(
        name=name, host=parts.hostname or "localhost", port=parts.port or 6379, db=_db_of(url), declared=declared
    )


def _db_of(url: str) -> int:
    pool_kwargs = redis.connection.parse_url(url)
    return int(pool_kwargs.get("db", 0) or 0)


def connections() -> list[Connection]:
    return [_describe(name, url) for name, url in settings.BUS_REDIS_URLS.items()]


def connection(name: str) -> Connection:
    return _describe(name, connection_url(name))


def connection_url(name: str) -> str:
    """The configured URL of ``name``, password included: for this package's clients only."""
    url = settings.BUS_REDIS_URLS.get(name)
    if url is None:
        raise NotFound(f"No connection named {name!r} is configured.", conn=name)
    return url


def _client_options(url: str) -> dict[str, object]:
    """Bytes out, bounded timeouts (connecting, and the TLS handshake, which runs under socket_timeout),
    and for a ``rediss://`` URL the project's TLS defaults (:func:`eventbus.tls.tls_options`)."""
    timeout = settings.BUSCONSOLE_REDIS_TIMEOUT
    return {
        **tls_options(url),
        "decode_responses": False,
        "protocol": RESP,
        "socket_timeout": timeout,
        "socket_connect_timeout": min(timeout, 2.0),
        "health_check_interval": 30,
        "retry_on_timeout": False,
    }


def _raw_replies(client: redis.Redis | RedisCluster) -> None:
    # Stream replies stay as Redis sends them (flat field lists keep order and duplicate names;
    # redis-py's parsers would turn them into dicts).
    for command in _RAW_REPLIES:
        client.set_response_callback(command, _identity)


def _setname(name: str) -> Callable[[redis.Connection], None]:
    """The cluster's connect hook: RedisCluster has done the handshake; only the name is left."""

    def on_connect(connection: redis.Connection) -> None:
        try:
            connection.send_command("CLIENT", "SETNAME", name)
            connection.read_response()
        except redis.ResponseError:
            pass

    return on_connect


def _cluster_client(url: str) -> RedisCluster:
    """A RedisCluster whose every node client (today's and those a reshard adds) answers raw replies.

    redis-py parses a reply first with the node's own callbacks and only then with the cluster's, so
    the raw callbacks are set on each node's :class:`redis.Redis` as the nodes manager creates it.
    """
    options = _client_options(url)
    options.pop("health_check_interval")  # the nodes manager refreshes the topology itself
    cluster = RedisCluster.from_url(url, redis_connect_func=_setname("busconsole"), **options)
    manager = cluster.nodes_manager
    create = manager.create_redis_node

    def create_raw(host: str, port: int, **kwargs: Any) -> redis.Redis:
        node: redis.Redis = create(host, port, **kwargs)  # type: ignore[no-untyped-call]  # redis-py leaves create_redis_node unannotated
        _raw_replies(node)
        return node

    manager.create_redis_node = create_raw  # type: ignore[method-assign]  # every node the manager makes gets the raw replies
    for node in cluster.get_nodes():
        if node.redis_connection is not None:
            _raw_replies(node.redis_connection)
    _raw_replies(cluster)
    return cluster


def get_client(name: str) -> redis.Redis | RedisCluster:
    """The shared client of connection ``name`` (bytes in, bytes out, bounded timeouts).

    A :class:`RedisCluster` when the connection is a cluster: single-key commands and
    non-transactional pipelines work unchanged; see the module docstring for what does not.
    """
    url = connection_url(name)
    key = (name, url)
    client = _clients.get(key)
    if client is None:
        with _lock:
            client = _clients.get(key)
            if client is None and is_sentinel(url):  # the primary the sentinels name, followed across failovers
                client = master_client(url, redis_connect_func=_named("busconsole"), **_client_options(url))
                _raw_replies(client)
                _clients[key] = client
            elif client is None:
                plain, declared = split_mode(url)
                if declared == "auto":
                    with translated(name):
                        declared = detect(plain, **_client_options(plain))
                if declared == "cluster":
                    with translated(name):
                        client = _cluster_client(plain)
                else:
                    client = redis.Redis.from_url(plain, redis_connect_func=_named("busconsole"),
                                                  **_client_options(plain))
                    _raw_replies(client)
                _clients[key] = client
    return client


def is_cluster(name: str) -> bool:
    return isinstance(get_client(name), RedisCluster)


def primaries(name: str) -> list[Node]:
    """One plain client per primary, in slot order (the node serving slot 0 first); one for standalone."""
    client = get_client(name)
    if is_sentinel(connection_url(name)):
        with translated(name):  # where the sentinels said the primary was at the last connect, else ask them
            # a sentinel URL makes a plain client whose pool knows the primary (eventbus.sentinel.master_client)
            pool = cast("SentinelConnectionPool", cast(redis.Redis, client).connection_pool)
            host, port = pool.master_address or pool.get_master_address()
        return [Node(name=f"{host}:{port}", host=host, port=port, client=cast(redis.Redis, client))]
    if not isinstance(client, RedisCluster):
        described = connection(name)
        return [Node(name=f"{described.host}:{described.port}", host=described.host, port=described.port or 0,
                     client=client)]
    first_slot: dict[str, int] = {}
    for slot, nodes in client.nodes_manager.slots_cache.items():
        if nodes and slot < first_slot.get(nodes[0].name, 1 << 14):
            first_slot[nodes[0].name] = slot
    ordered = sorted(client.get_primaries(), key=lambda node: (first_slot.get(node.name, 1 << 14), node.name))
    return [
        Node(name=node.name, host=node.host, port=node.port, client=client.get_redis_connection(node))
        for node in ordered
    ]


#: After a primary did not answer, a cluster connection re-reads its slot map at most this often.
TOPOLOGY_REFRESH_S = 1.0
_topology_read_at: dict[str, float] = {}


def primary_failed(name: str) -> bool:
    """A primary of cluster ``name`` did not answer: read the slot map anew (``CLUSTER SLOTS``, asked of
    a node that answers), so that a replica the cluster promoted in its place is among :func:`primaries`
    from now on. True when the map was read anew.

    redis-py does this by itself when a command routed by key meets a dead node, but the per-node
    clients that :func:`primaries` hands out (SCAN, INFO) are plain ones, which do not: without this a
    listing would go on missing the promoted node's streams. At most once per :data:`TOPOLOGY_REFRESH_S`
    per connection, so a node dead for good (no replica) costs one ``CLUSTER SLOTS`` a second, not one
    per request. False on standalone and Sentinel (their clients follow a failover themselves).
    """
    client = get_client(name)
    now = time.monotonic()
    if not isinstance(client, RedisCluster) or now - _topology_read_at.get(name, 0.0) < TOPOLOGY_REFRESH_S:
        return False
    _topology_read_at[name] = now
    try:
        with translated(name):
            client.nodes_manager.initialize()
    except OpsError:  # no node answers: the callers say what they missed, as before
        return False
    return True

def slot_of(key: bytes | str) -> int:
    """The hash slot of ``key`` (its ``{tag}`` when it has one), as Redis Cluster computes it."""
    return key_slot(key.encode() if isinstance(key, str) else key)


def same_slot(name: str, *keys: bytes | str) -> bool:
    """Whether one script or MULTI may touch all of ``keys``: always on standalone."""
    if not is_cluster(name):
        return True
    return len({slot_of(key) for key in keys}) <= 1


def key_client(name: str, key: bytes | str) -> redis.Redis:
    """A plain client on the primary that owns ``key``'s slot (the shared client on standalone).

    For MULTI/EXEC and Lua scripts on a cluster, whose keys must all share ``key``'s slot. It does
    not follow MOVED: a reshard in flight answers a MOVED error, raised like any refusal. A primary
    that cannot be reached makes it read the slot map anew first (:func:`primary_failed`), so the
    promoted replica is the one handed out once the cluster has failed over.
    """
    client = get_client(name)
    if not isinstance(client, RedisCluster):
        return client
    with translated(name):
        node = client.get_redis_connection(client.get_node_from_key(key))
        if not _answers(node) and primary_failed(name):  # a replica may serve the key's slot now
            node = client.get_redis_connection(client.get_node_from_key(key))
        return node


#: redis-py before 5.3 lends a connection for a named command; from 5.3 on, naming one is deprecated.
_LEND_ARGS: tuple[str, ...] = (
    ("PING",) if inspect.signature(redis.ConnectionPool.get_connection).parameters["command_name"].default
    is inspect.Parameter.empty else ()
)


def _answers(node: redis.Redis) -> bool:
    """Whether a connection to ``node`` can be had, with no round trip: the pool checks the connection it
    lends (its socket polled; one the server closed, as a killed primary's are, is made anew) or makes one,
    which it keeps. So a dead primary is known before a MULTI or a script is sent to it."""
    pool = node.connection_pool
    try:
        connection = pool.get_connection(*_LEND_ARGS)
    except (redis.ConnectionError, redis.TimeoutError, OSError):
        return False
    pool.release(connection)
    return True


def node_url(name: str, host: str, port: int) -> str:
    """The connection's URL (credentials, TLS, options) pointed at one node: for the tail's readers."""
    plain, _ = split_mode(connection_url(name))
    parts = urlsplit(plain)
    netloc = parts.netloc.rpartition("@")[0]
    netloc = (netloc + "@" if netloc else "") + f"{host}:{port}"
    return urlunsplit(parts._replace(netloc=netloc))


def async_client(url: str, *, client_name: str, wait_s: float = 0.0) -> aioredis.Redis:
    """A one-connection asyncio client with the shared client's settings, for the live tail.

    One connection, not a pool: a blocked ``XREAD`` must be the only thing on its socket (it is
    interrupted by its ``CLIENT ID``), and redis-py's lock serialises the commands of the other.
    ``wait_s`` is added to the read timeout of a connection that blocks on purpose (``XREAD BLOCK``).
    """
    timeout = float(settings.BUSCONSOLE_REDIS_TIMEOUT)
    make, plain = (async_master_client, url) if is_sentinel(url) else (aioredis.Redis.from_url, split_mode(url)[0])
    client = make(
        plain,
        **tls_options(url),
        decode_responses=False,
        protocol=RESP,
        single_connection_client=True,
        socket_connect_timeout=min(timeout, 2.0),
        socket_timeout=timeout + wait_s,
        redis_connect_func=_named_async(client_name),
    )
    for command in _RAW_REPLIES:
        client.set_response_callback(command, _identity)
    return client


def async_waiting_pool(address: str, *, max_connections: int, wait_s: float,
                       **options: Any) -> aioredis.BlockingConnectionPool:
    """An asyncio pool of ``max_connections`` to ``address`` whose commands wait up to ``wait_s`` for a
    free connection rather than fail ("Too many connections"); for the channel layer
    (:mod:`streams_app.live.layer`). ``options`` are the connections' (TLS, timeouts)."""
    return aioredis.BlockingConnectionPool.from_url(
        address, max_connections=max_connections, timeout=wait_s, **options
    )


def server_facts(node: redis.Redis) -> dict[str, object]:
    """INFO server of ``node``; where INFO is renamed away or refused (managed services), what HELLO says.

    HELLO (Redis 6.2+, no arguments: the protocol is left as it is) names the server and its version;
    for Redis that is INFO's ``redis_version``, for another server its own ``<name>_version`` (its
    ``redis_version``, the Redis release it speaks, stays unknown). A server refusing both answered all
    the same: its facts are empty, and it is healthy.
    """
    try:
        return node.info("server")
    except redis.ResponseError:
        pass
    try:
        hello = node.execute_command("HELLO")
    except redis.ResponseError:
        return {}
    pairs = hello.items() if isinstance(hello, dict) else zip(hello[::2], hello[1::2], strict=True)  # RESP3: a map
    said = {_text(key): _text(value) for key, value in pairs}
    server, version = said.get("server") or "redis", said.get("version")
    if not version:
        return {}
    return {"redis_version": version} if server == "redis" else {"server_name": server, f"{server}_version": version}


def _text(value: object) -> object:
    return value.decode(errors="replace") if isinstance(value, bytes) else value


_health_cache: dict[str, tuple[float, Health]] = {}
HEALTH_TTL_S = 5.0


def health(name: str, *, fresh: bool = False) -> Health:
    """Whether ``name`` answers, and its version; cached a few seconds per process."""
    now = time.monotonic()
    cached = _health_cache.get(name)
    if cached and not fresh and now - cached[0] < HEALTH_TTL_S:
        return cached[1]
    try:
        with translated(name):
            info = server_facts(primaries(name)[0].client)
        version = info.get("redis_version")
        result = Health(name=name, ok=True, redis_version=str(version) if version else None,
                        server=server_release(info))
    except NotFound:
        raise
    except Exception as exc:  # noqa: BLE001 - any failure means "not healthy", shown as such
        result = Health(name=name, ok=False, redis_version=None, error=getattr(exc, "message", str(exc)))
    _health_cache[name] = (now, result)
    return result


def reset() -> None:
    """Forget clients and health (tests that change settings call this)."""
    with _lock:
        for client in _clients.values():
            client.close()
        _clients.clear()
        _health_cache.clear()
        _topology_read_at.clear()
