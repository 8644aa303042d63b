"""The interop fixtures (an event loop thread for the async libraries, the monitored database's URL),
shared with ``tests/console/interop/`` so the search is tested on data the real libraries wrote."""

from __future__ import annotations

from tests.console.interop.conftest import aio, url

__all__ = ["aio", "url"]
