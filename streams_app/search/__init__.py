"""Payload search: a CEL expression or plain text over a stream's decoded entries, bounded and honest.

:func:`compile_query` turns what was typed into a :class:`~eventbus.search.query.Query` (the language itself, Django-free and
shared with ``python -m eventbus inspect --search``, is :mod:`eventbus.search`: the rule that tells an
expression from plain text, the variables an expression sees, the choice of CEL library and the
plain-Python evaluator of the commonest expressions, and the bound on what an expression may cost,
checked before it runs); :func:`search_page` scans one budget's worth of a range (:mod:`.scan`); :mod:`.requeue` is the job
that requeues the dead letters a search matches. Only :mod:`streams_app.redis_ops` talks to Redis; the
pages, the API and the services call these functions.
"""

from __future__ import annotations

from .scan import BUDGET_ENTRIES, BUDGET_MS, DEFAULT_LIMIT, MAX_LIMIT, SearchPage, compile_query, search_page

__all__ = [
    "BUDGET_ENTRIES",
    "BUDGET_MS",
    "DEFAULT_LIMIT",
    "MAX_LIMIT",
    "SearchPage",
    "compile_query",
    "search_page",
]
