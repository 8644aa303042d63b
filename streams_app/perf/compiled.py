"""A query the ORM compiles once per process, run many times with different values.

Django compiles a queryset to SQL on every evaluation. For the few queries that run on every page (the
session's user with its role, a stream page's mirror row with its open alerts) compiling took longer than
running them did (docs/performance.md#figures-behind-the-design). Django has no prepared-statement
cache to lean on, so :func:`compile_once` builds the queryset with *marker* values no real request has,
compiles it, and remembers at which parameter positions each marker landed; :meth:`Compiled.args` then
swaps the request's values in. The SQL text stays the ORM's own (quoted, portable, written from the
models), and a queryset whose markers do not land exactly where expected is refused at compile time, not
run with the wrong values.

What is private. The SQL comes from Django's compiler, which is not public API: ``QuerySet.query`` (the
``Query`` behind a queryset), ``Query.get_compiler(using)`` and ``SQLCompiler.as_sql()`` with its
``(sql, params)`` answer and ``%s`` placeholders; the replay itself goes through the public ``raw()``.
:func:`internals_problem` checks those three by name and signature, once per process
(:func:`internals_check`, called at start-up by the app's ``ready``), and :func:`compile_once` checks the
shape of what the compiler returned for each query. When either finds a change, one WARNING names the
internal and the Django version, :func:`compile_once` returns None and its callers run the plain ORM
query instead: the same rows, at the cost of compiling them on every request. The check is exact on
purpose (a new parameter may mean a new meaning), so an upgrade of Django that changes any of these fails
``tests/console/test_compiled_internals.py`` by name before it reaches a server.
"""

from __future__ import annotations

import functools
import inspect
import logging
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import django
from django.db.models import QuerySet
from django.db.models.sql import Query
from django.db.models.sql.compiler import SQLCompiler

log = logging.getLogger(__name__)

#: The private methods replayed, with the parameter names each is known to have (``self`` first).
_SIGNATURES = {
    "Query.get_compiler": ["self", "using", "connection", "elide_empty"],
    "SQLCompiler.as_sql": ["self", "with_limits", "with_col_aliases"],
}


@dataclass(frozen=True, slots=True)
class Compiled:
    sql: str
    params: tuple[Any, ...]
    slots: Mapping[int, str]  # parameter position -> the name of the value that goes there

    def args(self, **values: Any) -> list[Any]:
        """The parameters with ``values`` (by name) in their places."""
        return [values[self.slots[i]] if i in self.slots else p for i, p in enumerate(self.params)]


def internals_problem(
    *, query_class: type = Query, compiler_class: type = SQLCompiler, queryset_class: type = QuerySet
) -> str | None:
    """What of Django's compiler the replay relies on is missing or changed, or None when all is there.

    The classes are parameters so that a test can hand in one that lacks something.
    """
    if not isinstance(inspect.getattr_static(queryset_class, "query", None), property):
        return "QuerySet.query is no longer a property"
    for name, owner in (("Query.get_compiler", query_class), ("SQLCompiler.as_sql", compiler_class)):
        method = getattr(owner, name.partition(".")[2], None)
        if not callable(method):
            return f"{name} is gone"
        try:
            params = list(inspect.signature(method).parameters)
        except (TypeError, ValueError):
            return f"{name} has no signature to check"
        if params != _SIGNATURES[name]:
            return f"{name} takes ({', '.join(params)}), not ({', '.join(_SIGNATURES[name])})"
    return None


def _warn(problem: str) -> None:
    log.warning(
        "compiled queries off (Django %s): %s; the plain ORM queries run instead", django.get_version(), problem
    )


@functools.cache
def internals_check() -> str | None:
    """:func:`internals_problem` once per process, with its WARNING when there is one."""
    problem = internals_problem()
    if problem is not None:
        _warn(problem)
    return problem


def compile_once(queryset: QuerySet, markers: Mapping[str, Any], *, expect: Mapping[str, int]) -> Compiled | None:
    """Compile ``queryset`` (built with the ``markers``' values) and find where each marker went.

    ``expect`` says how many times each marker must appear among the parameters. None, with a WARNING,
    when the compiler is not as :func:`internals_problem` expects or its answer cannot be replayed (not
    ``(sql, params)``, or a marker folded into the SQL or equal to another parameter): the caller runs
    its ORM query instead.
    """
    if internals_check() is not None:
        return None
    answer = queryset.query.get_compiler(queryset.db).as_sql()
    if not (
        isinstance(answer, tuple) and len(answer) == 2 and isinstance(answer[0], str)
        and isinstance(answer[1], Sequence) and not isinstance(answer[1], str)
    ):
        _warn(f"SQLCompiler.as_sql() answered {type(answer).__name__}, not (sql, params)")
        return None
    sql, params = answer
    by_value = {value: name for name, value in markers.items()}
    slots = {i: by_value[p] for i, p in enumerate(params) if _hashable(p) and p in by_value}
    found = {name: sum(1 for n in slots.values() if n == name) for name in markers}
    if found != dict(expect):
        _warn(f"SQLCompiler.as_sql() parameters hold the markers {found} times, not {dict(expect)}: {params!r}")
        return None
    return Compiled(sql, tuple(params), slots)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
