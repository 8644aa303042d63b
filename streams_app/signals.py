"""Django's signals about users, wired to the open websockets (a signal a package sends lives with it:
``snapshot_taken`` in :mod:`streams_app.metrics.signals`).

:func:`revocation_connect` makes changes to who may read reach open websockets: a logout, a user saved
(deactivated, superuser flag, password), deleted, or moved between groups sends the user's sockets a
small revoke event (:data:`streams_app.accounts.sessions.REVOKE_EVENT`) and they re-check their session
and role (:mod:`streams_app.views.socket_auth`). Database changes are announced after their transaction
commits, so the sockets read the new state, not the old.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import Any

from django.contrib.auth import get_user_model, user_logged_out
from django.contrib.auth.models import Group
from django.db import transaction
from django.db.models.signals import m2m_changed, post_delete, post_save, pre_delete

from streams_app.accounts.sessions import REVOKE_EVENT, session_digest
from streams_app.live import broadcast
from streams_app.live.groups import user_group

# ------------------------------------------------------------------- sockets of changed users


def sockets_revoke(user_ids: Iterable[Any], *, session_key: str | None = None) -> None:
    """Tell the open sockets of ``user_ids`` to re-check; those of ``session_key`` close outright.

    Never raises: a logout or an admin's save must not fail because the channel layer is down (the
    sockets re-check on their own every minute as a backstop).
    """
    event = {"type": REVOKE_EVENT, "session": session_digest(session_key) if session_key else ""}
    for user_id in {uid for uid in user_ids if uid is not None}:
        broadcast.group_send(user_group(user_id), event)


def _after_commit(user_ids: Iterable[Any]) -> None:
    ids = list(user_ids)
    if ids:
        transaction.on_commit(lambda: sockets_revoke(ids))


def _on_logout(sender: Any, request: Any = None, user: Any = None, **kwargs: Any) -> None:
    # Sent before the session is flushed: the event names the session, so its sockets close without
    # racing the flush, and the user's other sessions re-check and stay.
    session = getattr(request, "session", None)
    if user is not None and session is not None and session.session_key:
        sockets_revoke([user.pk], session_key=session.session_key)


def _on_user_saved(sender: Any, instance: Any, created: bool = False, update_fields: Any = None,
                   **kwargs: Any) -> None:
    # Every login saves last_login: nothing about access changed.
    if created or (update_fields is not None and set(update_fields) <= {"last_login"}):
        return
    _after_commit([instance.pk])


def _on_user_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    _after_commit([instance.pk])


def _on_groups_changed(sender: Any, instance: Any, action: str, reverse: bool, pk_set: Any = None,
                       **kwargs: Any) -> None:
    """Group membership changed, from either side (``user.groups`` or ``group.user_set``)."""
    if not reverse:
        if action in ("post_add", "post_remove", "post_clear"):
            _after_commit([instance.pk])
    elif action in ("post_add", "post_remove"):
        _after_commit(pk_set or ())
    elif action == "pre_clear":  # post_clear no longer knows who the members were
        _after_commit(instance.user_set.values_list("pk", flat=True))


def _on_group_deleted(sender: Any, instance: Any, **kwargs: Any) -> None:
    # Deleting a group removes its memberships without m2m_changed.
    _after_commit(instance.user_set.values_list("pk", flat=True))


def revocation_connect() -> None:
    """Connect the receivers above (once per process, from ``StreamsAppConfig.ready``)."""
    user_model = get_user_model()
    user_logged_out.connect(_on_logout, dispatch_uid="console-sockets-logout")
    post_save.connect(_on_user_saved, sender=user_model, dispatch_uid="console-sockets-user-saved")
    post_delete.connect(_on_user_deleted, sender=user_model, dispatch_uid="console-sockets-user-deleted")
    m2m_changed.connect(_on_groups_changed, sender=user_model.groups.through, dispatch_uid="console-sockets-groups")
    pre_delete.connect(_on_group_deleted, sender=Group, dispatch_uid="console-sockets-group-deleted")
