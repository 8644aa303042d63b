"""WSGI entry point (HTTP only; websockets need the ASGI application)."""

import os

from django.core.wsgi import get_wsgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "busconsole.settings")
application = get_wsgi_application()

from streams_app.perf.heap import freeze_startup  # noqa: E402 - after Django is set up

freeze_startup()  # the loaded project, out of the collector's full passes (streams_app/perf/heap.py)
