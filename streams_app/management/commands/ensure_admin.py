"""``python manage.py ensure_admin [--username admin]``: make sure an admin account exists.

Run by ``make run`` on every start, so it must be idempotent: it creates the superuser once (password
from BUSCONSOLE_ADMIN_PASSWORD, else generated and printed that one time), afterwards only resets
the password when BUSCONSOLE_ADMIN_PASSWORD says so, and always keeps the account in the admin group.
"""

from __future__ import annotations

import os
import secrets
from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.models import Group
from django.core.management.base import CommandParser
from django.db import transaction

from streams_app.management.commands._cli import GuidedCommand

PASSWORD_ENV = "BUSCONSOLE_ADMIN_PASSWORD"
ADMIN_GROUP = "admin"


class Command(GuidedCommand):
    help = "Create the admin superuser if missing; reset its password if BUSCONSOLE_ADMIN_PASSWORD is set."
    examples = """\
  python manage.py ensure_admin
  BUSCONSOLE_ADMIN_PASSWORD=change-me python manage.py ensure_admin --username ops
"""
    environment = """\
  BUSCONSOLE_ADMIN_PASSWORD  the password to set (default: generated and printed once)
  DATABASE_URL               the console's database (default sqlite:///var/busconsole.sqlite3)
"""

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("--username", default="admin")

    @transaction.atomic
    def handle(self, *args: Any, username: str, **options: Any) -> None:
        User = get_user_model()
        env_password = os.environ.get(PASSWORD_ENV) or None
        try:
            user = User._default_manager.get_by_natural_key(username)
        except User.DoesNotExist:
            user = None
        if user is None:
            password = env_password or secrets.token_urlsafe(12)
            user = User._default_manager.create_superuser(username=username, email="", password=password)
            # Printed once, now; a password that came from the environment is already known and is
            # kept out of logs.
            shown = f"(from {PASSWORD_ENV})" if env_password else password
            self.stdout.write(f"Admin login: {username} / {shown}")
        elif env_password:
            user.set_password(env_password)
            user.save(update_fields=["password"])
            self.stdout.write(f"Admin user {username!r} exists; password reset from {PASSWORD_ENV}.")
        else:
            self.stdout.write(f"Admin user {username!r} exists; password unchanged.")
        if not user.is_active:
            self.stderr.write(f"Warning: user {username!r} is inactive and cannot log in.")
        # The group exists after migrate; get_or_create keeps the command working on a database
        # whose groups someone deleted.
        group, _ = Group.objects.get_or_create(name=ADMIN_GROUP)
        user.groups.add(group)
