"""App configuration for the console: where its packages are wired together at start-up."""

from __future__ import annotations

from django.apps import AppConfig
from django.core import checks

from streams_app.redis_ops.conventions import check_dlq_patterns


class StreamsAppConfig(AppConfig):
    name = "streams_app"
    verbose_name = "Console"
    default_auto_field = "django.db.models.BigAutoField"

    def ready(self) -> None:
        """Connect what no package may import for itself, in every process (web, worker, manage.py).

        The imports are here rather than at the top because Django imports this module before any
        model exists, and each of these modules defines or uses models: ``ready`` is Django's place
        for them. Nothing imports this module, so they can close no circle.
        """
        # Code that enqueues a task names it; importing the tasks registers them, so the name resolves
        # to the task itself (its options, eager mode, routes) in the web process too, not only in workers.
        from celery.exceptions import SoftTimeLimitExceeded

        from eventbus import interrupts
        from streams_app import signals, tasks  # noqa: F401
        from streams_app.alerts import evaluation, family_members
        from streams_app.exports import files as export_files
        from streams_app.jobs import kinds, runner
        from streams_app.lake import run
        from streams_app.live import wire
        from streams_app.perf import compiled
        from streams_app.search import replay as search_replay
        from streams_app.search import requeue as search_requeue
        from streams_app.triage import requeue as triage_requeue

        # A job stops where Celery's soft time limit strikes it, even inside a search's evaluation or a
        # value's decoding, and goes on in a new task (jobs.runner): the bus library's catch-alls must not
        # take it for one entry's "no match" or one value's hex.
        interrupts.let_through(SoftTimeLimitExceeded)
        # A malformed BUSCONSOLE_DLQ_PATTERNS stops `check` and start-up with a named error.
        checks.register(check_dlq_patterns)
        # The ORM replay leans on Django's private compiler: a changed one is logged now, and the
        # queries it would replay run through the plain ORM.
        compiled.internals_check()
        # So do the tail's shared frames on uvicorn's private websocket protocol (when uvicorn serves
        # with it): a changed one is logged now, and tails send through the consumer.
        wire.internals_check()
        # Alert rules evaluate after every snapshot.
        evaluation.connect()
        # A family-mode snapshot keeps per-stream rows of the streams alerts name.
        family_members.connect()
        # Logouts, deactivations and role changes reach the open websockets of the users concerned.
        signals.revocation_connect()
        # The runner knows kinds by name; their bodies live with their features (see jobs.runner).
        runner.kinds_register({
            runner.KIND_REQUEUE_ALL: kinds.requeue_all_run,
            runner.KIND_REQUEUE_MATCHING: search_requeue.requeue_matching_run,
            runner.KIND_REQUEUE_FILTERED: triage_requeue.requeue_filtered_run,
            runner.KIND_REPLAY: kinds.replay_body(matching=search_replay.replay_matching_run),
            runner.KIND_PIPELINE: run.pipeline_job_run,
            runner.KIND_EXPORT: export_files.export_job_run,
        })
