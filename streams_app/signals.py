"""What the console announces to the rest of itself.

:data:`snapshot_taken` is sent once per snapshot tick, after its samples are committed, with
``tick=<datetime>`` and ``run=<SnapshotRun>``: the alert rules connect to it, so they evaluate exactly the
data a chart will show. Then :func:`streams_app.live.broadcast.snapshot_broadcast` tells open pages over
the channel layer, with a small event only, so they refetch.
"""

from __future__ import annotations

import django.dispatch

# Re-exported for tests/browser/test_charts.py, which announces a snapshot by hand.
from streams_app.live.broadcast import snapshot_broadcast

__all__ = ["snapshot_broadcast", "snapshot_taken"]

snapshot_taken = django.dispatch.Signal()
"""Sent with ``tick`` (datetime) and ``run`` (SnapshotRun) after each snapshot is committed."""
