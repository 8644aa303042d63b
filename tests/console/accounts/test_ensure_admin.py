"""The ``ensure_admin`` command: creates or promotes the admin account, and prints a password only when it made one.

Passwords are checked with Django's own ``check_password`` against the value the test set or the one the
command printed; a password taken from the environment must never appear in the output.
"""

from __future__ import annotations

import io
import re

from django.contrib.auth.models import User
from django.core.management import call_command

from streams_app.accounts.roles import Role, role_of
from tests.console.conftest import PASSWORD


def run_ensure_admin(*args: str) -> str:
    out = io.StringIO()
    call_command("ensure_admin", *args, stdout=out, stderr=io.StringIO())
    return out.getvalue()


def test_ensure_admin_creates_a_superuser_with_a_generated_password(db, monkeypatch) -> None:
    monkeypatch.delenv("BUSCONSOLE_ADMIN_PASSWORD", raising=False)
    output = run_ensure_admin()

    match = re.fullmatch(r"Admin login: admin / (\S+)\n", output)
    assert match, output
    user = User.objects.get(username="admin")
    assert user.is_superuser and user.is_staff and user.is_active
    assert user.check_password(match.group(1))
    assert len(match.group(1)) >= 16
    assert user.groups.filter(name="admin").exists()
    assert role_of(user) is Role.ADMIN


def test_ensure_admin_uses_the_password_from_the_environment(db, monkeypatch) -> None:
    monkeypatch.setenv("BUSCONSOLE_ADMIN_PASSWORD", "from-the-env-123")
    output = run_ensure_admin("--username", "root")

    assert output.startswith("Admin login: root / ")
    assert "from-the-env-123" not in output  # already known to whoever set it; kept out of logs
    assert User.objects.get(username="root").check_password("from-the-env-123")


def test_ensure_admin_resets_an_existing_password_only_when_told(db, monkeypatch) -> None:
    monkeypatch.delenv("BUSCONSOLE_ADMIN_PASSWORD", raising=False)
    first = re.fullmatch(r"Admin login: admin / (\S+)\n", run_ensure_admin())
    assert first

    again = run_ensure_admin()
    assert "exists" in again and "Admin login" not in again
    assert User.objects.get(username="admin").check_password(first.group(1))
    assert User.objects.filter(username="admin").count() == 1

    monkeypatch.setenv("BUSCONSOLE_ADMIN_PASSWORD", "new-secret-456")
    reset = run_ensure_admin()
    assert "password reset" in reset and "new-secret-456" not in reset
    assert User.objects.get(username="admin").check_password("new-secret-456")


def test_ensure_admin_puts_an_existing_user_in_the_admin_group(viewer: User, monkeypatch) -> None:
    monkeypatch.delenv("BUSCONSOLE_ADMIN_PASSWORD", raising=False)
    run_ensure_admin("--username", viewer.username)
    viewer = User.objects.get(pk=viewer.pk)
    assert role_of(viewer) is Role.ADMIN
    assert viewer.check_password(PASSWORD)
