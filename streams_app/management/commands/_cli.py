"""What the console's commands share: one line, not a traceback, when a Redis is not where they look,
and a plain-text ``--help`` with examples and the variables they read (:class:`GuidedCommand`).

``@redis_guarded`` wraps a command's ``handle``. A connection failure or a refused login becomes a
:class:`CommandError` (exit status 69) naming the URL that was tried, password masked, and the
variable that sets it: ``BUS_REDIS_URL`` (or ``BUS_REDIS_URLS``) for a monitored server, ``REDIS_URL``
for the console's own (locks, the Celery broker). The wording is the event bus's
(:mod:`eventbus.redis_errors`), so ``python -m eventbus`` and ``manage.py`` say it alike.
"""

from __future__ import annotations

import argparse
import os
import re
from collections.abc import Callable, Sequence
from functools import wraps
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core.management.base import BaseCommand, CommandError, CommandParser, DjangoHelpFormatter

from busconsole.celery import app as celery_app
from eventbus.connection import split_mode
from eventbus.redis_errors import EXIT_UNAVAILABLE, explain, redis_cause
from streams_app.redis_ops.client import connection
from streams_app.redis_ops.commands import server_ms
from streams_app.redis_ops.errors import OpsError

_ADDRESS = re.compile(r"connecting to \[?([^\]\s]+?)\]?:(\d+)")


def _address(url: str) -> tuple[str, int] | None:
    """The host and port a URL names; None for one naming several (Sentinel) or none it can read."""
    parts = urlsplit(split_mode(url)[0])
    try:
        return (parts.hostname or "localhost", parts.port or 6379)
    except ValueError:  # "h1:26379,h2:26379": a Sentinel URL has no one address to compare
        return None


def _bus_variable() -> str:
    return "BUS_REDIS_URLS" if os.environ.get("BUS_REDIS_URLS") else "BUS_REDIS_URL"


def _ops_error(exc: BaseException | None) -> OpsError | None:
    for _ in range(10):
        if exc is None or isinstance(exc, OpsError):
            return exc
        exc = exc.__cause__ or exc.__context__
    return None


def _where(exc: BaseException) -> tuple[str, str]:
    """The URL a failure happened on and the variable that sets it."""
    ops = _ops_error(exc)
    if ops is not None and ops.conn in settings.BUS_REDIS_URLS:
        return split_mode(settings.BUS_REDIS_URLS[ops.conn])[0], _bus_variable()
    # redis-py's own error (the console's Redis: a lock, the broker): told apart by the address it names.
    found = _ADDRESS.search(str(redis_cause(exc) or exc))
    if found:
        address = (found[1], int(found[2]))
        if address != _address(settings.REDIS_URL):
            for url in settings.BUS_REDIS_URLS.values():
                if _address(url) == address:
                    return split_mode(url)[0], _bus_variable()
    return settings.REDIS_URL, "REDIS_URL"


def unavailable(exc: BaseException) -> CommandError | None:
    """The CommandError to raise for ``exc`` when it says a Redis could not be used, else None."""
    if redis_cause(exc) is None:
        return None
    url, variable = _where(exc)
    line = explain(exc, url=url, variable=variable)
    return CommandError(line, returncode=EXIT_UNAVAILABLE) if line else None


def redis_guarded(handle: Callable[..., Any]) -> Callable[..., Any]:
    """``handle`` with an unreachable Redis reported as one line (see the module docstring)."""

    @wraps(handle)
    def guarded(*args: Any, **options: Any) -> Any:
        try:
            return handle(*args, **options)
        except Exception as exc:  # a CommandError made from an OpsError too: its cause says what failed
            error = unavailable(exc)
            if error is None:
                raise
            raise error from None

    return guarded


class _HelpFormatter(DjangoHelpFormatter, argparse.RawDescriptionHelpFormatter):
    """Django's order of options, with the epilog's lines kept as written."""


class GuidedCommand(BaseCommand):
    """A command whose ``--help`` ends with examples and the variables it reads (plain text)."""

    examples: str = ""
    environment: str = ""

    def create_parser(self, prog_name: str, subcommand: str, **kwargs: Any) -> CommandParser:
        parts = []
        if self.examples:
            parts.append("examples:\n" + self.examples.rstrip())
        if self.environment:
            parts.append("environment:\n" + self.environment.rstrip())
        kwargs.setdefault("epilog", "\n\n".join(parts) or None)
        kwargs.setdefault("formatter_class", _HelpFormatter)
        return super().create_parser(prog_name, subcommand, **kwargs)


#: The environment lines the Redis-reading commands share.
REDIS_ENVIRONMENT = """\
  BUS_REDIS_URL    the monitored Redis (default redis://127.0.0.1:6390/0, the server make run starts)
  BUS_REDIS_URLS   several monitored servers instead: name=url,name=url
  REDIS_URL        the console's own Redis: locks, Celery broker (default redis://127.0.0.1:6390/1)
"""


def require_redis(conns: Sequence[str] | None = None) -> None:
    """Fail now, with :func:`redis_guarded`'s one line, when a monitored server of ``conns`` (default:
    all) does not answer, rather than after a run that skipped it (an export reports such a server
    as "failed" and goes on; a pipeline run would then spend a minute on Spark over nothing).

    The read is the server clock (TIME on the first primary): the cheapest call that raises.
    """
    for name in conns or list(settings.BUS_REDIS_URLS):
        connection(name)  # an unknown name is a NotFound, reported as it is
        server_ms(name)


def require_broker() -> None:
    """Fail now when the Celery broker (the console's Redis, ``REDIS_URL``) does not answer: a queued
    job would otherwise wait for ever while the command says it was queued."""
    with celery_app.connection_for_write() as broker:
        broker.ensure_connection(max_retries=1)
