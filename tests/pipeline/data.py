"""Generated bus history for the pipeline tests: written to the real Redis, kept in Python for the answers.

Each generator returns plain tuples that the test both writes (XADD with explicit IDs, so times are
chosen, not "now") and counts itself. Seeded, so a failure reproduces.
"""

from __future__ import annotations

import json
import random
from collections.abc import Iterable
from dataclasses import dataclass

HOUR_MS = 3_600_000
DAY_MS = 24 * HOUR_MS
T0 = 1_767_571_200_000  # 2026-01-05T00:00:00Z, a Monday


@dataclass(frozen=True)
class Entry:
    key: bytes
    id: str
    fields: tuple[tuple[bytes, bytes], ...]

    @property
    def ms(self) -> int:
        return int(self.id.split("-")[0])


def write(r, entries: Iterable[Entry]) -> None:
    pipe = r.pipeline(transaction=False)
    for n, entry in enumerate(entries, 1):
        pipe.execute_command("XADD", entry.key, entry.id, *(x for pair in entry.fields for x in pair))
        if n % 1000 == 0:
            pipe.execute()
    pipe.execute()


def _ids(times: list[int]) -> list[str]:
    """Sorted times as unique, increasing IDs (several entries in one ms get seq 0, 1, ...)."""
    out, last, seq = [], None, 0
    for ms in sorted(times):
        seq = seq + 1 if ms == last else 0
        last = ms
        out.append(f"{ms}-{seq}")
    return out


def traffic(seed: int = 7) -> list[Entry]:
    """Two streams (one binary key) over three hours, four event types, one of them absent."""
    rng = random.Random(seed)
    out = []
    for key, n in ((b"orders", 900), (b"bin\xfekey", 400)):
        times = [T0 + 10 * HOUR_MS + rng.randrange(3 * HOUR_MS) for _ in range(n)]
        for entry_id in _ids(times):
            kind = rng.choice([b"order.created", b"order.paid", "ünïcode".encode(), None])
            data = json.dumps({"pad": "x" * rng.randrange(50)}).encode()
            fields = ((b"type", kind), (b"data", data)) if kind else ((b"data", data), (b"other", b"\xff"))
            out.append(Entry(key, entry_id, fields))
    return out


def metrics(seed: int = 11) -> list[Entry]:
    """``eventbus:metrics`` entries as workers write them: aggregated ``processed``, per-event kinds."""
    rng = random.Random(seed)
    rows: list[tuple[int, dict[str, str]]] = []
    for stream in ("orders", "payments"):
        for group in ("billing", "audit"):
            for type_ in ("order.created", "order.paid"):
                for hour in range(3):
                    base = T0 + (10 + hour) * HOUR_MS
                    for _ in range(rng.randrange(1, 8)):
                        count = rng.randrange(1, 30)
                        per = [rng.choice([0.5, 1.25, 2.0, 7.5, 40.0]) * rng.random() for _ in range(count)]
                        rows.append((base + rng.randrange(HOUR_MS), _metric(
                            "processed", stream, group, type_, count, sum(per), max(per))))
                    for _ in range(rng.randrange(0, 3)):
                        took = rng.random() * 100
                        rows.append((base + rng.randrange(HOUR_MS), _metric(
                            "failed", stream, group, type_, 1, took, took, error="ValueError: x")))
                    for kind in ("retried", "dead_lettered", "reclaimed"):
                        rows.append((base + rng.randrange(HOUR_MS), _metric(kind, stream, group, type_, 1, 0, 0)))
    rows.sort(key=lambda row: row[0])
    ids = _ids([ms for ms, _ in rows])
    return [
        Entry(b"eventbus:metrics", entry_id, tuple((k.encode(), v.encode()) for k, v in fields.items()))
        for entry_id, (_, fields) in zip(ids, rows, strict=True)
    ]


