"""Websocket routes.

The key pattern is permissive on purpose: servers decode ``%2F`` to ``/`` in ``scope["path"]``, so a
key holding a slash spans several decoded segments; the consumer reads the exact key from
``scope["raw_path"]`` (see :func:`streams_app.views.tail_socket.tail_key`).
"""

from __future__ import annotations

from django.urls import re_path

from streams_app.views.metrics_socket import MetricsConsumer
from streams_app.views.tail_socket import TailConsumer

websocket_urlpatterns: list = [
    re_path(r"^ws/c/(?P<conn>[A-Za-z0-9_.-]+)/streams/(?P<key>.+)/tail/$", TailConsumer.as_asgi()),  # type: ignore[arg-type]  # channels routes ASGI apps with Django's re_path
    re_path(r"^ws/metrics/$", MetricsConsumer.as_asgi()),  # type: ignore[arg-type]  # channels routes ASGI apps with Django's re_path  # snapshot, change and job events for open pages
]
