"""``python manage.py run_pipeline [--conn NAME ...] [--match GLOB] [--since ID|TIME] [--conf K=V ...] [--job]``.

Exports what is new to the lake, runs the Spark rollup jobs (in a child process; a local session
unless ``SPARK_MASTER`` names a cluster; ``--conf`` adds Spark options over ``BUSCONSOLE_SPARK_CONF``)
and loads the rollups into the tables ``/reports/`` shows; see :mod:`streams_app.lake.run`. With ``--job`` it queues the same work as a background job for the
Celery worker instead (progress on ``/jobs/<id>/``) and returns at once.
"""

from __future__ import annotations

from typing import Any

from django.core.management.base import CommandError, CommandParser

from pipeline import conf as spark_conf
from streams_app.lake import export
from streams_app.lake import run as pipeline_run
from streams_app.management.commands._cli import (
    REDIS_ENVIRONMENT,
    GuidedCommand,
    redis_guarded,
    require_broker,
    require_redis,
)
from streams_app.redis_ops.errors import OpsError


class Command(GuidedCommand):
    help = "Export stream history, compute the Spark rollups and load them for /reports/."
    examples = """\
  python manage.py run_pipeline
  python manage.py run_pipeline --conf spark.executor.memory=4g
  python manage.py run_pipeline --job        (queued for the Celery worker; needs REDIS_URL)
"""
    environment = REDIS_ENVIRONMENT + """\
  BUSCONSOLE_LAKE  where the lake is written (default var/lake)
  SPARK_MASTER     the Spark master (default local[*])
"""

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--conn", action="append", help="Connection name (repeatable; default: all).")
        parser.add_argument("--match", default="*", help="Only export streams whose key matches this glob.")
        parser.add_argument("--since", help="Skip entries before this entry ID or ISO-8601 time.")
        parser.add_argument("--conf", action="append", default=[], metavar="KEY=VALUE",
                            help="A Spark option, e.g. spark.executor.memory=4g (repeatable).")
        parser.add_argument("--job", action="store_true", help="Queue as a background job and return.")

    @redis_guarded
    def handle(self, *args: Any, **options: Any) -> None:
        try:
            conf = spark_conf.parse_items(options["conf"])
        except spark_conf.ConfError as exc:
            raise CommandError(str(exc)) from exc
        if options["job"]:
            if options["conn"] or options["since"] or options["match"] != "*":
                raise CommandError("--job runs everything: --conn, --match and --since apply to direct runs.")
            try:
                require_broker()
                job = pipeline_run.pipeline_job_start(user=None, spark_conf=conf)
            except OpsError as exc:
                raise CommandError(exc.message) from exc
            self.stdout.write(f"Queued pipeline job {job.pk}: follow it at /jobs/{job.pk}/ (needs a Celery worker).")
            return
        try:
            require_redis(options["conn"])
            if options["since"]:
                export.since_id(options["since"])
            run = pipeline_run.pipeline_run(
                conns=options["conn"],
                match=options["match"].encode(),
                since=options["since"],
                spark_conf=conf,
                on_phase=self._report,
            )
        except OpsError as exc:
            raise CommandError(exc.message) from exc
        except pipeline_run.SparkRunFailed as exc:
            raise CommandError(str(exc)) from exc
        except export.ExportBusy as exc:
            raise CommandError(str(exc)) from exc
        stats = run.stats
        self.stdout.write(
            f"Pipeline done in {stats['seconds']:.1f} s (Spark {_where(stats)}): "
            + ", ".join(f"{n} {name}" for name, n in stats["loaded"].items())
            + " rollup rows loaded."
        )
        for failure in stats["export"]["failed"]:
            self.stderr.write(f"export failed: {failure}")

    def _report(self, phase: str, info: dict[str, Any]) -> None:
        if phase == "exported":
            self.stdout.write(
                f"Exported {info['entries']} entries from {info['streams']} streams, {info['samples']} snapshot "
                f"rows ({info['files']} files) in {info['seconds']:.1f} s."
            )
        elif phase == "spark":
            rows = ", ".join(f"{n} {name}" for name, n in info["rows"].items())
            self.stdout.write(f"Spark job {info['job']}: {rows} rows in {info['seconds']:.1f} s.")


def _where(stats: dict[str, Any]) -> str:
    """Where the Spark jobs ran, and what starting their session cost."""
    where = {"resident": "in the resident driver", "child": "in a child process"}.get(stats.get("driver", ""), "in-process")
    return f"{where}, start-up {stats.get('spark_startup_s', 0):.1f} s"