def _metric(
    event: str, stream: str, group: str, type_: str, count: int, duration: float, longest: float, **extra: str
) -> dict[str, str]:
    return {
        "event": event, "stream": stream, "group": group, "type": type_, "count": str(count),
        "duration_ms": f"{duration:.3f}", "max_ms": f"{longest:.3f}", "consumer": "w1", "ts": "0", **extra,
    }


ERRORS = (
    lambda rng: f"ValueError: order {rng.randrange(10**6)} not found",
    lambda rng: f"KeyError: 'sku-{rng.randrange(100)}'",
    lambda rng: f"app.errors.Declined: card {rng.randrange(16**12):012x}ab declined",
    lambda rng: f"TimeoutError: call to 10.0.0.{rng.randrange(9)}:6379 timed out after {rng.random():.2f}s",
    lambda rng: "RuntimeError: worker crashed",
)


@dataclass(frozen=True)
class DeadLetter:
    """What the test expects the conventions to read from the entry it wrote."""

    entry: Entry
    stream: bytes
    error: str | None
    retries: int | None
    failed_ms: int


def dead_letters(seed: int = 5) -> list[DeadLetter]:
    """DLQ entries of three conventions: ours (two streams), OmniDaemon, the seed ``streams`` module."""
    rng = random.Random(seed)
    out: list[DeadLetter] = []
    for stream, n in ((b"orders", 120), (b"payments", 60)):
        weights = [rng.random() for _ in ERRORS]
        times = sorted(rng.sample(range(T0, T0 + DAY_MS), n))
        for entry_id, failed in zip(_ids([t + 5 for t in times]), times, strict=True):
            error = rng.choices(ERRORS, weights)[0](rng)
            retries = rng.choice([0, 1, 3, 5, 5, 5])
            fields = (
                (b"type", b"order.created"), (b"data", b"{}"), (b"dlq_original_stream", stream),
                (b"dlq_original_id", b"1-0"), (b"dlq_group", b"billing"), (b"dlq_error", error.encode()),
                (b"dlq_traceback", b"..."), (b"dlq_retries", str(retries).encode()),
                (b"dlq_failed_at", str(failed).encode()),
            )
            out.append(DeadLetter(Entry(stream + b":dlq", entry_id, fields), stream, error, retries, failed))
    for i in range(8):
        failed = T0 + 1000 * i
        doc = {"topic": "t", "original_stream": "omni-stream:t", "original_id": "1-0", "failed_message": {},
               "error": f"boom {i % 2} times", "retry_count": i % 3, "failed_at": failed / 1000}
        out.append(DeadLetter(Entry(b"omni-dlq:group:t:agent", f"{failed + 7}-0", ((b"data", json.dumps(doc).encode()),)),
                              b"omni-stream:t", f"boom {i % 2} times", i % 3, failed))
    for i in range(4):
        ms = T0 + 5000 + i
        retries = None if i == 3 else i
        fields = ((b"type", b"job"),) + (() if retries is None else ((b"_retries", str(retries).encode()),))
        out.append(DeadLetter(Entry(b"jobs:dlq", f"{ms}-0", fields), b"jobs", None, retries, ms))
    return out


def hourly_traffic() -> tuple[list[Entry], dict[int, int]]:
    """Ten days of one stream with a daily pattern, a spike (day 8, 14:00) and a silent hour (day 9, 03:00).

    Returns the entries and the count per hour start (ms) as generated.
    """
    counts: dict[int, int] = {}
    for day in range(10):
        for hour in range(24):
            n = 20 + (hour % 4) * 5 + (day * 7 + hour) % 5
            if (day, hour) == (8, 14):
                n += 300
            if (day, hour) == (9, 3):
                n = 0
            counts[T0 + day * DAY_MS + hour * HOUR_MS] = n
    entries = []
    for start, n in counts.items():
        for i in range(n):
            entries.append(Entry(b"traffic", f"{start + i * (HOUR_MS // (n + 1))}-0", ((b"type", b"tick"),)))
    return entries, counts
