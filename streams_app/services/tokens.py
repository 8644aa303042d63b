"""Personal API tokens: each user issues and revokes their own (allowed in read-only mode too)."""

from __future__ import annotations

from typing import TYPE_CHECKING, cast

from django.http import Http404

from streams_app.accounts.models import ApiToken
from streams_app.accounts.tokens import token_create
from streams_app.services.audit import action_audit

if TYPE_CHECKING:
    from django.contrib.auth.base_user import AbstractBaseUser

    from streams_app.accounts.roles import UserLike


def token_issue(*, user: UserLike | None, name: str) -> tuple[ApiToken, str]:
    """A new personal API token for ``user``: the row and the raw token, shown to them once."""
    with action_audit(user=user, conn="", action="token.create", params={"name": name}) as record:
        owner = cast("AbstractBaseUser", user)  # action_audit refused anonymous users
        token, raw = token_create(user=owner, name=name)
        record.params.update(token_id=token.pk, prefix=token.prefix)
        record.affected = 1
    return token, raw


def token_revoke(*, user: UserLike | None, token_id: int) -> ApiToken:
    """Delete one of ``user``'s own tokens; another user's token is a 404 (and an audited error)."""
    with action_audit(user=user, conn="", action="token.revoke", params={"token_id": token_id}) as record:
        token = ApiToken.objects.filter(pk=token_id, user_id=getattr(user, "pk", None)).first()
        if token is None:
            raise Http404("You have no API token with that id.")
        record.params.update(name=token.name, prefix=token.prefix)
        token.delete()
        record.affected = 1
    return token
