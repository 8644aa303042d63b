"""Who may do what: the console's roles and its read-only mode (docs/api.md#roles-and-the-audit-trail).

Checks here are meant to be called where an action runs (:mod:`streams_app.services` does, through
its ``ACTION_ROLES`` table), so hiding a button is never the only thing standing between a viewer and
a purge.
"""

from __future__ import annotations

from enum import IntEnum
from typing import TYPE_CHECKING

from django.conf import settings
from django.core.exceptions import PermissionDenied

if TYPE_CHECKING:
    from django.contrib.auth.models import AnonymousUser, User

    UserLike = User | AnonymousUser  # request.user: the console uses Django's User model


class Role(IntEnum):
    """A user's power in the console, ordered so that ``role_of(user) >= Role.OPERATOR`` reads right.

    ``str(role)`` is the group name ("viewer", ...), which is what templates and messages show.
    """

    NONE = 0
    VIEWER = 1
    OPERATOR = 2
    ADMIN = 3

    def __str__(self) -> str:
        return self.label

    @property
    def label(self) -> str:
        return self.name.lower()


# The Django groups created by migration 0002, highest role wins when a user is in several.
ROLE_GROUPS: dict[str, Role] = {"viewer": Role.VIEWER, "operator": Role.OPERATOR, "admin": Role.ADMIN}

_ROLE_CACHE_ATTR = "_console_role"
_CEILING_ATTR = "_console_role_ceiling"
#: The annotation :class:`streams_app.accounts.role_backend.ConsoleModelBackend` reads a session's user with:
#: the highest role group's rank (0 for none), so ``role_of`` needs no query of its own.
GROUP_ROLE_ANNOTATION = "console_group_role"


def role_of(user: UserLike | None) -> Role:
    """The role of ``user``: superusers are admins, else the highest role group they belong to.

    An active, authenticated user in none of the role groups is a VIEWER: every account on the
    console may read (a viewer reads everything), and granting an account anything more is an
    explicit act of putting it in the operator or admin group. Anonymous and inactive users have
    Role.NONE. A ceiling set by :func:`role_ceiling_set` (the API token the request came with) caps
    the answer. A user read by the console's backend carries its groups' role already (read with the
    user, every request, so a change of groups counts from the next request); any other user object
    costs one query. The answer is cached on the user object, which lives for one request, so the
    several checks one page makes cost at most that query.
    """
    if user is None or not user.is_authenticated or not user.is_active:
        return Role.NONE
    cached = getattr(user, _ROLE_CACHE_ATTR, None)
    if cached is not None:
        return cached
    role = min(_account_role(user), getattr(user, _CEILING_ATTR, Role.ADMIN))
    setattr(user, _ROLE_CACHE_ATTR, role)
    return role


def _account_role(user: UserLike) -> Role:
    """The role of an active, authenticated ``user``'s account, whatever ceiling the request carries."""
    if getattr(user, "is_superuser", False):
        return Role.ADMIN
    if (rank := getattr(user, GROUP_ROLE_ANNOTATION, None)) is not None:
        return max(Role(rank), Role.VIEWER)
    names = user.groups.filter(name__in=ROLE_GROUPS).values_list("name", flat=True)
    return max((ROLE_GROUPS[name] for name in names), default=Role.VIEWER)


def role_ceiling_set(user: UserLike, ceiling: Role) -> None:
    """Cap the role ``user`` acts with, for as long as this user object lives (one request).

    The effective role is the lower of the user's own and the ceiling, so a ceiling never grants
    anything: a viewer's token capped at admin still acts as a viewer.
    """
    setattr(user, _CEILING_ATTR, ceiling)
    if hasattr(user, _ROLE_CACHE_ATTR):
        delattr(user, _ROLE_CACHE_ATTR)


def require_role(user: UserLike | None, role: Role) -> None:
    """Raise PermissionDenied unless ``user`` holds at least ``role``.

    The message names what limits the caller: the account's role, or the API token's ceiling when that
    is lower (an admin's token capped at viewer must not be told the account is a viewer's).
    """
    current = role_of(user)
    if current >= role:
        return
    if current is Role.NONE:
        raise PermissionDenied(f"Log in with an active account that has the {role.label} role.")
    ceiling = getattr(user, _CEILING_ATTR, None)
    if ceiling is not None and user is not None and (account := _account_role(user)) > ceiling:
        raise PermissionDenied(
            f"This action needs the {role.label} role; this API token is capped at the {ceiling.label} role "
            f"(its account has the {account.label} role: use a token with a higher cap, or none)."
        )
    raise PermissionDenied(
        f"This action needs the {role.label} role; your account has the {current.label} role."
    )


def read_only_blocked() -> bool:
    """True when BUSCONSOLE_READ_ONLY=1: every mutating action is refused, for every role."""
    return bool(settings.BUSCONSOLE_READ_ONLY)


def require_writable() -> None:
    """Raise PermissionDenied when the console runs read-only (call next to ``require_role``)."""
    if read_only_blocked():
        raise PermissionDenied("The console is read-only (BUSCONSOLE_READ_ONLY=1): no changes are allowed.")
