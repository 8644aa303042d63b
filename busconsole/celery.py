"""The Celery app: broker on the console's own Redis (REDIS_URL), tasks in streams_app.tasks."""

from __future__ import annotations

import os

from celery import Celery

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "busconsole.settings")

app = Celery("busconsole")
app.config_from_object("django.conf:settings", namespace="CELERY")
app.autodiscover_tasks()
