"""The event bus tests' fixtures (``url``, ``bus``), here on the Valkey server of tests/valkey/conftest.py."""

from __future__ import annotations

from tests.valkey.rerun import copy_names

copy_names("tests.eventbus.conftest", globals())
