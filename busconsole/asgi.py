"""ASGI entry point: Django for HTTP, Channels for websockets."""

from __future__ import annotations

import os
import sys

from django.core.asgi import get_asgi_application

# One GIL serves the event loop and every sync view's thread. With CPython's default 5 ms switch
# interval, a CPU-bound request (a search evaluating entries) makes each other request wait up to 5 ms
# at every hand-off of the GIL, and a request needs a dozen or more: /healthz took over twice as
# long during a costly search as with 1 ms (bench/cost.py; the figures are in
# docs/performance.md#figures-behind-the-design). One evaluation is bounded apart (eventbus/search/cost.py).
sys.setswitchinterval(0.001)

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "busconsole.settings")
django_asgi_app = get_asgi_application()

# Imported after Django is set up: routing pulls in models through the consumers.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from streams_app.live.wire import ServerSendMiddleware  # noqa: E402
from streams_app.perf.heap import freeze_startup  # noqa: E402
from streams_app.routing import websocket_urlpatterns  # noqa: E402

application = ProtocolTypeRouter(
    {
        "http": django_asgi_app,
        # ServerSendMiddleware: the live tail writes its shared frames to the socket (streams_app/live/wire.py).
        "websocket": ServerSendMiddleware(
            AllowedHostsOriginValidator(AuthMiddlewareStack(URLRouter(websocket_urlpatterns)))
        ),
    }
)

freeze_startup()  # the loaded project, out of the collector's full passes (streams_app/perf/heap.py)
