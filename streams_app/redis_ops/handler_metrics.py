"""Handler metrics from the event bus's metric streams (see :mod:`eventbus.metrics`).

Per (stream, group, event type) over a recent window: how many events were processed and failed,
as counts and per-second rates, and the handler duration's p50 / p95 / max.

Where the metrics are: each stream's own ``{stream}:metrics`` (in the stream's hash slot, see
:mod:`eventbus.keys`), and, for a migration window, the single ``eventbus:metrics`` that workers
before the cluster naming wrote. The panel of one stream reads that stream's key and the old one by
name; a read of every stream finds the metric streams with ``SCAN MATCH *:metrics TYPE stream`` on
every primary (bounded: ``SCAN_BUDGET`` keys looked at per node, at most ``MAX_SOURCES`` streams,
and ``partial`` says when a bound cut it short).

Reading is bounded: newest first, ``XREVRANGE <key> + <now - window>`` in pipelined rounds over all
the keys (one round trip per round, split by node on a cluster), at most ``MAX_ENTRIES`` entries in
all (plus at most one per metric stream in the last round), so huge metrics streams cost a bounded
amount of Redis time. When the cap cuts the window
short, the entries kept are exactly those from the newest point every key was read back to, rates
are computed over that span and ``truncated`` says so. The result for one (connection, window,
stream) is kept a few seconds per process and reused only while the newest entry of every key it
read is unchanged, so several panels on one page cost one read.

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

from eventbus import keys as bus_keys
from eventbus.text import id_order

from .client import get_client, primaries
from .errors import translated

#: The pre-cluster metrics stream of every stream, read during the migration window.
METRICS_STREAM = bus_keys.METRICS_STREAM.encode()
METRICS_SUFFIX = bus_keys.METRICS_SUFFIX.encode()
BATCH = 5_000
MAX_ENTRIES = 50_000
#: Metric streams read at most by a read of every stream; keys SCAN looks at per node at most.
MAX_SOURCES = 2_000
SCAN_BUDGET = 1_000_000
SCAN_COUNT = 1_000
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


@dataclass(frozen=True, slots=True)
class HandlerMetrics:
    window_s: int
    span_s: float  # seconds the rates are over: the window, or less when the read was capped
    entries_read: int
    truncated: bool
    rows: tuple[HandlerStats, ...]
    #: metric streams read (the old ``eventbus:metrics`` included)
    sources: int = 0
    #: the search for metric streams stopped at a bound: streams it did not reach are left out
    partial: bool = False

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


def metrics_sources(conn: str, stream: bytes | None = None) -> tuple[list[bytes], bool]:
    """The metric streams to read, and whether finding them stopped at a bound.

    For one ``stream``: its ``{stream}:metrics`` and the old ``eventbus:metrics``, by name. For every
    stream: each primary's ``*:metrics`` streams by SCAN (SCAN answers for one node only).
    """
    if stream is not None:
        return [bus_keys.metrics_key(stream), METRICS_STREAM], False
    found: dict[bytes, None] = {METRICS_STREAM: None}
    partial = False
    with translated(conn):
        for node in primaries(conn):
            cursor, scanned = 0, 0
            while True:
                cursor, batch = node.client.execute_command(
                    "SCAN", cursor, "MATCH", b"*" + METRICS_SUFFIX, "COUNT", SCAN_COUNT, "TYPE", "stream"
                )
                cursor, scanned = int(cursor), scanned + SCAN_COUNT
                found.update(dict.fromkeys(batch))
                if len(found) >= MAX_SOURCES:
                    return list(found)[:MAX_SOURCES], True
                if cursor == 0:
                    break
                if scanned >= SCAN_BUDGET:
                    partial = True
                    break
    return list(found), partial


def _read_window(
    conn: str, sources: Sequence[bytes], since_ms: int, *, max_entries: int
) -> tuple[list[dict[bytes, bytes]], int | None, bool]:
    """Entries of ``sources`` with IDs at or after ``since_ms``, newest first per key, capped in all.

    Each round asks every key not yet read to the window's start for its next older batch (one
    pipeline). When the cap stops the rounds, the entries kept are those at or after the newest
    point any unfinished key was read back to (the *cutoff*): every key is complete from there on,
    so rates over ``now - cutoff`` are exact. Returns the entries' fields, the millisecond time of
    the cutoff (or of the oldest entry read) and whether the window was cut short.
    """
    client = get_client(conn)
    since = f"{since_ms}-0"
    upper: dict[bytes, bytes] = dict.fromkeys(sources, b"+")  # keys that may have older entries
    frontier: dict[bytes, bytes] = {}  # the oldest ID read of each key
    read: list[tuple[bytes, bytes, dict[bytes, bytes]]] = []  # (key, id, fields)
    with translated(conn):
        while upper and len(read) < max_entries:
            count = max(1, min(BATCH, (max_entries - len(read)) // len(upper)))
            pipe = client.pipeline(transaction=False)
            order = list(upper)
            for key in order:
                pipe.xrevrange(key, upper[key], since, count=count)
            for key, batch in zip(order, pipe.execute(), strict=True):
                for entry_id, raw in batch:
                    flat = raw or []
                    read.append((key, entry_id, {flat[i]: flat[i + 1] for i in range(0, len(flat) - 1, 2)}))
                if batch:
                    frontier[key] = batch[-1][0]
                if len(batch) < count:
                    del upper[key]  # read to the window's start
                else:
                    upper[key] = b"(" + batch[-1][0]
        more = False
        if upper:  # the cap was reached: cut short only if an unfinished key has an older entry
            pipe = client.pipeline(transaction=False)
            for key in upper:
                pipe.xrevrange(key, upper[key], since, count=1)
            more = any(pipe.execute())
    if not more:
        oldest = min((id_order(entry_id) for _, entry_id, _ in read), default=None)
        return [fields for _, _, fields in read], oldest[0] if oldest else None, False
    cutoff = max(id_order(frontier[key]) for key in upper)
    kept = [fields for _, entry_id, fields in read if id_order(entry_id) >= cutoff]
    return kept, cutoff[0], True


def _newest(conn: str, sources: Sequence[bytes]) -> tuple[bytes | None, ...]:
    """The newest entry ID of each source (None for an empty or missing one), in one pipeline."""
    client = get_client(conn)
    with translated(conn):
        pipe = client.pipeline(transaction=False)
        for key in sources:
            pipe.xrevrange(key, "+", "-", count=1)
        return tuple(rows[0][0] if rows else None for rows in pipe.execute())


_cache: dict[tuple[str, int, bytes | None], tuple[float, tuple[bytes | None, ...], HandlerMetrics, list[bytes], bool]] = {}
_cache_lock = threading.Lock()


def handler_metrics(
    conn: str,
    *,
    window_s: int,
    stream: bytes | None = None,
    now_ms: int | None = None,
    max_entries: int = MAX_ENTRIES,
    fresh: bool = False,
) -> HandlerMetrics:
    """Handler stats of every (stream, group, type) seen in the last ``window_s`` seconds.

    With ``stream``, only that stream's metric streams are read (its rows, plus any other stream's
    rows the old shared ``eventbus:metrics`` holds: :meth:`HandlerMetrics.for_stream` picks).
    """
    key = (conn, window_s, stream)
    cached = None
    if not fresh and now_ms is None:
        with _cache_lock:
            cached = _cache.get(key)
        if cached and time.monotonic() - cached[0] >= _CACHE_TTL_S:
            cached = None
    sources, partial = (cached[3], cached[4]) if cached else metrics_sources(conn, stream)
    newest = _newest(conn, sources)
    if cached and cached[1] == newest:
        return cached[2]
    now = now_ms if now_ms is not None else int(time.time() * 1000)
    since = max(0, now - window_s * 1000)
    if not any(newest):
        entries: list[dict[bytes, bytes]] = []
        oldest, truncated = None, False
    else:
        live = [source for source, newest_id in zip(sources, newest, strict=True) if newest_id is not None]
        entries, oldest, truncated = _read_window(conn, live, since, max_entries=max_entries)
    span_s = (now - oldest) / 1000 if truncated and oldest is not None else float(window_s)
    result = HandlerMetrics(
        window_s=window_s,
        span_s=span_s,
        entries_read=len(entries),
        truncated=truncated,
        rows=tuple(aggregate(entries, span_s=span_s)),
        sources=sum(1 for newest_id in newest if newest_id is not None),
        partial=partial,
    )
    if now_ms is None:
        with _cache_lock:
            if len(_cache) >= _CACHE_MAX:
                _cache.clear()
            _cache[key] = (time.monotonic(), newest, result, sources, partial)
    return result
