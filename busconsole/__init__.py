"""busconsole: the Django project of the Redis Streams operator console."""

from .celery import app as celery_app

__all__ = ("celery_app",)
