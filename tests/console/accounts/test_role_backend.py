"""The session user is read with its role: ConsoleModelBackend's annotation and role_of agree, with no
query of their own, and a change of groups counts from the next request.

Each user's expected role is stated by hand from its groups and flags (docs/api.md#roles-and-the-audit-trail: the highest
role group wins, an account in none is a viewer, superusers are admins, inactive accounts have none).
"""

from __future__ import annotations

from types import SimpleNamespace

import pytest
from django.contrib.auth import get_user
from django.contrib.auth.models import Group, User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from streams_app.accounts.role_backend import ConsoleModelBackend
from streams_app.accounts.roles import Role, role_of
from tests.console.conftest import make_user

CASES = [
    ("no-group", (), {}, Role.VIEWER),
    ("unrelated-group", ("billing-team",), {}, Role.VIEWER),
    ("viewer", ("viewer",), {}, Role.VIEWER),
    ("operator", ("operator",), {}, Role.OPERATOR),
    ("admin", ("admin",), {}, Role.ADMIN),
    ("viewer-operator", ("viewer", "operator"), {}, Role.OPERATOR),
    ("all-three", ("admin", "viewer", "operator", "billing-team"), {}, Role.ADMIN),
    ("superuser", (), {"is_superuser": True}, Role.ADMIN),
]


@pytest.mark.parametrize(("name", "groups", "flags", "expected"), CASES, ids=[c[0] for c in CASES])
def test_the_annotated_role_agrees_with_role_of(
    db, django_assert_num_queries, name, groups, flags, expected
) -> None:
    Group.objects.get_or_create(name="billing-team")
    user = make_user(name, groups=(), **flags)
    user.groups.add(*Group.objects.filter(name__in=groups))
    loaded = ConsoleModelBackend().get_user(user.pk)
    assert loaded is not None and loaded.pk == user.pk and loaded.username == name
    with django_assert_num_queries(0):
        assert role_of(loaded) is expected
    assert role_of(User.objects.get(pk=user.pk)) is expected  # the query role_of runs without the annotation


def test_inactive_unknown_and_malformed_ids_give_no_user(db) -> None:
    backend = ConsoleModelBackend()
    inactive = make_user("ina-inactive", groups=("admin",), is_active=False)
    assert backend.get_user(inactive.pk) is None
    assert backend.get_user(inactive.pk + 1000) is None
    assert backend.get_user("not-a-number") is None


def test_a_change_of_groups_counts_from_the_next_request(db) -> None:
    user = make_user("gus-groups", groups=("viewer",))
    client = Client()
    client.force_login(user)

    def session_user() -> User:
        return get_user(SimpleNamespace(session=client.session))

    first = session_user()
    assert first.pk == user.pk and role_of(first) is Role.VIEWER
    user.groups.add(Group.objects.get(name="operator"))
    assert role_of(first) is Role.VIEWER  # the same request keeps the role it read
    assert role_of(session_user()) is Role.OPERATOR
    user.groups.clear()
    user.is_superuser = True
    user.save()
    assert role_of(session_user()) is Role.ADMIN
    user.is_active = False
    user.save()
    assert not session_user().is_authenticated


def test_a_page_reads_the_role_with_the_user(r, viewer_client: Client) -> None:
    """The stream page asks the role (navigation, buttons); no query after the user's own reads groups."""
    r.xadd("orders", {"n": "1"})
    with CaptureQueriesContext(connection) as queries:
        assert viewer_client.get("/c/default/streams/orders/").status_code == 200
    group_reads = [q["sql"] for q in queries.captured_queries if "auth_group" in q["sql"]]
    assert len(group_reads) == 1 and "console_group_role" in group_reads[0], group_reads
