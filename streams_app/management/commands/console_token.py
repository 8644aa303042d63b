"""``python manage.py console_token <username> [--name N] [--expires-days D] [--role R]``: print a new API token.

Only the token goes to stdout, so a script can capture it (``TOKEN=$(... console_token ci)``);
what it is and that it is shown once goes to stderr. ``--role viewer`` caps the token below its owner's
role (a dashboard or scraper that must never change anything); ``--expires-days`` makes it stop working
after that many days. Creating the token is audited as ``token.create`` by its owner, like the tokens page.
"""

from __future__ import annotations

from typing import Any

from django.contrib.auth import get_user_model
from django.core.management.base import CommandError, CommandParser

from streams_app import services
from streams_app.accounts.roles import ROLE_GROUPS
from streams_app.accounts.tokens import TOKEN_MAX_DAYS, token_expiry
from streams_app.management.commands._cli import GuidedCommand


class Command(GuidedCommand):
    help = "Create a personal API token for a user and print it (shown once; only its hash is stored)."
    examples = """\
  python manage.py console_token alice
  TOKEN=$(python manage.py console_token ci --name grafana --role viewer --expires-days 90)
"""
    environment = "  DATABASE_URL     the console's database (default sqlite:///var/busconsole.sqlite3)\n"

    def add_arguments(self, parser: CommandParser) -> None:
        parser.add_argument("username")
        parser.add_argument("--name", default="cli", help="What the token is for (default: cli).")
        parser.add_argument(
            "--expires-days", type=int, default=None, dest="expires_days",
            help=f"Days until the token stops working (1-{TOKEN_MAX_DAYS}; default: never).",
        )
        parser.add_argument(
            "--role", choices=list(ROLE_GROUPS), default="",
            help="The highest role the token acts with (default: its owner's role, whatever that becomes).",
        )

    def handle(
        self, *args: Any, username: str, name: str, expires_days: int | None, role: str, **options: Any
    ) -> None:
        User = get_user_model()
        try:
            user = User._default_manager.get_by_natural_key(username)
        except User.DoesNotExist:
            raise CommandError(f"No user named {username!r}.") from None
        if not user.is_active:
            raise CommandError(f"User {username!r} is inactive: its tokens would be refused.")
        try:
            expires_at = token_expiry(expires_days)
        except ValueError as exc:
            raise CommandError(str(exc)) from None
        token, raw = services.token_issue(user=user, name=name, expires_at=expires_at, role_ceiling=role)
        self.stdout.write(raw)
        limits = [f"acts at most as {role}" if role else "", f"expires {expires_at:%Y-%m-%d %H:%M %Z}" if expires_at else ""]
        self.stderr.write(
            f"Created token {token.name!r} ({token.prefix}…) for {username}"
            + "".join(f"; {limit}" for limit in limits if limit)
            + ". Store it now: it cannot be shown again."
        )
