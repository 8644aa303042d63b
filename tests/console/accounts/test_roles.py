"""Roles: the groups the migration creates, the role each user has, require_role, and read-only mode.

The expected role of each standing user (viewer, operator, admin, inactive outsider) and of users built
in the test is stated by hand from their groups and flags; refusals must say what role is needed and
what the user has.
"""

from __future__ import annotations

import importlib
from types import SimpleNamespace

import pytest
from django.apps import apps as django_apps
from django.contrib.auth.models import AnonymousUser, Group, User
from django.core.exceptions import PermissionDenied
from django.db import connection

from streams_app.accounts.roles import (
    ROLE_GROUPS,
    Role,
    read_only_blocked,
    require_role,
    require_writable,
    role_of,
)
from streams_app.services import action_authorize
from tests.console.conftest import PASSWORD, make_user


def test_migration_created_the_role_groups(db) -> None:
    assert set(Group.objects.values_list("name", flat=True)) >= {"viewer", "operator", "admin"}
    assert set(ROLE_GROUPS) == {"viewer", "operator", "admin"}


def test_role_migration_is_idempotent_and_reversible(db) -> None:
    migration = importlib.import_module("streams_app.migrations.0002_roles")
    schema_editor = SimpleNamespace(connection=connection)

    migration.create_role_groups(django_apps, schema_editor)
    assert Group.objects.filter(name__in=["viewer", "operator", "admin"]).count() == 3

    migration.delete_role_groups(django_apps, schema_editor)
    assert not Group.objects.filter(name__in=["viewer", "operator", "admin"]).exists()

    migration.create_role_groups(django_apps, schema_editor)
    assert Group.objects.filter(name__in=["viewer", "operator", "admin"]).count() == 3


def test_role_of_each_standing_user(viewer: User, operator: User, admin_user: User, outsider: User) -> None:
    assert role_of(viewer) is Role.VIEWER
    assert role_of(operator) is Role.OPERATOR
    assert role_of(admin_user) is Role.ADMIN
    assert role_of(outsider) is Role.NONE  # inactive, although in the operator group
    assert role_of(AnonymousUser()) is Role.NONE
    assert role_of(None) is Role.NONE


def test_superusers_are_admins_without_any_group(db) -> None:
    root = User.objects.create_superuser("root", password=PASSWORD)
    assert role_of(root) is Role.ADMIN


def test_users_in_no_role_group_are_viewers(db) -> None:
    plain = make_user("paula-plain")
    assert role_of(plain) is Role.VIEWER
    unrelated = make_user("una-unrelated")
    unrelated.groups.add(Group.objects.create(name="billing-team"))
    assert role_of(unrelated) is Role.VIEWER


def test_the_highest_role_group_wins(db) -> None:
    both = make_user("bo-both", groups=("viewer", "operator"))
    assert role_of(both) is Role.OPERATOR
    all_three = make_user("al-all", groups=("viewer", "operator", "admin"))
    assert role_of(all_three) is Role.ADMIN


def test_role_is_looked_up_once_per_user_object(operator: User, django_assert_num_queries) -> None:
    user = User.objects.get(pk=operator.pk)
    with django_assert_num_queries(1):
        assert role_of(user) is Role.OPERATOR
        assert role_of(user) is Role.OPERATOR


def test_roles_are_ordered_and_print_as_group_names() -> None:
    assert Role.NONE < Role.VIEWER < Role.OPERATOR < Role.ADMIN
    assert str(Role.OPERATOR) == "operator"
    assert f"{Role.ADMIN}" == "admin"
    assert Role.VIEWER.label == "viewer"


@pytest.mark.parametrize(
    ("who", "needed", "allowed"),
    [
        ("viewer", Role.VIEWER, True),
        ("viewer", Role.OPERATOR, False),
        ("operator", Role.OPERATOR, True),
        ("operator", Role.ADMIN, False),
        ("admin_user", Role.ADMIN, True),
        ("admin_user", Role.OPERATOR, True),
        ("outsider", Role.VIEWER, False),
    ],
)
def test_require_role(request, db, who: str, needed: Role, allowed: bool) -> None:
    user = request.getfixturevalue(who)
    if allowed:
        require_role(user, needed)
    else:
        with pytest.raises(
            PermissionDenied, match=f"needs the {needed.label} role|has the {needed.label} role"
        ):
            require_role(user, needed)


def test_require_role_says_what_is_needed_and_what_the_user_has(viewer: User) -> None:
    with pytest.raises(PermissionDenied) as excinfo:
        require_role(viewer, Role.OPERATOR)
    assert str(excinfo.value) == "This action needs the operator role; your account has the viewer role."


def test_require_role_refuses_anonymous_users() -> None:
    with pytest.raises(PermissionDenied, match="Log in"):
        require_role(AnonymousUser(), Role.VIEWER)


def test_an_operator_action_is_allowed_to_operators_and_refused_to_viewers(settings, viewer: User, operator: User) -> None:
    """Where an action runs, its role comes from ACTION_ROLES ("claim" needs an operator)."""
    settings.BUSCONSOLE_READ_ONLY = False
    action_authorize(user=operator, action="claim")
    with pytest.raises(PermissionDenied, match="needs the operator role"):
        action_authorize(user=viewer, action="claim")


def test_read_only_mode(settings) -> None:
    settings.BUSCONSOLE_READ_ONLY = False
    assert read_only_blocked() is False
    require_writable()

    settings.BUSCONSOLE_READ_ONLY = True
    assert read_only_blocked() is True
    with pytest.raises(PermissionDenied, match="read-only"):
        require_writable()
