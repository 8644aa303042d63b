"""The entry points of the exporter's worker processes (see :func:`streams_app.export.export_run`).

A spawned worker starts a fresh interpreter, so this module imports nothing of Django's models at
import time: :func:`setup` configures Django first (from the same environment as the parent), then
:func:`export_stream` imports the exporter.
"""

from __future__ import annotations

import os
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from streams_app.export import ExportStats


def setup() -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "busconsole.settings")
    import django

    django.setup()


def export_stream(
    uri: str, conn: str, key: bytes, newest: str | None, length: int, since: str | None, chunk_rows: int
) -> ExportStats:
    from streams_app import export

    part = export.export_one(uri, export.StreamTask(conn, key, newest, length), since=since, chunk_rows=chunk_rows)
    return part.stats
