"""Fixtures for the interop tests: an event loop thread for the async libraries, and the URL of
the monitored database (db 0, emptied by ``r`` first) for the libraries to connect to."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.console.interop.helpers import LoopThread


@pytest.fixture
def aio() -> Iterator[LoopThread]:
    loop = LoopThread()
    yield loop
    loop.close()


@pytest.fixture
def url(redis_server, r: redis.Redis) -> str:
    """The monitored database's URL (db 0), emptied by ``r`` first, for the libraries to connect to."""
    return redis_server.url(0)
