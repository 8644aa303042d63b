"""Fixtures for the live tests: the session cookie of a logged-in viewer, for websocket handshakes."""

from __future__ import annotations

import pytest

from tests.conftest import session_cookie


@pytest.fixture
def cookies(viewer) -> dict[str, str]:
    return session_cookie(viewer)
