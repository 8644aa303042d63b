"""Metric events, written by workers to each stream's own ``{stream}:metrics`` (MAXLEN ~).

One metrics stream per event stream, in the event stream's hash slot (:func:`eventbus.keys.metrics_key`),
rather than one ``eventbus:metrics`` for all: on a Redis Cluster a single key would carry every
worker's metric traffic to one node, and lose every metric while that node is away. Workers before
this naming wrote ``eventbus:metrics``; readers should read both for a migration window.

Every metric entry has these fields (all text):

=================  ===========================================================================
``event``          ``processed``, ``failed``, ``retried``, ``dead_lettered``, ``reclaimed`` or
                   ``dropped`` (an entry deleted from its stream while it was pending)
``stream``         the event's stream
``group``          the consumer group
``type``           the event type (empty when the entry could not be decoded)
``count``          how many events this entry stands for (always >= 1; see below)
``duration_ms``    total handler time of those events, ms (float text; ``0`` when not run)
``max_ms``         the longest of them, ms
``consumer``       the worker's consumer name
``ts``             when the entry was written, ms since the epoch
=================  ===========================================================================

and, on the per-event kinds (everything but ``processed``), ``entry_id``, ``event_id`` and,
for ``failed`` and ``dead_lettered``, ``error``.

``processed`` is aggregated per (stream, group, type) over ``interval`` seconds: one XADD per
processed event would cost a worker about a third of its throughput (measured: an asyncio
pipeline moves ~60k XADDs/s), and a metrics stream as long as the event streams helps nobody.
So a consumer of this stream sums ``count`` rather than counting entries, and gets mean handler
time as ``duration_ms / count``. The rarer kinds are written one entry per event, so an
operator can go from a failure to the entry that failed.
"""

from __future__ import annotations

import time
from dataclasses import dataclass, field

from .codec import now_ms

PROCESSED = "processed"
FAILED = "failed"
RETRIED = "retried"
DEAD_LETTERED = "dead_lettered"
RECLAIMED = "reclaimed"
DROPPED = "dropped"


@dataclass(slots=True)
class _Aggregate:
    count: int = 0
    duration_ms: float = 0.0
    max_ms: float = 0.0


@dataclass(slots=True)
class MetricsBuffer:
    """Collects metric events in memory until the worker's flusher writes them in its pipeline."""

    consumer: str
    interval: float = 1.0
    enabled: bool = True
    _processed: dict[tuple[str, str, str], _Aggregate] = field(default_factory=dict)
    _events: list[dict[str, str]] = field(default_factory=list)
    _window_started: float = field(default_factory=time.monotonic)

    def processed(self, stream: str, group: str, type_: str, duration_ms: float) -> None:
        if not self.enabled:
            return
        key = (stream, group, type_)
        agg = self._processed.get(key)
        if agg is None:
            agg = self._processed[key] = _Aggregate()
        agg.count += 1
        agg.duration_ms += duration_ms
        if duration_ms > agg.max_ms:
            agg.max_ms = duration_ms

    def event(
        self,
        kind: str,
        *,
        stream: str,
        group: str,
        type_: str = "",
        entry_id: str = "",
        event_id: str = "",
        duration_ms: float = 0.0,
        error: str | None = None,
    ) -> None:
        if not self.enabled:
            return
        fields = self._fields(kind, stream, group, type_, 1, duration_ms, duration_ms)
        fields["entry_id"] = entry_id
        fields["event_id"] = event_id
        if error is not None:
            fields["error"] = error
        self._events.append(fields)

    def drain(self, *, force: bool = False) -> list[dict[str, str]]:
        """Metric entries ready to be written: per-event ones always, aggregates once per interval."""
        out, self._events = self._events, []
        now = time.monotonic()
        if self._processed and (force or now - self._window_started >= self.interval):
            for (stream, group, type_), agg in self._processed.items():
                out.append(
                    self._fields(PROCESSED, stream, group, type_, agg.count, agg.duration_ms, agg.max_ms)
                )
            self._processed = {}
            self._window_started = now
        return out

    def _fields(
        self, kind: str, stream: str, group: str, type_: str, count: int, duration_ms: float, max_ms: float
    ) -> dict[str, str]:
        return {
            "event": kind,
            "stream": stream,
            "group": group,
            "type": type_,
            "count": str(count),
            "duration_ms": f"{duration_ms:.3f}",
            "max_ms": f"{max_ms:.3f}",
            "consumer": self.consumer,
            "ts": str(now_ms()),
        }
