"""Handler metrics from the event bus's ``eventbus:metrics`` stream (see :mod:`eventbus.metrics`).

Per (stream, group, event type) over a recent window: how many events were processed and failed,
as counts and per-second rates, and the handler duration's p50 / p95 / max.

Reading is bounded: ``XREVRANGE eventbus:metrics + <now - window>`` in batches of ``BATCH``, at most
``MAX_ENTRIES`` entries in all, so a huge metrics stream costs a bounded amount of Redis time; when
the cap cuts the window short, rates are computed over the span actually read and ``truncated`` says
so. The result for one (connection, window) is kept a few seconds per process and reused only while
the stream's newest entry is unchanged, so several panels on one page cost one read.

Percentiles use the nearest-rank definition: the p-th percentile of N handler runs is the smallest
duration d such that at least ceil(p/100 x N) runs took d or less (rank 1 for N >= 1). Workers write
successful runs aggregated per (stream, group, type) and flush interval (``count`` runs whose total
time is ``duration_ms``), so each such entry counts as ``count`` runs of its mean duration; failed
runs are written one entry per run with their own duration and count as themselves. Percentiles are
therefore exact for failures and interval-mean approximations for successes; ``max`` is exact (the
bus keeps each interval's longest run in ``max_ms``). Dead-lettered, retried, reclaimed and dropped
entries did not run a handler and only add to their counters.
"""

from __future__ import annotations

import math
import threading
import time
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field

from .client import get_client
from .errors import translated
from .ids import id_ms

METRICS_STREAM = b"eventbus:metrics"  # eventbus.keys.METRICS_STREAM
BATCH = 5_000
MAX_ENTRIES = 50_000
WINDOWS_S: dict[str, int] = {"5m": 300, "15m": 900, "1h": 3600}
DEFAULT_WINDOW = "5m"
_CACHE_TTL_S = 5.0
_CACHE_MAX = 32

KINDS = ("processed", "failed", "retried", "dead_lettered", "reclaimed", "dropped")


@dataclass(frozen=True, slots=True)
class HandlerStats:
    """One (stream, group, event type) over the window. Names are raw bytes as the bus wrote them."""

    stream: bytes
    group: bytes
    type: bytes
    processed: int
    failed: int
    retried: int
    dead_lettered: int
    reclaimed: int
    dropped: int
    processed_per_s: float
    failed_per_s: float
    p50_ms: float | None
    p95_ms: float | None
    max_ms: float | None

    @property
    def failure_ratio(self) -> float | None:
        runs = self.processed + self.failed
        return self.failed / runs if runs else None


@dataclass(frozen=True, slots=True)
class HandlerMetrics:
    window_s: int
    span_s: float  # seconds the rates are over: the window, or less when the read was capped
    entries_read: int
    truncated: bool
    rows: tuple[HandlerStats, ...]

    def for_stream(self, stream: bytes, group: bytes | None = None) -> tuple[HandlerStats, ...]:
        return tuple(r for r in self.rows if r.stream == stream and (group is None or r.group == group))


def nearest_rank(samples: Sequence[tuple[float, int]], p: float) -> float | None:
    """The p-th percentile (0 < p <= 100) of weighted samples ``(value, weight)`` by nearest rank."""
    total = sum(w for _, w in samples if w > 0)
    if total == 0:
        return None
    rank = max(1, math.ceil(p / 100 * total))
    seen = 0
    for value, weight in sorted(samples):
        if weight <= 0:
            continue
        seen += weight
        if seen >= rank:
            return value
    return None  # unreachable: seen reaches total >= rank


@dataclass(slots=True)
class _Acc:
    counts: dict[str, int] = field(default_factory=lambda: dict.fromkeys(KINDS, 0))
    durations: list[tuple[float, int]] = field(default_factory=list)
    max_ms: float | None = None


def _float(value: bytes | None) -> float:
    try:
        return float(value) if value is not None else 0.0
    except ValueError:
        return 0.0


def _count(value: bytes | None) -> int:
    try:
        return max(1, int(value)) if value is not None else 1
    except ValueError:
        return 1


