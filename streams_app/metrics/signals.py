"""What the metrics announce to the rest of the console.

:data:`snapshot_taken` is sent by :mod:`streams_app.metrics.snapshots` once per snapshot tick, after its
samples are committed, with ``tick=<datetime>`` and ``run=<SnapshotRun>``. The alert rules connect to it
(:func:`streams_app.alerts.evaluation.connect`, called by ``StreamsAppConfig.ready``), so they evaluate
exactly the data a chart will show; then the sender tells open pages over the channel layer
(:func:`streams_app.live.broadcast.snapshot_broadcast`, a small event only, so they refetch). The signal
lives here, with its sender, so that its receivers import metrics and metrics imports none of them.
"""

from __future__ import annotations

import django.dispatch

snapshot_taken = django.dispatch.Signal()
"""Sent with ``tick`` (datetime) and ``run`` (SnapshotRun) after each snapshot is committed."""

family_members_named = django.dispatch.Signal()
"""Sent with ``conn`` by a family-mode snapshot tick and mirror sync (:mod:`.family_ticks`): each receiver
returns the stream keys (bytes) that must keep their per-stream rows on that connection (the alert rules
name theirs, :mod:`streams_app.alerts.family_members`)."""
