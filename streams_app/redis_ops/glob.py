"""Redis's glob, matched in Python exactly as ``SCAN ... MATCH`` matches it on the server.

One copy, shared with the event bus's command line: it lives in :mod:`eventbus.glob` (Django-free) and
is re-exported here under the names the console has always imported.
"""

from __future__ import annotations

from eventbus.glob import MAX_NESTING, Glob, glob_compile, glob_match

__all__ = ["MAX_NESTING", "Glob", "glob_compile", "glob_match"]
