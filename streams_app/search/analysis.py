"""What the search learns from an expression's text before evaluating it: :mod:`eventbus.search.analysis`,
the one Django-free copy the console and the bus's command line share (its docstring says what and why)."""

from __future__ import annotations

from eventbus.search.analysis import (  # noqa: F401  (re-exported: the console's names)
    Needle,
    Token,
    has_long_number,
    number_needle,
    plain_string,
    required_literals,
    root_paths,
    size_only_paths,
    tokenize,
)
