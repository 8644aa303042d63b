"""The Celery app: broker on the console's own Redis (REDIS_URL), tasks in streams_app.tasks.

Run any number of workers but exactly ONE ``celery -A busconsole beat``: the schedule lives in that
process (``CELERY_BEAT_SCHEDULE``), and a second beat would send every periodic task twice. The tasks
survive that mistake (each takes a lock shorter than its interval, :mod:`busconsole.locks`) but only
as a guard. With the Redis broker a message unacked after ``visibility_timeout`` is delivered again,
so every task is idempotent and every job resumable (:mod:`streams_app.jobs.runner`).

**Two queues, each with workers of its own.** The beat's tasks keep the bus observed (snapshots and the
alerts evaluated after them, the mirror sync, resuming stalled jobs, retention) and alert webhooks go
out: they travel on ``busconsole-beat``; background jobs (exports, replays, requeues, pipeline runs),
which a user may make run for minutes, on ``busconsole-jobs`` (``CELERY_TASK_ROUTES``, built from the
beat schedule; anything unrouted goes with the jobs). ``make run`` (``scripts/run.py``) and
docker-compose.yml start one worker per queue (``-Q``), so however many jobs run, a snapshot finds a
free worker. A plain ``celery -A busconsole worker`` without ``-Q`` takes both queues: fine for a
laptop, but then a job can hold its every slot.
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "busconsole.settings")

app = Celery("busconsole")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
