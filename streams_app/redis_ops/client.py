"""Named connections to the monitored Redis servers, built lazily and cached per process.

Connection URLs come from ``settings.BUS_REDIS_URLS``; passwords never leave this module.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Awaitable, Callable
from dataclasses import dataclass
from urllib.parse import urlsplit

import redis
import redis.asyncio as aioredis
from django.conf import settings

from .errors import NotFound, translated

_clients: dict[tuple[str, str], redis.Redis] = {}
_RAW_REPLIES = ("XRANGE", "XREVRANGE", "XREAD", "XREADGROUP", "XPENDING", "XCLAIM", "XAUTOCLAIM")


def _identity(response, **options):
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


@dataclass(frozen=True, slots=True)
class Health:
    name: str
    ok: bool
    redis_version: str | None
    error: str | None = None


def _describe(name: str, url: str) -> Connection:
    parts = urlsplit(url)
    if parts.scheme == "unix":
        return Connection(name=name, host=parts.path, port=None, db=_db_of(url))
    return Connection(name=name, host=parts.hostname or "localhost", port=parts.port or 6379, db=_db_of(url))


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


def get_client(name: str) -> redis.Redis:
    """The shared client of connection ``name`` (bytes in, bytes out, bounded timeouts)."""
    url = connection_url(name)
    key = (name, url)
    client = _clients.get(key)
    if client is None:
        with _lock:
            client = _clients.get(key)
            if client is None:
                timeout = settings.BUSCONSOLE_REDIS_TIMEOUT
                client = redis.Redis.from_url(
                    url,
                    decode_responses=False,
                    socket_timeout=timeout,
                    socket_connect_timeout=min(timeout, 2.0),
                    health_check_interval=30,
                    retry_on_timeout=False,
                    redis_connect_func=_named("busconsole"),
                )
                # Stream replies stay as Redis sends them (flat field lists keep order and
                # duplicate names; redis-py's parsers would turn them into dicts).
                for command in _RAW_REPLIES:
                    client.set_response_callback(command, _identity)
                _clients[key] = client
    return client


def async_client(url: str, *, client_name: str, wait_s: float = 0.0) -> aioredis.Redis:
    """A one-connection asyncio client with the shared client's settings, for the live tail.

    One connection, not a pool: a blocked ``XREAD`` must be the only thing on its socket (it is
    interrupted by its ``CLIENT ID``), and redis-py's lock serialises the commands of the other.
    ``wait_s`` is added to the read timeout of a connection that blocks on purpose (``XREAD BLOCK``).
    """
    timeout = float(settings.BUSCONSOLE_REDIS_TIMEOUT)
    client = aioredis.Redis.from_url(
        url,
        decode_responses=False,
        single_connection_client=True,
        socket_connect_timeout=min(timeout, 2.0),
        socket_timeout=timeout + wait_s,
        redis_connect_func=_named_async(client_name),
    )
    for command in _RAW_REPLIES:
        client.set_response_callback(command, _identity)
    return client


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
            info = get_client(name).info("server")
        version = info.get("redis_version")
        result = Health(name=name, ok=True, redis_version=str(version) if version else None)
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
