"""A search query on the console: :mod:`eventbus.search.query`, the one Django-free copy of the language
(the rule that tells an expression from plain text, the variables, the choice of CEL library are in its
docstring), with the console's settings and errors.

:func:`compile_query` reads the DLQ conventions from ``settings.BUSCONSOLE_DLQ_PATTERNS`` (a dead
letter's ``error``, ``traceback``, ``retries``... are parsed by them) and turns a query that cannot be
one into :class:`~streams_app.redis_ops.errors.InvalidArgument`, a 400 that says why.
"""

from __future__ import annotations

from eventbus.search import query as _core
from eventbus.search.query import (  # noqa: F401  (re-exported: the console's names)
    DLQ_VARIABLES,
    ENTRY_VARIABLES,
    MAX_QUERY,
    Query,
    QueryError,
    is_expression_text,
    searchable_text,
)
from streams_app.redis_ops.conventions import dlq_patterns
from streams_app.redis_ops.errors import InvalidArgument


def compile_query(text: str) -> Query:
    """The query typed in the box or the API's ``q``; InvalidArgument (a 400) when it cannot be one."""
    try:
        return _core.compile_query(text, patterns=dlq_patterns())
    except QueryError as exc:
        raise InvalidArgument(str(exc)) from exc