def aggregate(entries: Iterable[dict[bytes, bytes]], *, span_s: float) -> list[HandlerStats]:
    """Handler stats of metric entries (field dicts as the bus writes them), rates over ``span_s``."""
    accs: dict[tuple[bytes, bytes, bytes], _Acc] = {}
    for fields in entries:
        kind = fields.get(b"event", b"").decode("ascii", "replace")
        if kind not in KINDS:
            continue
        key = (fields.get(b"stream", b""), fields.get(b"group", b""), fields.get(b"type", b""))
        acc = accs.get(key)
        if acc is None:
            acc = accs[key] = _Acc()
        count = _count(fields.get(b"count"))
        acc.counts[kind] += count
        if kind in ("processed", "failed"):
            total_ms = _float(fields.get(b"duration_ms"))
            acc.durations.append((total_ms / count, count))
            longest = _float(fields.get(b"max_ms")) if b"max_ms" in fields else total_ms
            acc.max_ms = longest if acc.max_ms is None else max(acc.max_ms, longest)
    span = max(span_s, 1e-9)
    rows = [
        HandlerStats(
            stream=stream,
            group=group,
            type=type_,
            processed=acc.counts["processed"],
            failed=acc.counts["failed"],
            retried=acc.counts["retried"],
            dead_lettered=acc.counts["dead_lettered"],
            reclaimed=acc.counts["reclaimed"],
            dropped=acc.counts["dropped"],
            processed_per_s=acc.counts["processed"] / span,
            failed_per_s=acc.counts["failed"] / span,
            p50_ms=nearest_rank(acc.durations, 50),
            p95_ms=nearest_rank(acc.durations, 95),
            max_ms=acc.max_ms,
        )
        for (stream, group, type_), acc in accs.items()
    ]
    rows.sort(key=lambda r: (r.stream, r.group, r.type))
    return rows


def _read_window(conn: str, since_ms: int, *, max_entries: int) -> tuple[list[dict[bytes, bytes]], int | None, bool]:
    """Entries of the metrics stream with IDs at or after ``since_ms``, newest first, capped.

    Returns the entries' fields, the millisecond time of the oldest entry read and whether the cap
    stopped the read before the window's start.
    """
    client = get_client(conn)
    out: list[dict[bytes, bytes]] = []
    upper: bytes | str = "+"
    oldest_ms: int | None = None
    with translated(conn):
        while len(out) < max_entries:
            batch = client.xrevrange(METRICS_STREAM, upper, f"{since_ms}-0", count=min(BATCH, max_entries - len(out)))
            if not batch:
                return out, oldest_ms, False
            for _entry_id, raw in batch:
                flat = raw or []
                out.append({flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)})
            last_id = batch[-1][0]
            oldest_ms = id_ms(last_id.decode())
            if len(batch) < BATCH and len(out) < max_entries:
                return out, oldest_ms, False
            upper = b"(" + last_id
        # The cap was reached: the window was cut short only if an older entry remains inside it.
        more = client.xrevrange(METRICS_STREAM, upper, f"{since_ms}-0", count=1)
    return out, oldest_ms, bool(more)


_cache: dict[tuple[str, int], tuple[float, bytes | None, HandlerMetrics]] = {}
_cache_lock = threading.Lock()


def handler_metrics(
    conn: str, *, window_s: int, now_ms: int | None = None, max_entries: int = MAX_ENTRIES, fresh: bool = False
) -> HandlerMetrics:
    """Handler stats of every (stream, group, type) seen in the last ``window_s`` seconds."""
    client = get_client(conn)
    with translated(conn):
        newest = client.xrevrange(METRICS_STREAM, "+", "-", count=1)
    newest_id = newest[0][0] if newest else None
    key = (conn, window_s)
    if not fresh and now_ms is None:
        with _cache_lock:
            cached = _cache.get(key)
        if cached and cached[1] == newest_id and time.monotonic() - cached[0] < _CACHE_TTL_S:
            return cached[2]
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    since = max(0, now - window_s * 1000)
    if newest_id is None:
        entries: list[dict[bytes, bytes]] = []
        oldest, truncated = None, False
    else:
        entries, oldest, truncated = _read_window(conn, since, max_entries=max_entries)
    span_s = (now - oldest) / 1000 if truncated and oldest is not None else float(window_s)
    result = HandlerMetrics(
        window_s=window_s,
        span_s=span_s,
        entries_read=len(entries),
        truncated=truncated,
        rows=tuple(aggregate(entries, span_s=span_s)),
    )
    if now_ms is None:
        with _cache_lock:
            if len(_cache) >= _CACHE_MAX:
                _cache.clear()
            _cache[key] = (time.monotonic(), newest_id, result)
    return result
