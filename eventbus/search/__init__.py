"""Payload search's language, Django-free: a CEL expression or plain text over an entry's decoded fields.

:func:`compile_query` turns what was typed into a :class:`Query` (the rule that tells an expression from
plain text, the variables an expression sees and the choice of CEL library are in :mod:`.query`);
:mod:`.analysis` reads what it can of an expression's text (paths, required literals) and :mod:`.fast`
evaluates the commonest expressions without CEL's conversions. Before anything runs, :mod:`.syntax`
parses the expression (a depth limit) and :mod:`.cost` bounds what one entry's evaluation may cost;
:mod:`.regex` runs ``matches`` on RE2, each pattern compiled once per query. ``python -m eventbus
inspect --search`` and any program searching the bus's streams build on this one copy.
"""

from __future__ import annotations

from .query import DLQ_VARIABLES, MAX_QUERY, Query, QueryError, SearchEntry, compile_query, is_expression_text

__all__ = [
    "DLQ_VARIABLES",
    "MAX_QUERY",
    "Query",
    "QueryError",
    "SearchEntry",
    "compile_query",
    "is_expression_text",
]
