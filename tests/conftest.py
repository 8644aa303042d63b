"""Fixtures shared by the whole suite: a clean Redis per test, standing users for each role."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis
from redis.cluster import RedisCluster

from tests.servers import RedisClusterServers, RedisServer


@pytest.fixture
def r(redis_server: RedisServer) -> Iterator[redis.Redis]:
    """A raw client on the monitored database (db 0), emptied before each test."""
    client = redis.Redis.from_url(redis_server.url(0))
    client.flushdb()
    yield client
    client.close()


@pytest.fixture
def cluster(redis_cluster_servers: RedisClusterServers) -> Iterator[RedisClusterServers]:
    """The session's real 3-primary Redis Cluster, emptied before each test."""
    redis_cluster_servers.flush()
    yield redis_cluster_servers


@pytest.fixture
def rc(cluster: RedisClusterServers) -> Iterator[RedisCluster]:
    """A raw redis-py cluster client on :func:`cluster` (bytes out), for arranging and checking."""
    client = RedisCluster.from_url(cluster.url())
    yield client
    client.close()


@pytest.fixture
def spare_redis() -> Iterator[RedisServer]:
    """A second redis-server of the test's own, which it may stop to see what the console does."""
    server = RedisServer().start()
    yield server
    server.cleanup()


class AsgiServer:
    """busconsole's real ASGI application served by uvicorn on 127.0.0.1 in a thread."""

    def __init__(self) -> None:
        import threading

        import uvicorn

        from tests.servers import free_port

        self.port = free_port()
        self.url = f"http://127.0.0.1:{self.port}"
        config = uvicorn.Config(
            "busconsole.asgi:application", host="127.0.0.1", port=self.port, log_level="warning",
            ws="websockets", lifespan="off",
        )
        self._server = uvicorn.Server(config)
        self._server.install_signal_handlers = lambda: None  # type: ignore[attr-defined]  # uvicorn's Server has it as an instance attribute its typing leaves out  # not the main thread
        self._thread = threading.Thread(target=self._server.run, name="asgi-server", daemon=True)

    def start(self) -> AsgiServer:
        import time

        self._thread.start()
        deadline = time.monotonic() + 15
        while not self._server.started:
            if time.monotonic() > deadline or not self._thread.is_alive():
                raise RuntimeError("uvicorn did not start")
            time.sleep(0.02)
        return self

    def stop(self) -> None:
        self._server.should_exit = True
        self._thread.join(10)


@pytest.fixture
def asgi_server(transactional_db) -> Iterator[AsgiServer]:
    """A live ASGI server for tests that need real HTTP or websockets (and the raw request path)."""
    server = AsgiServer().start()
    yield server
    server.stop()


def session_cookie(user) -> dict[str, str]:
    """Cookies of a logged-in session for ``user``, for HTTP clients other than Django's."""
    from django.conf import settings
    from django.test import Client

    client = Client()
    client.force_login(user)
    return {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}


#: Directories whose every test carries a marker, so that a new file there cannot miss it (``make test-fast``
#: deselects by marker).
DIRECTORY_MARKERS = {"browser": "browser", "cluster": "cluster"}
#: Fixtures that start a Redis Cluster (the session's, or a test's own): a test using one is marked ``cluster``.
CLUSTER_FIXTURES = {"redis_cluster_servers", "own_cluster"}


def pytest_collection_modifyitems(config, items) -> None:
    """Mark every test under tests/browser/ and tests/cluster/, and every test elsewhere that starts a Redis
    Cluster (about 2 s), then run the browser tests last: Playwright's
    sync API keeps an event loop running in the main thread for as long as the browser lives, and
    async_to_sync (used by other tests) refuses to run there."""
    here = Path(__file__).parent
    for item in items:
        parts = item.path.relative_to(here).parts if item.path.is_relative_to(here) else ()
        if parts and (marker := DIRECTORY_MARKERS.get(parts[0])) and not item.get_closest_marker(marker):
            item.add_marker(getattr(pytest.mark, marker))
        if CLUSTER_FIXTURES & set(getattr(item, "fixturenames", ())) and not item.get_closest_marker("cluster"):
            item.add_marker(pytest.mark.cluster)
    items.sort(key=lambda item: item.get_closest_marker("browser") is not None)
