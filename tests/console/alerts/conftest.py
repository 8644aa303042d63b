"""The tick the alert tests stamp their snapshots from."""

from __future__ import annotations

from datetime import datetime, timedelta

import pytest
from django.utils import timezone

from streams_app.metrics import snapshots


@pytest.fixture
def base() -> datetime:
    """A tick-aligned time two hours ago: the tests stamp their snapshots from here on."""
    return snapshots.snapshot_tick_for(now=timezone.now() - timedelta(hours=2), interval_s=10)
