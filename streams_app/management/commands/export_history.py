"""``python manage.py export_history [--conn NAME ...] [--match GLOB] [--since ID|TIME]``.

Exports what is new in every stream (and the metric snapshot tables) to the Parquet lake under
``BUSCONSOLE_LAKE``; see :mod:`streams_app.lake.export`. Safe to run at any time and to interrupt: the next
run continues from the checkpoints, and no entry is written twice.
"""

from __future__ import annotations

from typing import Any

from django.conf import settings
from django.core.management.base import CommandError, CommandParser

from streams_app.lake import export
from streams_app.management.commands._cli import (
    REDIS_ENVIRONMENT,
    GuidedCommand,
    redis_guarded,
    require_redis,
)
from streams_app.redis_ops.errors import OpsError


class Command(GuidedCommand):
    help = "Export new stream entries, eventbus metrics, DLQ entries and snapshots to the Parquet lake."
    examples = """\
  python manage.py export_history
  python manage.py export_history --conn default --match 'orders*' --since 2026-11-01T00:00:00Z
"""
    environment = REDIS_ENVIRONMENT + "  BUSCONSOLE_LAKE  where the lake is written (default var/lake)\n"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--conn", action="append", help="Connection name (repeatable; default: all).")
        parser.add_argument("--match", default="*", help="Only streams whose key matches this Redis glob.")
        parser.add_argument(
            "--since", help="Skip entries before this entry ID or ISO-8601 time (streams with no checkpoint)."
        )
        parser.add_argument("--no-tables", action="store_true", help="Leave the snapshot tables out.")

    @redis_guarded
    def handle(self, *args: Any, **options: Any) -> None:
        conns = options["conn"]
        try:
            require_redis(conns)
            if options["since"]:
                export.since_id(options["since"])
            with export.pipeline_lock():
                stats = export.export_run(
                    conns=conns,
                    match=options["match"].encode(),
                    since=options["since"],
                    tables=not options["no_tables"],
                )
        except OpsError as exc:
            raise CommandError(exc.message) from exc
        except export.ExportBusy as exc:
            raise CommandError(str(exc)) from exc
        self.stdout.write(
            f"Exported {stats.entries} entries from {stats.streams} streams ({stats.metrics} metric entries, "
            f"{stats.dead_letters} dead letters, {stats.samples} snapshot rows) in {stats.files} files "
            f"to {settings.BUSCONSOLE_LAKE} in {stats.seconds:.1f} s."
        )
        for failure in stats.failed:
            self.stderr.write(f"failed: {failure}")
