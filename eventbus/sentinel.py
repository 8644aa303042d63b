"""Redis Sentinel: one URL form for every client of the project, and the clients built from it.

The form (``rediss+sentinel://`` for TLS)::

    redis+sentinel://[user:password@]host1[:26379][,host2[:26379]...]/<service>[/<db>][?sentinel_password=...]

- the hosts are the sentinels (any one that answers is enough; the port defaults to 26379, an IPv6
  address goes in brackets);
- ``<service>`` is the name the sentinels monitor (``sentinel monitor <service> ...``);
- ``<db>`` the database on the primary, 0 by default;
- ``user:password`` log in to the primary (and to a replica once it is promoted), as in ``redis://``;
- ``sentinel_username`` / ``sentinel_password`` log in to the sentinels themselves when they have a
  ``requirepass`` of their own (Redis 6.2+); without them the sentinels are asked without a login;
- ``rediss+sentinel://`` speaks TLS to the sentinels and to the primary with the same ``ssl_*``
  parameters as ``rediss://`` (:mod:`eventbus.tls`); any other query parameter is refused.

This form is the one several clients already read (``redis+sentinel://`` in redis-rb and Lettuce's
``redis-sentinel://``); the bus reads it (``Bus.from_url``, ``python -m eventbus``), and so may any
program connecting to the bus's Redis (each library it hands the URL to gets the shape that library
takes).

Why this module: redis-py has the Sentinel client (:class:`redis.sentinel.Sentinel`, ``master_for``,
sync and asyncio) but reads no URL for it, and each other library takes Sentinel its own way (kombu a
``sentinel://h1;sentinel://h2`` list with the service among its transport options, channels-redis a
dict, Django's cache a pool class). One parser here, so every client reads the same URL the same way.

The clients are redis-py's: a ``master_for`` client asks the sentinels for the primary's address each
time it opens a connection, and a connection to a primary that was demoted (``READONLY``) is closed and
opened again on the new one. The pools built here own their :class:`~redis.sentinel.Sentinel`: closing
the client closes the connections to the sentinels as well (redis-py's would leave them to the garbage
collector, which warns about each unclosed asyncio one).
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any
from urllib.parse import parse_qsl, unquote, urlencode

import redis
import redis.asyncio
import redis.asyncio.sentinel
import redis.sentinel

from .tls import TLS_PARAMETERS, tls_options, tls_problem

SCHEMES = ("redis+sentinel", "rediss+sentinel")
DEFAULT_PORT = 26379
#: The query parameters a Sentinel URL may carry besides the TLS ones.
SENTINEL_PARAMETERS = ("sentinel_username", "sentinel_password")
#: Seconds the sentinels get to answer a question about the primary (they answer from memory).
SENTINEL_TIMEOUT = 2.0

#: No sentinel names a primary for the service (all unreachable, or a failover under way): the
#: connection error redis-py raises then, sync or asyncio.
MASTER_NOT_FOUND: tuple[type[Exception], ...] = (
    redis.sentinel.MasterNotFoundError, redis.asyncio.sentinel.MasterNotFoundError,
)


@dataclass(frozen=True, slots=True)
class SentinelUrl:
    """A ``redis+sentinel://`` URL, read (passwords included: for building clients, never for showing)."""

    sentinels: tuple[tuple[str, int], ...]
    service: str
    db: int = 0
    username: str | None = None
    password: str | None = None
    sentinel_username: str | None = None
    sentinel_password: str | None = None
    #: the TLS options of both the sentinels and the primary (:func:`eventbus.tls.tls_options`); {} without TLS
    tls: dict[str, Any] | None = None

    @property
    def where(self) -> str:
        """``service via host:port,host:port``: what may be shown (no password, no user)."""
        return f"{self.service} via " + ",".join(f"{_host_text(h)}:{p}" for h, p in self.sentinels)


def is_sentinel(url: str) -> bool:
    return url.partition("://")[0].lower() in SCHEMES


def _host_text(host: str) -> str:
    return f"[{host}]" if ":" in host else host


