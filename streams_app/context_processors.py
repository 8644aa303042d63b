"""Template context every console page needs (the navigation, the user's role, read-only mode)."""

from __future__ import annotations

from django.conf import settings
from django.http import HttpRequest

from streams_app.accounts.roles import role_of
from streams_app.redis_ops import client


def console(request: HttpRequest) -> dict[str, object]:
    user = getattr(request, "user", None)
    role = role_of(user).name.lower() if user is not None and user.is_authenticated else ""
    return {
        "console_connections": client.connections(),
        "console_role": role,
        "console_read_only": settings.BUSCONSOLE_READ_ONLY,
    }
