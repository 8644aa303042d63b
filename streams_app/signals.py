"""What the console announces to the rest of itself.

:data:`snapshot_taken` is sent once per snapshot tick, after its samples are committed, with
``tick=<datetime>`` and ``run=<SnapshotRun>``: the alert rules connect to it, so they evaluate exactly the
data a chart will show. Then :func:`streams_app.live.broadcast.snapshot_broadcast` tells open pages over
the channel layer, with a small event only, so they refetch.
"""

from __future__ import annotations

import django.dispatch

snapshot_taken = django.dispatch.Signal()
"""Sent with ``tick`` (datetime) and ``run`` (SnapshotRun) after each snapshot is committed."""
