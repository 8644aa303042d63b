"""The Django admin as the console's: entered by console admins, logged into through the console's login.

Who may enter is the console's role, not Django's ``is_staff`` flag: the ``admin`` group and superusers
(:func:`streams_app.accounts.roles.role_of`), active accounts only. The role is the one place the console
records who administers it; a second flag to keep in step with it would drift (a user added to the admin
group but not flagged staff could not manage users, as the README promises; a viewer flagged staff could).
Viewers and operators stay out whatever their flag says. What they may do inside comes from
:class:`streams_app.accounts.backends.ConsoleAdminPermissions`.

``/admin/login/`` is routed to the console's own throttled login (``busconsole/urls.py``), so the admin
never checks a password itself. This module holds no model import: Django imports it while it is still
loading apps, to find :class:`ConsoleAdminConfig`.
"""

from __future__ import annotations

from django.contrib import admin
from django.contrib.admin.apps import AdminConfig
from django.http import HttpRequest

from streams_app.accounts.roles import Role, role_of


class ConsoleAdminSite(admin.AdminSite):
    site_header = "busconsole administration"
    site_title = "busconsole admin"

    def has_permission(self, request: HttpRequest) -> bool:
        """Console admins (the ``admin`` group or superusers) and nobody else; inactive users never."""
        return role_of(request.user) >= Role.ADMIN


class ConsoleAdminConfig(AdminConfig):
    """``django.contrib.admin`` with :class:`ConsoleAdminSite` as ``admin.site``, so every app registers there."""

    default_site = "streams_app.admin_site.ConsoleAdminSite"