def _address(item: str) -> tuple[str, int]:
    """``host``, ``host:port``, ``[v6]`` or ``[v6]:port`` as (host, port)."""
    if item.startswith("["):
        host, sep, rest = item[1:].partition("]")
        if not sep or (rest and not rest.startswith(":")):
            raise ValueError(f"{item!r} is not host:port")
        port_text = rest[1:]
    else:
        host, _, port_text = item.rpartition(":") if ":" in item else (item, "", "")
    if not host:
        raise ValueError(f"{item!r} names no host")
    if not port_text:
        return host, DEFAULT_PORT
    if not port_text.isdigit() or not 0 < int(port_text) < 65536:
        raise ValueError(f"{item!r} has no usable port")
    return host, int(port_text)


def parse(url: str) -> SentinelUrl:
    """Read a Sentinel URL; ValueError saying what is wrong, for a person, when it cannot be read."""
    scheme, sep, rest = url.partition("://")
    if not sep or scheme.lower() not in SCHEMES:
        raise ValueError("is not a Sentinel URL (redis+sentinel://host:26379,host:26379/<service>/<db>)")
    rest, _, query = rest.partition("?")
    rest = rest.partition("#")[0]
    netloc, _, path = rest.partition("/")
    credentials, at, hosts = netloc.rpartition("@")
    if not hosts:
        raise ValueError("names no sentinel (redis+sentinel://host:26379,host:26379/<service>/<db>)")
    try:
        sentinels = tuple(_address(item.strip()) for item in hosts.split(",") if item.strip())
    except ValueError as exc:
        raise ValueError(f"has a sentinel address that cannot be read: {exc}") from None
    if not sentinels:
        raise ValueError("names no sentinel (redis+sentinel://host:26379,host:26379/<service>/<db>)")
    username = password = None
    if at:
        user_text, has_password, password_text = credentials.partition(":")
        username = unquote(user_text) or None
        password = unquote(password_text) if has_password else None
    segments = [unquote(s) for s in path.split("/")] if path else []
    if segments and segments[-1] == "":
        segments.pop()
    if not segments or not segments[0]:
        raise ValueError("names no service: the path is /<service>/<db>, the name the sentinels monitor")
    if len(segments) > 2:
        raise ValueError(f"has a path of {len(segments)} parts: expected /<service>/<db>")
    db_text = segments[1] if len(segments) == 2 else "0"
    if not db_text.isdigit():
        raise ValueError(f"names the database {db_text!r}: a database is a number (/<service>/0)")
    given = parse_qsl(query, keep_blank_values=True)
    unknown = sorted({k for k, _ in given} - set(SENTINEL_PARAMETERS) - set(TLS_PARAMETERS))
    if unknown:
        allowed = ", ".join((*SENTINEL_PARAMETERS, *TLS_PARAMETERS))
        raise ValueError(f"has {', '.join(unknown)}: a Sentinel URL takes only {allowed}")
    options = {key: unquote(value) for key, value in given}
    tls_url = ("rediss" if scheme.lower() == "rediss+sentinel" else "redis") + "://sentinel/?" + urlencode(
        [(k, v) for k, v in given if k in TLS_PARAMETERS])
    problem = tls_problem(tls_url)
    if problem:
        raise ValueError(problem.replace("rediss://", "rediss+sentinel://"))
    return SentinelUrl(
        sentinels=sentinels, service=segments[0], db=int(db_text), username=username, password=password,
        sentinel_username=options.get("sentinel_username") or None,
        sentinel_password=options.get("sentinel_password") or None,
        tls=tls_options(tls_url),
    )


def sentinel_problem(url: str) -> str | None:
    """What is wrong with a Sentinel URL, for a person; None when it can be used."""
    try:
        parse(url)
    except ValueError as exc:
        return str(exc)
    return None


def service_of(url: str) -> str | None:
    """The service a Sentinel URL names; None for another URL or one that cannot be read."""
    if not is_sentinel(url):
        return None
    try:
        return parse(url).service
    except ValueError:
        return None


