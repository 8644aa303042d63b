"""The Celery app: broker on the console's own Redis (REDIS_URL), tasks in streams_app.tasks.

Run any number of workers but exactly ONE ``celery -A busconsole beat``: the schedule lives in that
process (``CELERY_BEAT_SCHEDULE``), and a second beat would send every periodic task twice. The tasks
survive that mistake (each takes a lock shorter than its interval, :mod:`busconsole.locks`) but only
as a guard. With the Redis broker a message unacked after ``visibility_timeout`` is delivered again,
so every task is idempotent and every job resumable (:mod:`streams_app.jobs.runner`).
"""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "busconsole.settings")

app = Celery("busconsole")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
