"""A query the ORM compiles once per process, run many times with different values.

Django compiles a queryset to SQL on every evaluation. For the few queries that run on every page (the
session's user with its role, a stream page's mirror row with its open alerts) compiling took two to four
times what running them did. Django has no prepared-statement cache to lean on, so :func:`compile_once`
builds the queryset with *marker* values no real request has, compiles it, and remembers at which
parameter positions each marker landed; :meth:`Compiled.args` then swaps the request's values in. The
SQL text stays the ORM's own (quoted, portable, written from the models), and a queryset whose markers
do not land exactly where expected is refused at compile time, not run with the wrong values.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from django.db.models import QuerySet


@dataclass(frozen=True, slots=True)
class Compiled:
    sql: str
    params: tuple[Any, ...]
    slots: Mapping[int, str]  # parameter position -> the name of the value that goes there

    def args(self, **values: Any) -> list[Any]:
        """The parameters with ``values`` (by name) in their places."""
        return [values[self.slots[i]] if i in self.slots else p for i, p in enumerate(self.params)]


def compile_once(queryset: QuerySet, markers: Mapping[str, Any], *, expect: Mapping[str, int]) -> Compiled:
    """Compile ``queryset`` (built with the ``markers``' values) and find where each marker went.

    ``expect`` says how many times each marker must appear among the parameters; anything else (a
    marker folded into the SQL, or equal to another parameter) raises ``RuntimeError``.
    """
    sql, params = queryset.query.get_compiler(queryset.db).as_sql()
    by_value = {value: name for name, value in markers.items()}
    slots = {i: by_value[p] for i, p in enumerate(params) if _hashable(p) and p in by_value}
    found = {name: sum(1 for n in slots.values() if n == name) for name in markers}
    if found != dict(expect):
        raise RuntimeError(
            f"markers expected {dict(expect)} times among the parameters, found {found}: {params!r}"
        )
    return Compiled(sql, tuple(params), slots)


def _hashable(value: Any) -> bool:
    try:
        hash(value)
    except TypeError:
        return False
    return True
