"""A response that shows masked payload values unmasked (``?unmasked=1``), on the gate.

``payload.reveal`` is in :data:`~streams_app.services.audit.ACTION_ROLES` with a viewer's floor (it
is a read, so read-only mode allows it too), and ``BUSCONSOLE_UNMASKED_ROLES`` names the roles that may,
checked on top of the table as the export setting is. A refusal is its ``denied`` row (a 403); a
response that showed values a rule would have hidden writes one ``ok`` row naming the stream and the
entry IDs (:meth:`~streams_app.masking.apply.Masker.reveal_record`), and one that showed none writes
nothing. The masking itself stays in :mod:`streams_app.masking.apply`, below this layer: it is handed
the gate's audit and cannot reveal without it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.core.exceptions import PermissionDenied

from streams_app.masking.apply import REVEAL_ACTION, REVEAL_REFUSED, Masker, masker_for, may_reveal
from streams_app.services.audit import action_attempt, action_check

if TYPE_CHECKING:
    from collections.abc import Callable

    from streams_app.accounts.roles import UserLike


def payload_masker(*, user: UserLike | None, conn: str, key: bytes, reveal: bool) -> Masker:
    """The masker of one response about stream ``key``: masking for everyone; with ``reveal`` (the user
    asked) unmasked for a role of ``BUSCONSOLE_UNMASKED_ROLES``, anyone else refused (403, audited)."""
    if not reveal:
        return masker_for(user, conn, key)
    require = _unmasked_role(user)
    action_check(user=user, conn=conn, action=REVEAL_ACTION, stream=key, require=require)

    def audit(ids: list[str]) -> None:
        attempt = action_attempt(user=user, conn=conn, action=REVEAL_ACTION, stream=key, ids=ids, require=require)
        attempt.record.affected = len(ids)
        attempt.ok()

    return masker_for(user, conn, key, reveal=audit)


def _unmasked_role(user: UserLike | None) -> Callable[[], None]:
    def require() -> None:
        if not may_reveal(user):
            raise PermissionDenied(REVEAL_REFUSED)

    return require
