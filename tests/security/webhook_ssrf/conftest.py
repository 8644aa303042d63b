"""Every webhook SSRF test runs with simulated DNS (``dns``, autouse) and may ask for a counting listener."""

from __future__ import annotations

import socket
from collections.abc import Iterator

import pytest

from tests.security.webhook_ssrf.helpers import FakeDns, Listener


@pytest.fixture
def listener() -> Iterator[Listener]:
    server = Listener()
    yield server
    server.close()


@pytest.fixture(autouse=True)
def dns(monkeypatch: pytest.MonkeyPatch) -> FakeDns:
    fake = FakeDns(socket.getaddrinfo)
    monkeypatch.setattr(socket, "getaddrinfo", fake)
    return fake
