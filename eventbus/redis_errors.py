"""One clear line for a Redis that is not where a command looks, instead of a traceback.

The command-line tools (``python -m eventbus ...``, and those of programs built on the bus) call
:func:`explain` on what they caught: when it is a connection failure (refused, unknown host, timed
out) or a refused login, they print the line it returns, which names the URL they tried (password
masked) and the variable that sets it, and exit non-zero. Anything else is a bug and keeps its
traceback. Django-free, so any program's commands may use it.
"""

from __future__ import annotations

import re
from urllib.parse import parse_qsl, urlencode, urlsplit, urlunsplit

import redis
from redis.exceptions import RedisClusterException

from .tls import tls_reason

#: Exit status of a command that could not reach its Redis (sysexits' EX_UNAVAILABLE).
EXIT_UNAVAILABLE = 69

_SECRET_PARAMS = {"password", "pass", "pwd", "auth"}
_UNKNOWN_HOST = re.compile(r"not known|name resolution|nodename|getaddrinfo|No address", re.IGNORECASE)
_CONNECTING = re.compile(r"Error -?\d+ (?:connecting to|while reading from) \S+?\.? (.+?)\.?$")


def masked(url: str) -> str:
    """``url`` with its password (in the user info or a ``password=`` argument) written as ``***``."""
    try:
        parts = urlsplit(url)
        netloc = parts.netloc
        if "@" in netloc:
            userinfo, _, host = netloc.rpartition("@")
            user, sep, password = userinfo.partition(":")
            netloc = f"{user}:***@{host}" if sep and password else f"{userinfo}@{host}"
        query = urlencode(
            [
                (k, "***" if k.lower() in _SECRET_PARAMS else v)
                for k, v in parse_qsl(parts.query, keep_blank_values=True)
            ],
            safe="*",
        )
        return urlunsplit(parts._replace(netloc=netloc, query=query))
    except ValueError:
        return "<an unparsable URL>"


def redis_cause(exc: BaseException | None) -> BaseException | None:
    """The redis-py error behind ``exc`` (itself, or one it was raised from), if any."""
    seen = 0
    while exc is not None and seen < 10:
        if isinstance(exc, redis.RedisError | RedisClusterException):
            return exc
        exc = exc.__cause__ or exc.__context__
        seen += 1
    return None


def _reason(exc: BaseException) -> str:
    text = str(exc).strip().splitlines()[0] if str(exc).strip() else type(exc).__name__
    match = _CONNECTING.search(text)
    return match.group(1) if match else text.rstrip(".")


def explain(exc: BaseException, *, url: str, variable: str, fix: str | None = None) -> str | None:
    """The line to print when ``exc`` says the Redis at ``url`` (set by ``variable``) cannot be used, else None.

    ``variable`` is what sets the URL (``BUS_REDIS_URL``, ``--url``); ``fix`` is what to do about an
    absent server (default: "start Redis or set <variable>").
    """
    cause = redis_cause(exc)
    where = f"{masked(url)} ({variable})"
    if isinstance(cause, redis.AuthenticationError) or (
        isinstance(cause, redis.ResponseError) and str(cause).startswith(("NOAUTH", "WRONGPASS", "NOPERM"))
    ):
        return (
            f"cannot log in to Redis at {where}: {_reason(cause)} — check the user and password in {variable}"
        )
    tls = tls_reason(cause, url) if isinstance(cause, redis.ConnectionError | RedisClusterException) else None
    if tls:
        return f"TLS with Redis at {where} failed: {tls}"
    fix = fix or f"start Redis or set {variable}"
    if isinstance(cause, redis.TimeoutError):
        return f"Redis at {where} did not answer in time: {_reason(cause)} — {fix}"
    if isinstance(cause, redis.ConnectionError) or (
        isinstance(cause, RedisClusterException) and "cannot be connected" in str(cause)
    ):
        reason = _reason(cause)
        if _UNKNOWN_HOST.search(reason):
            return f"cannot reach Redis at {where}: {reason} — check the host name in {variable}"
        return f"cannot reach Redis at {where}: {reason} — {fix}"
    return None
