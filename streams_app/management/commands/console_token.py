"""``python manage.py console_token <username> [--name N]``: print a new API token for a user.

Only the token goes to stdout, so a script can capture it (``TOKEN=$(... console_token ci)``);
what it is and that it is shown once goes to stderr.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import BaseCommand, CommandError, CommandParser

from streams_app.accounts.tokens import token_create


class Command(BaseCommand):
    help = "Create a personal API token for a user and print it (shown once; only its hash is stored)."

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="What the token is for (default: cli).")

    def handle(self, *args: Any, username: str, name: str, **options: Any) -> None:
        User = get_user_model()
        try:
            user = User._default_manager.get_by_natural_key(username)
        except User.DoesNotExist:
            raise CommandError(f"No user named {username!r}.") from None
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive: its tokens would be refused.")
        token, raw = token_create(user=user, name=name)
        self.stdout.write(raw)
        self.stderr.write(
            f"Created token {token.name!r} ({token.prefix}…) for {username}. "
            "Store it now: it cannot be shown again."
        )