def primary_options(parsed: SentinelUrl, options: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of a connection to the primary: ``options`` plus the URL's db, login and TLS."""
    out = {**options, "db": parsed.db}
    if parsed.username is not None:
        out["username"] = parsed.username
    if parsed.password is not None:
        out["password"] = parsed.password
    if parsed.tls:
        out = {**parsed.tls, **out, "ssl": True}
    return out


def sentinel_options(parsed: SentinelUrl, options: dict[str, Any]) -> dict[str, Any]:
    """The keyword arguments of a connection to a sentinel: short timeouts, its own login, the URL's TLS."""
    timeout = options.get("socket_timeout") or SENTINEL_TIMEOUT
    out: dict[str, Any] = {
        "socket_timeout": min(float(timeout), SENTINEL_TIMEOUT),
        "socket_connect_timeout": min(float(options.get("socket_connect_timeout") or timeout), SENTINEL_TIMEOUT),
    }
    if parsed.sentinel_username is not None:
        out["username"] = parsed.sentinel_username
    if parsed.sentinel_password is not None:
        out["password"] = parsed.sentinel_password
    if parsed.tls:
        out.update(parsed.tls, ssl=True)
    return out


# ------------------------------------------------------------------------------------------ sync


class SentinelPool(redis.sentinel.SentinelConnectionPool):
    """redis-py's pool of connections to a service's primary, owning its :class:`~redis.sentinel.Sentinel`.

    ``SentinelPool.from_url(url, **options)`` is the pool class Django's cache and anything else that
    builds ``pool_class.from_url(url, **options)`` can be given. A full ``disconnect()`` (what closing
    the client does) closes the connections to the sentinels too; the partial one redis-py runs when the
    primary changes (idle connections only) leaves them.
    """

    @classmethod
    def from_url(cls, url: str, **options: Any) -> SentinelPool:
        parsed = parse(url)
        manager = redis.sentinel.Sentinel(list(parsed.sentinels), sentinel_kwargs=sentinel_options(parsed, options))
        return cls(parsed.service, manager, **primary_options(parsed, options))

    def disconnect(self, inuse_connections: bool = True) -> None:
        super().disconnect(inuse_connections)
        if inuse_connections:
            for client in self.sentinel_manager.sentinels:
                client.close()


def master_client(url: str, **options: Any) -> redis.Redis:
    """A client of the service's primary, whichever server it is now: redis-py's ``master_for``.

    ``options`` are the connection's (timeouts, ``decode_responses``, ``redis_connect_func``...).
    """
    return redis.Redis.from_pool(SentinelPool.from_url(url, **options))


def client_from_url(url: str, **options: Any) -> redis.Redis:
    """``redis.Redis.from_url`` for any URL of the project: a Sentinel one gets :func:`master_client`."""
    if is_sentinel(url):
        return master_client(url, **options)
    return redis.Redis.from_url(url, **options)


def master_address(url: str, **options: Any) -> tuple[str, int]:
    """Where the service's primary is now, as the first sentinel that knows says (MasterNotFoundError if none)."""
    parsed = parse(url)
    manager = redis.sentinel.Sentinel(list(parsed.sentinels), sentinel_kwargs=sentinel_options(parsed, options))
    try:
        host, port = manager.discover_master(parsed.service)
        return str(host), int(port)
    finally:
        for client in manager.sentinels:
            client.close()


# --------------------------------------------------------------------------------------- asyncio


class AsyncSentinelPool(redis.asyncio.sentinel.SentinelConnectionPool):
    """:class:`SentinelPool` for asyncio clients (one per event loop, as every asyncio client)."""

    @classmethod
    def from_url(cls, url: str, **options: Any) -> AsyncSentinelPool:
        parsed = parse(url)
        manager = redis.asyncio.sentinel.Sentinel(
            list(parsed.sentinels), sentinel_kwargs=sentinel_options(parsed, options))
        return cls(parsed.service, manager, **primary_options(parsed, options))

    async def disconnect(self, inuse_connections: bool = True) -> None:
        await super().disconnect(inuse_connections)
        if inuse_connections:
            for client in self.sentinel_manager.sentinels:
                await client.aclose()


def async_master_client(url: str, *, single_connection_client: bool = False, **options: Any) -> redis.asyncio.Redis:
    """:func:`master_client` for asyncio; ``single_connection_client`` holds one connection (the tail's readers)."""
    client = redis.asyncio.Redis(connection_pool=AsyncSentinelPool.from_url(url, **options),
                                 single_connection_client=single_connection_client)
    client.auto_close_connection_pool = True  # as redis-py's from_pool: the pool is the client's own
    return client
