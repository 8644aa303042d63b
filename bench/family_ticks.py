"""Benchmark: the snapshot tick by stream family at a million keys (docs/operations.md#stream-families).

Fills a private redis-server with ``--streams`` progress streams as ``bench/families.py`` does
(``bench/_families_bus.fill``: server-side Lua batches, the seed's short progress streams, here with a TTL
of an hour or more, a task events stream per 50 with groups, pending entries and DLQs), so the connection is in family mode
(``BUSCONSOLE_FAMILY_MODE_KEYS``), and takes snapshot ticks one after the other, each as the beat takes
it (:func:`streams_app.metrics.snapshots.snapshot_take`, the SQLite database of the bench), until the
rolling family pass has completed and ``--after`` ticks more have read its members. Per tick it prints
the run's duration, the Redis reads' share, Redis's own CPU (``INFO cpu``, user + system, before and
after), the keys the pass read and how far it is, and the members read; then one mirror sync.

Goal: every tick of the default interval recorded, so the longest tick must end within the interval
(``BUSCONSOLE_SNAPSHOT_INTERVAL_S``, 10 s): a run longer than that makes the next tick's beat message find
the lock held.

Run from the repository root: ``.venv/bin/python bench/family_ticks.py [--streams 1000000]``. The load
average is printed: on a shared machine the figures mean little without it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import django_bench  # noqa: E402
from bench._families_bus import fill  # noqa: E402
from bench._summary import check  # noqa: E402
from tests.servers import RedisServer  # noqa: E402

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def redis_cpu_s(raw) -> float:
    cpu = raw.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def run(server: RedisServer, streams: int, after: int, max_ticks: int) -> None:
    import redis
    from django.conf import settings

    from streams_app.metrics import mirror_schedule, snapshots
    from streams_app.redis_ops import client as redis_client

    raw = redis.Redis.from_url(server.url(0))
    started = time.perf_counter()
    fill(raw, 0, streams, ttl=3600)  # an hour's TTL or more: longer than the run
    keys = raw.dbsize()
    interval = settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S
    print(f"busconsole family ticks benchmark: {streams:,} progress streams, {keys:,} keys, filled in"
          f" {time.perf_counter() - started:.1f} s; family mode above {settings.BUSCONSOLE_FAMILY_MODE_KEYS:,} keys,"
          f" {settings.BUSCONSOLE_FAMILY_TICK_KEYS:,} keys a tick, {settings.BUSCONSOLE_FAMILY_MEMBERS_MAX:,} members"
          f" at most; {load()}", flush=True)
    redis_client.reset()
    durations: list[float] = []
    left = None
    for n in range(max_ticks):
        tick = T0 + timedelta(seconds=n * interval)
        cpu = redis_cpu_s(raw)
        t = time.perf_counter()
        done = snapshots.snapshot_take(tick=tick)
        durations.append(time.perf_counter() - t)
        notes = (done.families or {}).get("default", {})
        print(f"  tick {n + 1}: {durations[-1]:.2f} s (Redis reads {done.redis_ms / 1000:.2f} s, Redis CPU"
              f" {redis_cpu_s(raw) - cpu:.2f} s); pass read {notes.get('tick_keys', 0):,} keys, {notes.get('pass_keys', 0):,}"
              f" of about {notes.get('keys_total') or 0:,} so far{', complete' if notes.get('pass_complete') else ''};"
              f" members {notes.get('members', 0):,}, stream samples {done.streams:,}; {load()}", flush=True)
        if notes.get("pass_complete") and left is None:
            left = after
        elif left is not None:
            left -= 1
        if left == 0:
            break
    t = time.perf_counter()
    synced = mirror_schedule.mirror_sync_guarded()
    result = (synced or {}).get("default")
    print(f"  mirror sync: {time.perf_counter() - t:.2f} s, {getattr(result, 'streams', result)} streams written",
          flush=True)
    longest = max(durations)
    print(f"  {len(durations)} ticks: median {statistics.median(durations):.2f} s, longest {longest:.2f} s of the"
          f" {interval} s interval; {load()}", flush=True)
    check(f"family-mode snapshot tick, {streams:,} streams, longest of {len(durations)}", f"{longest:.2f} s",
          f"< {interval} s", longest < interval)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=1_000_000)
    parser.add_argument("--after", type=int, default=2, help="ticks taken after the first pass completes")
    parser.add_argument("--max-ticks", type=int, default=60)
    args = parser.parse_args()
    with django_bench(read_only=True) as server:
        run(server, args.streams, args.after, args.max_ticks)


if __name__ == "__main__":
    main()
