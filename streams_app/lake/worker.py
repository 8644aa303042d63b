"""How the exporter's worker processes start (see :func:`streams_app.lake.export.export_run`).

A spawned worker starts a fresh interpreter, and this module is the first of the console's it imports
there: :func:`setup` is the pool's initializer. So it imports nothing of Django's models: ``setup``
configures Django first (from the same environment as the parent, plus the parent's own view of the
settings that decide where data goes: its database, its Redis connections, its DLQ conventions). The
task itself, :func:`streams_app.lake.export.export_stream`, is unpickled after that, which is when the
exporter and its models are imported.
"""

from __future__ import annotations

import os
from typing import Any

import django
from django.conf import settings


def parent_settings() -> dict[str, Any]:
    """What a worker must see as its parent does, even when the parent changed it at run time."""
    return {
        "database": settings.DATABASES["default"]["NAME"],
        "BUS_REDIS_URLS": settings.BUS_REDIS_URLS,
        "BUSCONSOLE_DLQ_PATTERNS": settings.BUSCONSOLE_DLQ_PATTERNS,
        "BUSCONSOLE_REDIS_TIMEOUT": settings.BUSCONSOLE_REDIS_TIMEOUT,
        # what the exporter masks by (its hashes are keyed by SECRET_KEY, as the console's are)
        "BUSCONSOLE_MASK_RULES": settings.BUSCONSOLE_MASK_RULES,
        "SECRET_KEY": settings.SECRET_KEY,
    }


def setup(parent: dict[str, Any]) -> None:
    os.environ.setdefault("DJANGO_SETTINGS_MODULE", "busconsole.settings")
    django.setup()
    settings.DATABASES["default"]["NAME"] = parent.pop("database")  # before the first connection
    for name, value in parent.items():
        setattr(settings, name, value)
    from streams_app.masking.apply import rules_load  # after django.setup(): it imports models

    rules_load()  # the masking rules this worker's streams are exported under (the admin's rows too)
