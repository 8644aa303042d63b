"""What the metrics announce to the rest of the console.

:data:`snapshot_taken` is sent by :mod:`streams_app.metrics.snapshots` once per snapshot tick, after its
samples are committed, with ``tick=<datetime>`` and ``run=<SnapshotRun>``. The alert rules connect to it
(:func:`streams_app.alerts.evaluation.connect`, called by ``StreamsAppConfig.ready``), so they evaluate
exactly the data a chart will show; then the sender tells open pages over the channel layer
(:func:`streams_app.live.broadcast.snapshot_broadcast`, a small event only, so they refetch). The signal
lives here, with its sender, so that its receivers import metrics and metrics imports none of them.
"""

from __future__ import annotations

from dataclasses import dataclass

import django.dispatch

snapshot_taken = django.dispatch.Signal()
"""Sent with ``tick`` (datetime) and ``run`` (SnapshotRun) after each snapshot is committed."""

family_members_named = django.dispatch.Signal()
"""Sent with ``conn`` by a family-mode snapshot tick and mirror sync (:mod:`.family_ticks`): each receiver
returns the stream keys (bytes) that must keep their per-stream rows on that connection (the alert rules
name theirs, :mod:`streams_app.alerts.family_members`)."""

family_members_watched = django.dispatch.Signal()
"""Sent with ``conn`` by a family-mode snapshot tick (:mod:`.family_ticks`): each receiver returns
:class:`MemberWatch` items, the stream globs whose members the rolling pass keeps when it finds them in a
state the watcher could fire on (the alert rules over a glob, :mod:`streams_app.alerts.family_members`)."""


@dataclass(frozen=True, slots=True)
class MemberWatch:
    """Keep the members whose key matches ``stream_glob`` (Redis's glob, on the raw bytes) and one of whose
    groups matching ``group_glob`` has lag above ``lag_above`` (None: lag does not matter) or, when
    ``pending`` is set, pending entries."""

    stream_glob: str
    group_glob: str = "*"
    lag_above: float | None = None
    pending: bool = False
