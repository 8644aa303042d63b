"""App configuration for the console."""

from __future__ import annotations

from django.apps import AppConfig
from django.core import checks


class StreamsAppConfig(AppConfig):
    name = "streams_app"
    verbose_name = "Console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        from streams_app.redis_ops.conventions import check_dlq_patterns

        # A malformed BUSCONSOLE_DLQ_PATTERNS stops `check` and start-up with a named error.
        checks.register(check_dlq_patterns)

        from streams_app.alerts import (
            evaluation as alerts,  # issue 6: alert rules evaluate after every snapshot
        )

        alerts.connect()
