"""An account's role group, set by a login from an outside source of roles (an OpenID provider's groups,
a directory's): exactly one of the role groups, or none, with the account's other groups left alone.

The change goes through ``user.groups``, so the signal that closes a demoted user's open websockets
(:mod:`streams_app.signals`) fires as it does for a change made in the Django admin; only what differs is
removed or added, so a login that changes nothing sends no revocation.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from django.contrib.auth.models import Group

from streams_app.accounts.roles import ROLE_GROUPS

if TYPE_CHECKING:
    from django.contrib.auth.models import AbstractUser


def role_group_of(user: AbstractUser) -> str | None:
    """The highest role group ``user`` is in, None for none."""
    names = set(user.groups.filter(name__in=ROLE_GROUPS).values_list("name", flat=True))
    return max(names, key=lambda name: ROLE_GROUPS[name], default=None)


def role_group_set(user: AbstractUser, role: str | None) -> None:
    """Exactly ``role``'s group among the role groups (none for None); other groups are left alone."""
    held = set(user.groups.filter(name__in=ROLE_GROUPS).values_list("name", flat=True))
    wanted = {role} if role else set()
    if stale := held - wanted:
        user.groups.remove(*Group.objects.filter(name__in=stale))
    if missing := wanted - held:
        user.groups.add(*(Group.objects.get_or_create(name=name)[0] for name in missing))


def account_flags(user: AbstractUser, *, active: bool) -> list[str]:
    """An account whose role comes from outside: active or not as its groups say, never a superuser or
    staff by hand. Sets the fields; returns the names of those that changed, for ``save(update_fields=)``."""
    wanted = {"is_active": active, "is_superuser": False, "is_staff": False}
    changed = [name for name, value in wanted.items() if getattr(user, name) != value]
    for name in changed:
        setattr(user, name, wanted[name])
    return changed
