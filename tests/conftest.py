"""Fixtures shared by the whole suite: a clean Redis per test, standing users for each role."""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from tests.servers import RedisServer


@pytest.fixture
def r(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A raw client on the monitored database (db 0), emptied before each test."""
    client = redis.Redis.from_url(redis_server.url(0))
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def spare_redis() -> Iterator[RedisServer]:
    """A second redis-server of the test's own, which it may stop to see what the console does."""
    server = RedisServer().start()
    yield server
    server.cleanup()
