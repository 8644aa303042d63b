"""TLS servers of the tests' own, with certificates made by ``openssl`` (:mod:`tests.tls.pki`).

``tls_server`` requires a client certificate signed by the test CA (``tls-auth-clients yes``), as a
managed Redis with mutual TLS does; ``expired_server`` and ``wrong_name_server`` present a certificate
of the right CA that is expired, or names another host. Each keeps a plain port for the test's own
arranging (``plain``), never used by what is under test. The console's fixtures (standing users, fresh
state) come from the console's conftest, as in ``tests/security``.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from tests.console.conftest import *  # noqa: F403
from tests.console.conftest import (  # noqa: F401
    _clean_login_throttle,
    _fast_password_hashing,
    _fresh_console_state,
)
from tests.servers import TlsRedisServer
from tests.tls.pki import Pki, make_pki


@pytest.fixture(scope="session")
def pki(tmp_path_factory: pytest.TempPathFactory) -> Pki:
    return make_pki(Path(tmp_path_factory.mktemp("pki")))


def client_params(pki: Pki, *, ca: Path | None = None, cert: bool = True) -> dict[str, str]:
    """The URL parameters of a client of ``tls_server``: the CA, and its certificate unless ``cert=False``."""
    params = {"ssl_ca_certs": str(ca or pki.ca)}
    if cert:
        params |= {"ssl_certfile": str(pki.client.cert), "ssl_keyfile": str(pki.client.key)}
    return params


def _server(pki: Pki, cert: Path, key: Path) -> TlsRedisServer:
    return TlsRedisServer(cert=str(cert), key=str(key), ca=str(pki.ca)).start()


@pytest.fixture(scope="session")
def tls_server(pki: Pki) -> Iterator[TlsRedisServer]:
    server = _server(pki, pki.server.cert, pki.server.key)
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def expired_server(pki: Pki) -> Iterator[TlsRedisServer]:
    server = _server(pki, pki.expired.cert, pki.expired.key)
    yield server
    server.cleanup()


@pytest.fixture(scope="session")
def wrong_name_server(pki: Pki) -> Iterator[TlsRedisServer]:
    server = _server(pki, pki.wrong_name.cert, pki.wrong_name.key)
    yield server
    server.cleanup()


@pytest.fixture
def plain(tls_server: TlsRedisServer) -> Iterator[redis.Redis]:
    """The test's own client on ``tls_server``'s plain port, db 0, emptied first."""
    client = redis.Redis.from_url(tls_server.url(0))
    client.flushall()
    yield client
    client.close()
