"""Personal API tokens: each user issues and revokes their own (allowed in read-only mode too)."""

from __future__ import annotations

from datetime import datetime
from typing import TYPE_CHECKING, cast

from django.http import Http404

from streams_app.accounts.models import ApiToken
from streams_app.accounts.tokens import token_create
from streams_app.services.audit import action_audit

if TYPE_CHECKING:
    from django.contrib.auth.models import User

    from streams_app.accounts.roles import UserLike


def token_issue(
    *, user: UserLike | None, name: str, expires_at: datetime | None = None, role_ceiling: str = ""
) -> tuple[ApiToken, str]:
    """A new personal API token for ``user``: the row and the raw token, shown to them once.

    ``expires_at`` (None: never) and ``role_ceiling`` ("" for the owner's role) are recorded in the
    audit row, so who made a long-lived admin-strength token can be found later.
    """
    params = {"name": name, "role": role_ceiling, "expires_at": expires_at.isoformat() if expires_at else None}
    with action_audit(user=user, conn="", action="token.create", params=params) as record:
        owner = cast("User", user)  # action_audit refused anonymous users
        token, raw = token_create(user=owner, name=name, expires_at=expires_at, role_ceiling=role_ceiling)
        record.params.update(token_id=token.pk, prefix=token.prefix)
        record.affected = 1
    return token, raw


def token_revoke(*, user: UserLike | None, token_id: int) -> ApiToken:
    """Delete one of ``user``'s own tokens; another user's token is a 404 (and an audited error)."""
    with action_audit(user=user, conn="", action="token.revoke", params={"token_id": token_id}) as record:
        owner = cast("User", user)  # action_audit refused anonymous users
        token = ApiToken.objects.filter(pk=token_id, user_id=owner.pk).first()
        if token is None:
            raise Http404("You have no API token with that id.")
        record.params.update(name=token.name, prefix=token.prefix)
        token.delete()
        record.affected = 1
    return token
