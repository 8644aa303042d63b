"""Who a session belongs to now, for connections that outlive the request that opened them.

A websocket is authenticated once, at its handshake; after that the session can be logged out, its user
deactivated, deleted or moved to another role. The sockets re-ask :func:`session_user` when told something
changed (the revoke event, :data:`REVOKE_EVENT`) and now and then, and close when the answer changed.
"""

from __future__ import annotations

import hashlib
from importlib import import_module
from types import SimpleNamespace
from typing import TYPE_CHECKING

from django.conf import settings
from django.contrib.auth import get_user
from django.contrib.auth.models import AnonymousUser

if TYPE_CHECKING:
    from streams_app.accounts.roles import UserLike

#: The channel-layer event type telling a user's sockets to re-check their session and role; the
#: consumers' handler is ``user_revoke``. ``session`` is :func:`session_digest` of a session that logged
#: out (its sockets close without asking), or "" for "something about this user changed".
REVOKE_EVENT = "user.revoke"


def session_digest(session_key: str) -> str:
    """A stand-in for a session key in channel-layer events: the key itself is a credential."""
    return hashlib.sha256(session_key.encode()).hexdigest()[:32]


def session_user(session_key: str | None) -> UserLike:
    """The user ``session_key`` logs in now, read afresh from the session store and the database.

    Django's own request path decides (:func:`django.contrib.auth.get_user`): a session that was logged
    out, flushed or expired, a user deleted or deactivated, or a password changed since the login, all
    give AnonymousUser.
    """
    if not session_key:
        return AnonymousUser()
    store = import_module(settings.SESSION_ENGINE).SessionStore(session_key=session_key)
    return get_user(SimpleNamespace(session=store))  # type: ignore[arg-type]  # get_user reads only request.session
