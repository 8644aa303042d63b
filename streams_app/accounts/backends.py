"""Django permissions for console admins: what they may do in the Django admin.

The roles (docs/api.md#roles-and-the-audit-trail) make the ``admin`` group the console's administrators ("manage users and tokens"), and
superusers are admins. Django's admin asks ``user.has_perm(...)`` for every model page; a superuser gets
yes from Django itself, a member of the ``admin`` group got no from every backend, so the admin showed them
nothing. This backend answers yes for every active console admin, making the admin group and the superuser
flag equivalent there, as they are everywhere else in the console. It authenticates nobody (logins stay
with ModelBackend and the console's throttled form); models that are evidence (audit rows, jobs) refuse
changes in their ModelAdmin, which no permission overrides.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth.backends import BaseBackend

from streams_app.accounts.roles import Role, role_of


class ConsoleAdminPermissions(BaseBackend):
    def has_perm(self, user_obj: Any, perm: str, obj: Any = None) -> bool:
        return role_of(user_obj) >= Role.ADMIN

    def has_module_perms(self, user_obj: Any, app_label: str) -> bool:
        return role_of(user_obj) >= Role.ADMIN
