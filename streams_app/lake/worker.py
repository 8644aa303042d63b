"""The entry points of the exporter's worker processes (see :func:`streams_app.lake.export.export_run`).

A spawned worker starts a fresh interpreter, so this module imports nothing of Django's models at
import time: :func:`setup` configures Django first (from the same environment as the parent, plus the
parent's own view of the settings that decide where data goes: its database, its Redis connections,
its DLQ conventions), then :func:`export_stream` imports the exporter.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from streams_app.lake.export import ExportStats


def parent_settings() -> dict[str, Any]:
    """What a worker must see as its parent does, even when the parent changed it at run time."""
    from django.conf import settings

    return {
        "database": settings.DATABASES["default"]["NAME"],
        "BUS_REDIS_URLS": settings.BUS_REDIS_URLS,
        "BUSCONSOLE_DLQ_PATTERNS": settings.BUSCONSOLE_DLQ_PATTERNS,
        "BUSCONSOLE_REDIS_TIMEOUT": settings.BUSCONSOLE_REDIS_TIMEOUT,
    }


def setup(parent: dict[str, Any]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "busconsole.settings")
    import django
    from django.conf import settings

    django.setup()
    settings.DATABASES["default"]["NAME"] = parent.pop("database")  # before the first connection
    for name, value in parent.items():
        setattr(settings, name, value)


def export_stream(
    uri: str, conn: str, key: bytes, newest: str | None, length: int, since: str | None, chunk_rows: int
) -> ExportStats:
    from streams_app.lake import export

    part = export.export_one(uri, export.StreamTask(conn, key, newest, length), since=since, chunk_rows=chunk_rows)
    return part.stats
