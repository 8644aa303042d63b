"""Standalone or cluster: which kind of Redis a bus URL names, and its clients (sync and asyncio).

The one reading of a URL's kind: any program that connects to a bus URL (the bus itself, its command
line, an application monitoring the bus) asks :func:`split_mode` and :func:`detect` here:

- the URL may declare the kind with ``?cluster=yes`` or ``?cluster=no`` (also true/false/1/0, and
  ``auto``); the argument is taken out of the URL before redis-py sees it, which would otherwise
  pass it on to the connection as an unknown keyword;
- a ``redis+sentinel://`` URL (:mod:`eventbus.sentinel`) is one primary found through its sentinels:
  its clients are redis-py's ``master_for``, which follow a failover to the promoted replica;
- otherwise the first client asks the server once (``INFO cluster``: ``cluster_enabled:1``) and the
  answer is kept for the life of the :class:`Connector`. A server that refuses INFO (an ACL) is
  taken as standalone: a cluster client would need CLUSTER SLOTS and fail the same way.

On a cluster the clients are redis-py's :class:`redis.cluster.RedisCluster` and
:class:`redis.asyncio.cluster.RedisCluster`: they route each single-key command to its node, follow
MOVED/ASK, and split a non-transactional pipeline by node. What they cannot do, and the bus
therefore never asks of them: MULTI (the progress streams use one-key Lua instead), and a script or
XREADGROUP over keys of several slots (the bus's own keys share their stream's slot, see
:mod:`eventbus.keys`, and a worker reads each slot's streams with its own XREADGROUP).
"""

from __future__ import annotations

import inspect
import threading
from typing import TYPE_CHECKING, Any
from urllib.parse import parse_qsl, unquote, urlencode, urlsplit, urlunsplit

import redis
import redis.asyncio
import redis.asyncio.cluster
import redis.cluster

if TYPE_CHECKING:
    from typing_extensions import TypeIs  # typing has it from Python 3.13

from .sentinel import async_master_client, is_sentinel, master_client, sentinel_problem
from .tls import tls_options, tls_problem

CLUSTER = "cluster"
STANDALONE = "standalone"
AUTO = "auto"
#: a ``redis+sentinel://`` URL: one primary, found through the sentinels (:mod:`eventbus.sentinel`)
SENTINEL = "sentinel"

_DECLARED = {
    "yes": CLUSTER, "true": CLUSTER, "1": CLUSTER,
    "no": STANDALONE, "false": STANDALONE, "0": STANDALONE,
    "auto": AUTO,
}

#: Keywords the asyncio cluster client accepts; it raises on others, where the sync one drops them.
_ASYNC_CLUSTER_KWARGS = frozenset(inspect.signature(redis.asyncio.cluster.RedisCluster.__init__).parameters) - {
    "self"
}
#: Per-connection options the sync cluster client has no use for (it refreshes its topology itself).
_SYNC_CLUSTER_DROPPED = ("health_check_interval",)

#: What a Redis call may raise. redis-py's cluster clients raise some failures (a slot no node
#: serves while a node is down, say) as ``RedisClusterException``, which is not a ``RedisError``.
REDIS_ERRORS: tuple[type[Exception], ...] = (redis.RedisError, redis.exceptions.RedisClusterException)

SyncClient = redis.Redis | redis.cluster.RedisCluster
AsyncClient = redis.asyncio.Redis | redis.asyncio.cluster.RedisCluster

#: The port of the local Redis a program on the bus uses when it is given no URL: ``python -m eventbus``
#: tries ``redis://127.0.0.1:<port>/0`` (the port from ``$EVENTBUS_REDIS_PORT`` when set). Programs that
#: start a Redis of their own for development use it too, so that the command line finds it unasked.
DEFAULT_PORT = 6390


class ClusterValueError(ValueError):
    """A ``cluster=`` argument that is none of yes, no, auto (or true/false/1/0): ``value`` is what was given."""

    def __init__(self, value: str) -> None:
        super().__init__(f"cluster={value!r}: expected yes, no or auto")
        self.value = value


def split_mode(url: str) -> tuple[str, str]:
    """``url`` without its ``cluster=`` argument, and what it declares (``cluster``/``standalone``/``auto``).

    redis-py would pass an unknown query argument on to the client as a keyword, so it is taken out
    here. Any other value than those of :data:`_DECLARED` is :class:`ClusterValueError`.
    """
    parts = urlsplit(url)
    declared = AUTO
    kept = []
    for key, value in parse_qsl(parts.query, keep_blank_values=True):
        if key == "cluster":
            if value.lower() not in _DECLARED:
                raise ClusterValueError(value)
            declared = _DECLARED[value.lower()]
        else:
            kept.append((key, value))
    return urlunsplit(parts._replace(query=urlencode(kept))), declared


