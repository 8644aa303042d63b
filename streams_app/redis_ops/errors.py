"""The one error type of the Redis access layer.

Views and the API catch :class:`OpsError` and turn ``code`` into a status: the caller's mistakes
are 4xx, an unreachable server is 503. Nothing else from redis-py escapes this package.
"""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager

import redis
from django.conf import settings
from redis.exceptions import (
    AskError,
    ClusterDownError,
    ClusterError,
    RedisClusterException,
    SlotNotCoveredError,
    TryAgainError,
)

from eventbus.sentinel import MASTER_NOT_FOUND, service_of
from eventbus.tls import tls_reason


class OpsError(Exception):
    """Redis said no, Redis is unreachable, or the thing asked for does not exist."""

    #: machine-readable reason, also the API's ``error.code``
    code = "redis_error"
    #: HTTP status the console answers with
    status = 400

    def __init__(self, message: str, *, conn: str | None = None) -> None:
        super().__init__(message)
        self.message = message
        self.conn = conn


class Unreachable(OpsError):
    code = "unreachable"
    status = 503


class TlsFailure(Unreachable):
    """The TLS connection failed: a certificate refused by either side, or no TLS on that port.

    Its message says which (:func:`eventbus.tls.tls_reason`): a wrong CA, an expired certificate, one
    that names another host, a missing or untrusted client certificate.
    """

    code = "tls_error"
    status = 503


class NotFound(OpsError):
    code = "not_found"
    status = 404


class InvalidArgument(OpsError):
    """The caller asked for something malformed (a bad stream ID, a negative count...)."""

    code = "bad_request"
    status = 400


class Conflict(OpsError):
    """The action would lose data the caller did not agree to lose (a consumer's pending entries)."""

    code = "conflict"
    status = 409


class NoPermission(OpsError):
    """The connection's ACL user may not run that command or touch that key (NOPERM).

    The console's role allowed the action; the Redis user it connects as does not: 403, naming what
    is missing, for whoever deploys the console to grant (deploy/redis/users.acl) or to keep refused.
    """

    code = "no_permission"
    status = 403


class RedisRefused(OpsError):
    """Redis answered with an error reply."""

    code = "redis_error"
    status = 400


#: How Redis words an ACL refusal inside a Lua script (redis.call of a command the user may not run);
#: outside scripts the reply is NOPERM, which redis-py raises as NoPermissionError.
_SCRIPT_REFUSALS = ("can't run this command or subcommand", "no permissions to access", "No permissions to access")


def reply_text(exc: redis.ResponseError) -> str:
    """The error reply as Redis wrote it (``CROSSSLOT Keys in request...``).

    redis-py 8 parses MOVED, ASK, TRYAGAIN, CLUSTERDOWN, CROSSSLOT and MASTERDOWN into classes of their
    own on every connection and keeps the leading code apart (``status_code``), out of the text;
    redis-py 5 left them whole, as plain ResponseErrors, on a plain connection.
    """
    text = str(exc)
    code = getattr(exc, "status_code", None)
    return f"{code} {text}" if code and not text.startswith(code) else text


def _refusal(conn: str, exc: redis.ResponseError) -> OpsError:
    text = reply_text(exc)
    if isinstance(exc, redis.exceptions.NoPermissionError) or any(word in text for word in _SCRIPT_REFUSALS):
        reason = text.removeprefix("NOPERM ")
        return NoPermission(
            f"Redis refused the command to the console's ACL user (NOPERM {reason}): the user of connection "
            f"{conn!r} lacks that permission (see deploy/redis/users.acl).",
            conn=conn,
        )
    if "WRONGTYPE" in text:
        return NotFound("That key holds another type, not a stream.", conn=conn)
    if "no such key" in text:
        return NotFound("No such stream.", conn=conn)
    if "NOGROUP" in text:
        return NotFound("No such stream or consumer group.", conn=conn)
    if "Invalid stream ID" in text:
        return InvalidArgument("Invalid stream ID.", conn=conn)
    return RedisRefused(f"Redis refused the command: {text}", conn=conn)


def _tls_failure(conn: str, exc: BaseException) -> TlsFailure | None:
    """:class:`TlsFailure` when ``exc`` is a failed TLS connection to ``conn``'s server, else None."""
    reason = tls_reason(exc, settings.BUS_REDIS_URLS.get(conn, ""))
    return TlsFailure(f"TLS with Redis server {conn!r} failed: {reason}.", conn=conn) if reason else None


def _failing_over(conn: str, exc: BaseException) -> Unreachable | None:
    """On a Sentinel connection, a primary that does not answer is most likely being replaced: say so.

    None for any other connection. The clients ask the sentinels again at their next connection, so a
    retry after the failover reaches the promoted replica.
    """
    service = service_of(settings.BUS_REDIS_URLS.get(conn, ""))
    if service is None:
        return None
    if isinstance(exc, MASTER_NOT_FOUND):
        return Unreachable(f"Redis {conn!r} is failing over: no sentinel names a primary of {service!r} now. "
                           "Retrying: pages work again once a replica is promoted.", conn=conn)
    return Unreachable(f"Redis {conn!r} is failing over or unreachable: the primary of {service!r} does not "
                       f"answer ({exc}). Retrying: the sentinels name the new primary once one is promoted.",
                       conn=conn)


@contextmanager
def translated(conn: str) -> Iterator[None]:
    """Turn redis-py's exceptions raised inside the block into :class:`OpsError`."""
    try:
        yield
    except OpsError:
        raise
    except (ClusterDownError, SlotNotCoveredError) as exc:
        raise Unreachable(f"Redis Cluster {conn!r} cannot serve this key now: {exc}", conn=conn) from exc
    except (AskError, TryAgainError) as exc:
        # MOVED (an AskError), ASK, TRYAGAIN: the console routes by slot, so these mean a reshard moved
        # the key between two commands. CROSSSLOT is not one of them (a key's slot never changes): it
        # is the command's own refusal, below, as redis-py 5 raised it.
        raise Unreachable(f"Redis Cluster {conn!r} is moving this key between nodes; try again.", conn=conn) from exc
    except ClusterError as exc:
        raise Unreachable(f"Redis Cluster {conn!r}: {exc}", conn=conn) from exc
    except redis.ResponseError as exc:
        raise _refusal(conn, exc) from exc
    except (redis.ConnectionError, redis.TimeoutError, OSError) as exc:
        message = f"Redis server {conn!r} is unreachable: {exc}"
        raise (_tls_failure(conn, exc) or _failing_over(conn, exc) or Unreachable(message, conn=conn)) from exc
    except redis.RedisError as exc:
        raise RedisRefused(f"Redis error on {conn!r}: {exc}", conn=conn) from exc
    except RedisClusterException as exc:  # not a RedisError: the client's own refusal (cross-slot keys...)
        if "cannot be connected" in str(exc):  # no startup node answered
            message = f"Redis Cluster {conn!r} is unreachable: {exc}"
            raise (_tls_failure(conn, exc) or Unreachable(message, conn=conn)) from exc
        raise RedisRefused(f"Redis Cluster {conn!r}: {exc}", conn=conn) from exc
