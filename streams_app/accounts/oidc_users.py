"""The console account of someone an OpenID provider signed in, with the role its groups give, set again
at every login.

The provider is the only source of such an account's role: its role group (``viewer``, ``operator`` or
``admin``) is replaced by the one ``BUSCONSOLE_OIDC_ROLES`` gives the groups of this login, and a
superuser flag set by hand is taken away (:mod:`.role_groups`, which the LDAP login shares). Someone whose
groups map to no role is refused and their account deactivated: their other sessions and sockets end
too, until a login whose groups give a role again.
"""

from __future__ import annotations

import hashlib
import re
from dataclasses import dataclass

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractUser, User
from django.db import IntegrityError, transaction
from django.utils import timezone

from streams_app.accounts.models import OidcIdentity
from streams_app.accounts.oidc import OidcLogin
from streams_app.accounts.oidc_config import OidcSettings, role_for_groups
from streams_app.accounts.role_groups import account_flags, role_group_of, role_group_set

#: Names never given to an account made by a login: the admin ``make run`` creates (ensure_admin would set
#: a password on it) and the break-glass accounts, which must stay the local ones they were made as.
_RESERVED = ("admin",)
_USERNAME_CHARS = re.compile(r"[^\w.@+-]")


@dataclass(frozen=True)
class OidcSync:
    """What a login did to its account: ``role`` is None when its groups gave none (account deactivated)."""

    user: User | None
    role: str | None
    previous_role: str | None
    created: bool


def oidc_user_sync(*, login: OidcLogin, config: OidcSettings) -> OidcSync:
    """Find or make the account of ``login`` and give it the role its groups map to (or deactivate it).

    Two first logins of one person at once (two tabs) both find no identity, and the second to commit
    breaks the unique (issuer, subject) constraint; so can two new people given one username. The loser
    tries again, and then finds the winner's identity, or a taken name and a suffixed one.
    """
    for attempt in range(3):
        try:
            return _sync(login=login, config=config)
        except IntegrityError:
            if attempt == 2:
                raise
    raise AssertionError("unreachable")


def _sync(*, login: OidcLogin, config: OidcSettings) -> OidcSync:
    role = role_for_groups(config.roles, login.groups)
    with transaction.atomic():
        identity = (
            OidcIdentity.objects.select_for_update().select_related("user")
            .filter(issuer=login.issuer, subject=login.subject).first()
        )
        if identity is None:
            if role is None:
                return OidcSync(user=None, role=None, previous_role=None, created=False)
            user = get_user_model()(username=_free_username(login), email=_email(login))
            user.set_unusable_password()
            user.save()
            identity = OidcIdentity(user=user, issuer=login.issuer, subject=login.subject)
            created, previous = True, None
        else:
            user, created = identity.user, False
            previous = role_group_of(user)
        changed = _account_fields(user, login, active=role is not None)
        if changed:
            user.save(update_fields=changed)
        role_group_set(user, role)
        identity.groups = list(login.groups)
        identity.last_login_at = timezone.now()
        identity.save()
    return OidcSync(user=user, role=role, previous_role=previous, created=created)


def _account_fields(user: AbstractUser, login: OidcLogin, *, active: bool) -> list[str]:
    """Bring the account in line with this login; the names of the fields that changed."""
    changed = account_flags(user, active=active)
    if (email := _email(login)) and user.email != email:
        user.email = email
        changed.append("email")
    return changed


def _email(login: OidcLogin) -> str:
    email = login.claims.get("email")
    return email if isinstance(email, str) and "@" in email and len(email) <= 254 else ""


def _free_username(login: OidcLogin) -> str:
    """A username for a new account: the provider's ``preferred_username`` (or e-mail, or subject) in the
    characters Django allows, with a suffix from the subject when it is taken or reserved."""
    claims = login.claims
    base = next(
        (v for v in (claims.get("preferred_username"), claims.get("email"), login.subject) if isinstance(v, str) and v),
        "user",
    )
    base = _USERNAME_CHARS.sub("-", base)[:120]
    model = get_user_model()
    reserved = {*_RESERVED, *settings.BUSCONSOLE_BREAK_GLASS_USERS}
    if base not in reserved and not model._default_manager.filter(username=base).exists():
        return base
    suffix = hashlib.sha256(f"{login.issuer}\n{login.subject}".encode()).hexdigest()[:10]
    return f"{base[:120]}-{suffix}"
