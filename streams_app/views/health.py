"""Readiness: ``GET /readyz`` says whether this process can serve the console right now.

``/healthz`` (views/overview.py) is liveness: the process answers. ``/readyz`` is readiness, for a load
balancer or an orchestrator deciding whether to send traffic here: 200 when

- the database answers (``SELECT 1``),
- the console's own Redis answers (REDIS_URL: Celery's broker, the channel layer, the cache, the login
  throttle and the locks all live there; without it no action, job or live page works),
- every migration on disk is applied (new code on an old schema answers 500s),

else 503. The body is JSON naming each check's state. It names no URL, host, port or user: it is served
without login, so a failure's detail goes to the log only. The monitored Redis servers (BUS_REDIS_URLS)
are not consulted: one of them down is what the console exists to show, and taking every web process
out of the load balancer then would hide the one page that says which server is down.
"""

from __future__ import annotations

import logging
from functools import cache

from django.db import DatabaseError, connection
from django.db.migrations.loader import MigrationLoader
from django.db.migrations.recorder import MigrationRecorder
from django.http import HttpRequest, JsonResponse
from django.views.decorators.http import require_safe

from busconsole.cache import CacheUnavailable
from busconsole.locks import console_redis

log = logging.getLogger(__name__)
OK = "ok"


@require_safe
def readyz(request: HttpRequest) -> JsonResponse:
    checks = {"database": _database(), "redis": _redis()}
    checks["migrations"] = _migrations() if checks["database"] == OK else "unknown (no database)"
    ready = all(state == OK for state in checks.values())
    response = JsonResponse({"ready": ready, "checks": checks}, status=200 if ready else 503)
    response["Cache-Control"] = "no-store"
    return response


def _database() -> str:
    try:
        with connection.cursor() as cursor:
            cursor.execute("SELECT 1")
    except DatabaseError as exc:
        log.warning("readyz: the database does not answer: %s", exc)
        return f"unreachable ({type(exc).__name__})"
    return OK


def _redis() -> str:
    try:
        console_redis().ping()
    except CacheUnavailable as exc:
        log.warning("readyz: the console's Redis (REDIS_URL) does not answer: %s", exc)
        return f"unreachable ({type(exc).__name__})"
    return OK


@cache
def _on_disk() -> frozenset[tuple[str, str]]:
    """The migrations this code needs, read once: the files do not change under a running process.

    The loader's graph, not the files, so squashed migrations count as Django counts them.
    """
    return frozenset(MigrationLoader(None, ignore_no_migrations=True).graph.nodes)


def _migrations() -> str:
    try:
        applied = set(MigrationRecorder(connection).applied_migrations())
    except DatabaseError as exc:
        log.warning("readyz: cannot read the applied migrations: %s", exc)
        return f"unreadable ({type(exc).__name__})"
    missing = sorted(_on_disk() - applied)
    if missing:
        log.warning("readyz: unapplied migrations: %s", ", ".join(".".join(m) for m in missing))
        return f"{len(missing)} unapplied"
    return OK
