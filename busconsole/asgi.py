"""ASGI entry point: Django for HTTP, Channels for websockets."""

from __future__ import annotations

import os

from django.core.asgi import get_asgi_application

os.environ.setdefault("DJANGO_SETTINGS_MODULE", "busconsole.settings")
django_asgi_app = get_asgi_application()

# Imported after Django is set up: routing pulls in models through the consumers.
from channels.auth import AuthMiddlewareStack  # noqa: E402
from channels.routing import ProtocolTypeRouter, URLRouter  # noqa: E402
from channels.security.websocket import AllowedHostsOriginValidator  # noqa: E402

from streams_app.heap import freeze_startup  # noqa: E402
from streams_app.live.wire import ServerSendMiddleware  # noqa: E402
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

freeze_startup()  # the loaded project, out of the collector's full passes (streams_app/heap.py)
