"""Sentinel deployments of the tests' own: a primary, a replica and three real sentinels on free ports.

``sentinels`` is shared by the tests of a module that do not kill anything; ``failover`` is a fresh
deployment per test with two replicas, which the test may kill the primary of
(:meth:`SentinelServers.kill_primary`).
The console's fixtures (standing users, fresh state) come from the console's conftest.
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from streams_app.redis_ops import client as redis_client
from tests.console.conftest import *  # noqa: F403
from tests.console.conftest import (  # noqa: F401
    _clean_login_throttle,
    _fast_password_hashing,
    _fresh_console_state,
)
from tests.servers import SentinelServers


@pytest.fixture(scope="module")
def sentinels() -> Iterator[SentinelServers]:
    servers = SentinelServers().start()
    yield servers
    servers.cleanup()


@pytest.fixture
def failover() -> Iterator[SentinelServers]:
    # Two replicas: after one is promoted the other follows it, so writes can still wait for a replica.
    servers = SentinelServers(replicas=2).start()
    yield servers
    servers.cleanup()


def plain_primary(servers: SentinelServers, db: int = 0) -> redis.Redis:
    """A plain client on the present primary (found by asking a sentinel), for arranging and checking."""
    return redis.Redis(port=servers.primary().port, db=db)


@pytest.fixture
def on_sentinel(settings, sentinels: SentinelServers) -> Iterator[redis.Redis]:
    """The console's ``default`` connection on the Sentinel service (db 0), and a plain client on its primary."""
    settings.BUS_REDIS_URLS = {"default": sentinels.url(0)}
    redis_client.reset()
    client = plain_primary(sentinels)
    client.flushdb()
    yield client
    client.close()
    redis_client.reset()
