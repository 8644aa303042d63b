"""The bus every action test in this package acts on (see ``helpers.orders_bus``)."""

from __future__ import annotations

from types import SimpleNamespace

import pytest
import redis

from tests.console.services.helpers import orders_bus


@pytest.fixture
def bus(r: redis.Redis) -> SimpleNamespace:
    return orders_bus(r)
