"""The action tests' bus, for the account tests that log in and press a button or open a stream page."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import redis

from tests.console.services.helpers import orders_bus


@pytest.fixture
def bus(r: redis.Redis) -> SimpleNamespace:
    return orders_bus(r)
