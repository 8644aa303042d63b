"""Rerun some of the suite's own test modules on Valkey, without a second copy of any test.

A module here calls ``rerun("tests.console.redis_ops.test_claims", globals())``: every name of that
module (its tests, its module-level fixtures, its helpers, its ``pytestmark``) is copied into the module
here, and pytest collects the tests again under tests/valkey/, where conftest.py points ``r``, ``bus``
and the console at a valkey-server. The tests themselves are unchanged, so what they check on Redis
they check on Valkey, and a test added to the module later runs on both.

Written here rather than taken from a plugin: pytest has no built-in way to collect one module twice
under other fixtures, and a copy of a namespace is all it takes.
"""

from __future__ import annotations

import importlib
from typing import Any

import pytest


def copy_names(module_name: str, namespace: dict[str, Any]) -> None:
    """Every name of ``module_name`` but its dunders into ``namespace`` (``_private`` ones included)."""
    module = importlib.import_module(module_name)
    namespace.update({name: value for name, value in vars(module).items() if not name.startswith("__")})


def rerun(module_name: str, namespace: dict[str, Any]) -> None:
    """Collect ``module_name``'s tests again in the module whose globals are ``namespace``, marked valkey."""
    copy_names(module_name, namespace)
    marks = namespace.get("pytestmark", [])
    namespace["pytestmark"] = [*(marks if isinstance(marks, list) else [marks]), pytest.mark.valkey]
