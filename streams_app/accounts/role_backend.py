"""The backend that logs people in and reads each request's user with its role.

Every page asks the user's role (navigation, buttons, the checks where actions run), which cost a query
of its own on each request. Reading the role groups' rank in the query that loads the session's user
makes that free; since that query runs on every request, a change of groups still takes effect on the
next one.
"""

from __future__ import annotations

import functools
from typing import TYPE_CHECKING, Any

from django.contrib.auth import get_user_model
from django.contrib.auth.backends import ModelBackend
from django.core.exceptions import ValidationError
from django.db import connections, router
from django.db.models import Case, IntegerField, Max, QuerySet, Value, When

from streams_app.accounts.login import password_login_allowed
from streams_app.accounts.roles import GROUP_ROLE_ANNOTATION, ROLE_GROUPS, Role
from streams_app.perf.compiled import Compiled, compile_once

if TYPE_CHECKING:
    from django.contrib.auth.models import User

UserModel = get_user_model()


def group_role_rank() -> Max:
    """The highest :data:`ROLE_GROUPS` rank among a user's groups, 0 in none of them: an aggregate over
    the user's groups (a user in no group still gives one row, with a NULL group name)."""
    rank = Case(
        *(When(groups__name=name, then=Value(int(role))) for name, role in ROLE_GROUPS.items()),
        default=Value(int(Role.NONE)),
        output_field=IntegerField(),
    )
    return Max(rank)


_PK_MARKER = -7_304_211  # a primary key no row has: where the user's id goes in the compiled query


def _user_with_role_query(alias: str) -> QuerySet:
    """The users with their role groups' rank, for one database (filtered by id by the callers)."""
    return UserModel._default_manager.using(alias).annotate(**{GROUP_ROLE_ANNOTATION: group_role_rank()})


@functools.cache
def _user_with_role(alias: str) -> Compiled | None:
    """ "The user with this id, with its role groups' rank", compiled once per database (see
    :mod:`streams_app.perf.compiled`: compiling it cost four times what running it does, on every request).
    None when Django's compiler is not as expected: :meth:`ConsoleModelBackend.get_user` runs the query."""
    return compile_once(_user_with_role_query(alias).filter(pk=_PK_MARKER), {"pk": _PK_MARKER}, expect={"pk": 1})


class ConsoleModelBackend(ModelBackend):
    """Django's ModelBackend (passwords and permissions unchanged), whose session user comes with its role
    groups' rank annotated for :func:`streams_app.accounts.roles.role_of`, and which checks no password
    when BUSCONSOLE_LOCAL_LOGIN=0 unless the account is a break-glass one
    (:func:`streams_app.accounts.login.password_login_allowed`)."""

    def authenticate(
        self, request: Any, username: str | None = None, password: str | None = None, **kwargs: Any
    ) -> User | None:
        if username is None:
            username = kwargs.get(UserModel.USERNAME_FIELD)
        if not password_login_allowed(username):
            return None
        return super().authenticate(request, username=username, password=password, **kwargs)

    def get_user(self, user_id: Any) -> User | None:
        pk, alias = UserModel._meta.pk, router.db_for_read(UserModel)
        try:
            user_id = pk.to_python(user_id)
            value = pk.get_db_prep_value(user_id, connections[alias])
        except ValidationError:
            return None
        compiled = _user_with_role(alias)
        if compiled is None:
            user = _user_with_role_query(alias).filter(pk=user_id).first()
        else:
            user = next(
                iter(UserModel._default_manager.raw(compiled.sql, compiled.args(pk=value)).using(alias)), None
            )
        return user if user is not None and self.user_can_authenticate(user) else None