def url_problem(url: str) -> str | None:
    """What is wrong with ``url`` as a bus URL, said for a person; None when redis-py reads it as written.

    redis-py raises a bare ValueError for a scheme it does not take or a port that is not a number,
    and reads a database that is not a number (``redis://host/orders``) as db 0 without a word: here
    each is refused up front. Whether the database exists is for the server to say
    (:func:`database_missing`).
    """
    if is_sentinel(url):
        return sentinel_problem(url)
    scheme, sep, _ = url.partition("://")
    if not sep or scheme.lower() not in ("redis", "rediss", "unix"):
        return ("is not a Redis URL (redis://, rediss://, unix:// or redis+sentinel://, "
                "as in redis://127.0.0.1:6379/0)")
    try:
        parts = urlsplit(url)
        parts.port  # noqa: B018  (reading it checks it)
    except ValueError as exc:
        return f"has no usable port: {exc}"
    database = unquote(parts.path).strip("/")
    if scheme.lower() != "unix" and database and not database.isdigit():
        return f"names the database {database!r}: a database is a number (redis://127.0.0.1:6379/0)"
    try:
        split_mode(url)
        redis.connection.parse_url(url)
    except ValueError as exc:
        return str(exc).rstrip(".")
    return tls_problem(url)


def database_missing(exc: BaseException) -> bool:
    """Whether ``exc`` is the server refusing to SELECT the URL's database (beyond its ``databases``)."""
    return isinstance(exc, redis.ResponseError) and "DB index is out of range" in str(exc)


_PROBE_ERRORS: tuple[type[Exception], ...] = (*REDIS_ERRORS, TypeError, ValueError)


def databases_of(url: str) -> int | None:
    """How many databases the server at ``url`` has (``CONFIG GET databases`` on db 0); None if it will not say."""
    try:
        plain = split_mode(url)[0]
        options = {**tls_options(plain), **redis.connection.parse_url(plain), "db": 0, "socket_timeout": 5,
                   "socket_connect_timeout": 5}
        probe = redis.Redis(connection_pool=redis.ConnectionPool(**options))
        try:
            databases = probe.config_get("databases").get("databases")
            return None if databases is None else int(databases)
        finally:
            probe.close()
    except _PROBE_ERRORS:
        return None


def detect(url: str, **options: Any) -> str:
    """``cluster`` when the server at ``url`` runs with ``cluster-enabled yes``, else ``standalone``."""
    probe = redis.Redis.from_url(url, **options)
    try:
        info = probe.info("cluster")
    except redis.ResponseError:
        return STANDALONE
    finally:
        probe.close()
    return CLUSTER if int(info.get("cluster_enabled", 0) or 0) else STANDALONE


def is_cluster_client(
    client: object,
) -> TypeIs[redis.cluster.RedisCluster | redis.asyncio.cluster.RedisCluster | redis.asyncio.cluster.ClusterPipeline]:
    """Whether ``client`` (sync or asyncio, or one of their pipelines) talks to a cluster."""
    return isinstance(
        client,
        redis.cluster.RedisCluster | redis.asyncio.cluster.RedisCluster | redis.asyncio.cluster.ClusterPipeline,
    )


class Connector:
    """Builds the clients of one bus URL, deciding standalone or cluster once (thread-safe)."""

    def __init__(self, url: str, options: dict[str, Any]) -> None:
        self.url, self.declared = (url, SENTINEL) if is_sentinel(url) else split_mode(url)
        # TLS from the URL with the project's defaults (eventbus/tls.py); options given here win.
        self.options = {**tls_options(self.url), **options}
        self._mode: str | None = None if self.declared == AUTO else self.declared
        self._lock = threading.Lock()

    @property
    def mode(self) -> str:
        """``cluster`` or ``standalone``; asks the server on first use when the URL does not say."""
        if self._mode is None:
            with self._lock:
                if self._mode is None:
                    probe_options = {k: v for k, v in self.options.items() if k != "health_check_interval"}
                    self._mode = detect(self.url, **probe_options)
        return self._mode

    @property
    def cluster(self) -> bool:
        return self.mode == CLUSTER

    def sync_client(self, **overrides: Any) -> SyncClient:
        options = {**self.options, **overrides}
        if self.declared == SENTINEL:
            return master_client(self.url, **options)
        if self.cluster:
            for name in _SYNC_CLUSTER_DROPPED:
                options.pop(name, None)
            return redis.cluster.RedisCluster.from_url(self.url, **options)
        return redis.Redis.from_url(self.url, **options)

    def async_client(self, **overrides: Any) -> AsyncClient:
        options = {**self.options, **overrides}
        if self.declared == SENTINEL:
            return async_master_client(self.url, **options)
        if self.cluster:
            kept = {k: v for k, v in options.items() if k in _ASYNC_CLUSTER_KWARGS}
            return redis.asyncio.cluster.RedisCluster.from_url(self.url, **kept)
        return redis.asyncio.Redis.from_url(self.url, **options)
