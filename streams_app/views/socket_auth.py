"""Websockets that end with the session and role they were opened with.

A socket is authenticated once, at its handshake, and may then stay open for days. Each console socket
therefore joins its user's channel-layer group (:func:`streams_app.live.groups.user_group`); a logout,
deactivation, deletion or role change sends that group a revoke event (:mod:`streams_app.signals`), and
the socket re-reads its session and its user's role and closes when they changed:

- 4401: the session logged out, expired or was flushed, or the user was deactivated or deleted (the pages
  show "signed out" and stop);
- 4403: the user's role changed (group membership, superuser flag); the pages reconnect, and the new
  socket holds the new role.

The socket also re-checks every :data:`RECHECK_S` seconds, a backstop for events lost while the channel
layer was down, for channels-redis dropping long-lived group memberships (``group_expiry``) and for a
session that simply expires.
"""

from __future__ import annotations

import asyncio
import logging
from typing import Any

from channels.db import database_sync_to_async
from channels.generic.websocket import AsyncJsonWebsocketConsumer

from streams_app.accounts.roles import Role, role_of
from streams_app.accounts.sessions import session_digest, session_user
from streams_app.live.groups import user_group

log = logging.getLogger(__name__)

SIGNED_OUT = 4401
ROLE_CHANGED = 4403
RECHECK_S = 60.0

_ENDINGS = {
    SIGNED_OUT: ("signed_out", "Your session ended: log in again."),
    ROLE_CHANGED: ("role_changed", "Your role changed: reconnecting with the new one."),
}


@database_sync_to_async
def _role_of(user: Any) -> Role:
    return role_of(user)


@database_sync_to_async
def _session_role(session_key: str | None) -> Role:
    return role_of(session_user(session_key))


class SessionBoundConsumer(AsyncJsonWebsocketConsumer):
    """A JSON websocket consumer that closes when its session or its user's role no longer holds.

    Subclasses call :meth:`auth_admit` first thing in ``connect`` (after ``accept``), :meth:`auth_release`
    in ``disconnect``, and override :meth:`auth_ended` to stop their own work before the close.
    """

    opened_role: Role = Role.NONE
    session_key: str | None = None
    revoke_group: str | None = None
    recheck_task: asyncio.Task[None] | None = None
    ended: bool = False

    async def auth_admit(self) -> bool:
        """Let in a user who may read, remember the session and role, and listen for revocation.

        False, with the socket closed (4401), for anyone else.
        """
        user = self.scope.get("user")
        role = await _role_of(user)
        if user is None or role < Role.VIEWER:
            await self.close(code=SIGNED_OUT)
            return False
        self.opened_role = role
        session = self.scope.get("session")
        self.session_key = getattr(session, "session_key", None)
        group = user_group(user.pk)
        try:
            await self.channel_layer.group_add(group, self.channel_name)
            self.revoke_group = group
        except Exception as exc:  # noqa: BLE001 - the periodic re-check still ends the socket
            log.warning("socket: channel layer unavailable, revocation falls back to re-checks: %s", exc)
        self.recheck_task = asyncio.get_running_loop().create_task(self._recheck_every())
        return True

    async def auth_release(self) -> None:
        if self.recheck_task is not None and self.recheck_task is not asyncio.current_task():
            self.recheck_task.cancel()
        if self.revoke_group is not None:
            try:
                await self.channel_layer.group_discard(self.revoke_group, self.channel_name)
            except Exception as exc:  # noqa: BLE001 - the group entry expires on its own
                log.debug("socket: group_discard failed: %s", exc)
            self.revoke_group = None

    async def user_revoke(self, event: dict[str, Any]) -> None:
        """The revoke event: this session logged out (close), or something about the user changed (re-check)."""
        if self.session_key and event.get("session") == session_digest(self.session_key):
            await self._end(SIGNED_OUT)
            return
        await self._recheck()

    async def _recheck(self) -> None:
        role = await _session_role(self.session_key)
        if role < Role.VIEWER:
            await self._end(SIGNED_OUT)
        elif role != self.opened_role:
            await self._end(ROLE_CHANGED)

    async def _recheck_every(self) -> None:
        while not self.ended:
            await asyncio.sleep(RECHECK_S)
            try:
                await self._recheck()
            except Exception:  # a database hiccup must not end the backstop for good
                log.exception("socket: periodic session re-check failed")

    async def _end(self, code: int) -> None:
        if self.ended:
            return
        self.ended = True
        await self.auth_ended()
        reason, message = _ENDINGS[code]
        try:
            await self.send_json({"type": "status", "state": "error", "code": reason, "message": message})
        except Exception as exc:  # noqa: BLE001 - the client may be gone already; close regardless
            log.debug("socket: could not say why it closes: %s", exc)
        await self.close(code=code)

    async def auth_ended(self) -> None:
        """Stop sending before the socket closes (a subclass's own streams); nothing by default."""
