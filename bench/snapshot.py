"""Benchmark: the metric snapshot, the mirror sync, retention and ``/metrics`` at 10k or 100k streams.

Goals (SPEC section 8): the snapshot with database writes within 1.5x of its Redis-side pipelined read,
and at 100k streams every tick of the default interval (10 s) recorded; the mirror sync within its
interval (30 s); a retention run within its budget, no transaction of it holding the database long;
``/metrics`` bounded (at most BUSCONSOLE_METRICS_MAX_SERIES per-object series, whatever the bus).

Run from the repository root: ``.venv/bin/python bench/snapshot.py [--streams 10000] [--rounds 5]``
(10k: about a minute; 100k: about ten). It starts its own redis-server on a free port and a throwaway
SQLite database (migrated here); nothing else is touched.

The bus: N streams of 20 entries, each with two groups that both have pending entries (so every group
costs an ``XPENDING - + 1`` too: the worst case for the snapshot) and lag, filled with pipelined
XADD/XGROUP/XREADGROUP in batches of 500 streams. Measured in the same run:

- **Redis side**: ``snapshot_reads.server_read`` (SCAN TYPE stream, then per chunk of 500 keys one round
  trip of XINFO STREAM + XINFO GROUPS and one of XPENDING per group), median of the rounds;
- **snapshot with DB writes**: ``snapshot_take`` for a new tick (Redis reads, mirror refresh, sample rows
  in one transaction, SnapshotRun row); the first also creates the mirror rows (cold);
- **naive** (10k only): the same commands one round trip each, the loop a first version would write;
- **mirror sync**: the first full pass (creates every consumer row), a full pass on a warm mirror, and
  an incremental pass after XADD to 1% of the streams (what a quiet minute of a big bus looks like);
- **retention**: one ``samples_retention`` body (rollups, then deletions) on the rounds' samples with the
  clock put past the raw retention; the longest single deletion transaction is reported too;
- **/metrics**: one scrape through Django's test client: bytes, series, time.
"""

from __future__ import annotations

import argparse
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import django_bench  # noqa: E402
from tests.servers import RedisServer  # noqa: E402

CONN = "default"
ENTRIES = 20
BATCH = 500
T0 = datetime(2026, 1, 1, tzinfo=UTC)
SNAPSHOT_INTERVAL_S = 10.0
MIRROR_INTERVAL_S = 30.0


def fill(client, n_streams: int) -> None:
    """Streams bench:stream:<i>: ENTRIES entries, groups g1 (3 pending) and g2 (1 pending), pipelined."""
    fields = {"type": "order.created", "data": '{"order_id":1,"amount":1250}'}
    for first in range(0, n_streams, BATCH):
        pipe = client.pipeline(transaction=False)
        keys = [f"bench:stream:{i}" for i in range(first, min(first + BATCH, n_streams))]
        for key in keys:
            for _ in range(ENTRIES):
                pipe.xadd(key, fields)
            pipe.xgroup_create(key, "g1", id="0")
            pipe.xgroup_create(key, "g2", id="0")
        pipe.execute()
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.xreadgroup("g1", "worker-a", {key: ">"}, count=3)
            pipe.xreadgroup("g2", "worker-b", {key: ">"}, count=1)
        pipe.execute()


def naive_read(conn: str) -> tuple[int, int]:
    """The same facts, one command per round trip: (streams read, round trips)."""
    from streams_app.redis_ops.client import get_client
    from streams_app.redis_ops.parsers import parse_group
    from streams_app.redis_ops.snapshot_reads import stream_keys_scan

    client = get_client(conn)
    keys = stream_keys_scan(conn)
    trips = 0
    for key in keys:
        client.execute_command("XINFO", "STREAM", key)
        groups = [parse_group(g) for g in client.execute_command("XINFO", "GROUPS", key)]
        trips += 2
        for g in groups:
            if g.pending:
                client.execute_command("XPENDING", key, g.name, "-", "+", 1)
                trips += 1
    return len(keys), trips


def timed(fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def verdict(ok: bool) -> str:
    return "PASS" if ok else "FAIL"


def run(server: RedisServer, n_streams: int, rounds: int) -> None:
    import redis
    from django.contrib.auth.models import Group, User
    from django.test import Client
    from django.urls import resolve

    resolve("/metrics")  # load the URLconf (and every view module) now, not in the middle of the figures

    from streams_app.accounts.tokens import token_create
    from streams_app.metrics import snapshots
    from streams_app.metrics.models import GroupSample, StreamSample
    from streams_app.redis_ops import snapshot_reads

    raw = redis.Redis.from_url(server.url(0))
    _, fill_s = timed(fill, raw, n_streams)
    print(f"filled {raw.dbsize()} streams x {ENTRIES} entries, 2 groups each, all with pending entries "
          f"({fill_s:.1f} s)", flush=True)

    facts, _ = timed(snapshot_reads.server_read, CONN)  # warm-up, and the work is what we think
    assert len(facts.streams) == n_streams and all(len(s.groups) == 2 for s in facts.streams)

    cold, cold_s = timed(snapshots.snapshot_take, tick=T0)
    assert cold.streams == n_streams and cold.groups == 2 * n_streams, (cold.streams, cold.groups)
    print(f"first snapshot (creates the mirror rows): {cold_s:.2f} s", flush=True)

    reads, full, naive = [], [], []
    trips = 0
    for i in range(1, rounds + 1):
        reads.append(timed(snapshot_reads.server_read, CONN)[1])
        if n_streams <= 10_000:
            (_, trips), naive_s = timed(naive_read, CONN)
            naive.append(naive_s)
        run_, took = timed(snapshots.snapshot_take, tick=T0 + timedelta(seconds=10 * i))
        full.append(took)
        assert run_.streams == n_streams and run_.groups == 2 * n_streams
        print(f"  round {i}: read {reads[-1]:.2f} s, snapshot {took:.2f} s", flush=True)
    assert StreamSample.objects.filter(resolution="raw").count() == n_streams * (rounds + 1)
    assert GroupSample.objects.filter(resolution="raw").count() == 2 * n_streams * (rounds + 1)

    first_sync, first_sync_s = timed(snapshots.mirror_sync, conn=CONN, full=True)
    print(f"mirror sync, first full pass: {first_sync_s:.2f} s", flush=True)
    warm_sync, warm_sync_s = timed(snapshots.mirror_sync, conn=CONN, full=True)
    print(f"mirror sync, warm full pass: {warm_sync_s:.2f} s", flush=True)
    touched = max(1, n_streams // 100)
    pipe = raw.pipeline(transaction=False)
    for i in range(0, n_streams, n_streams // touched):
        pipe.xadd(f"bench:stream:{i}", {"type": "late"})
    pipe.execute()
    inc, inc_s = timed(snapshots.mirror_sync, conn=CONN, full=False)
    print(f"mirror sync, incremental (1% moved): {inc_s:.2f} s", flush=True)
    assert inc.streams_written == touched, (inc.streams_written, touched)

    # Retention: the clock put past the raw retention (48 h) of every sample written above.
    delete_times: list[float] = []
    original = snapshots.rows_delete

    def timed_delete(model, pks):
        t = time.perf_counter()
        try:
            return original(model, pks)
        finally:
            delete_times.append(time.perf_counter() - t)

    snapshots.rows_delete = timed_delete
    later = T0 + timedelta(hours=50)
    rollups, rollup_s = timed(snapshots.samples_downsample, now=later, budget_s=90)
    print(f"retention rollups: {rollup_s:.2f} s", flush=True)
    deleted, prune_s = timed(snapshots.samples_prune, now=later, budget_s=90)
    print(f"retention deletions: {prune_s:.2f} s", flush=True)
    snapshots.rows_delete = original
    left = StreamSample.objects.filter(resolution="raw").count()

    user = User.objects.create_user("bench", password="x")
    user.groups.set([Group.objects.get_or_create(name="viewer")[0]])
    token = token_create(user=user, name="bench")[1]
    snapshots.snapshot_take(tick=T0 + timedelta(hours=50))  # /metrics shows the newest snapshot
    response, metrics_s = timed(Client(HTTP_HOST="localhost").get, "/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.status_code
    body = response.content.decode()
    series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
    omitted = next((line for line in body.splitlines() if line.startswith("# busconsole:")), "")

    med = statistics.median
    snap = med(full)
    print()
    print(f"{n_streams} streams, {2 * n_streams} groups; median of {rounds} rounds")
    print(f"  Redis side, pipelined              {med(reads) * 1000:8.0f} ms  (min {min(reads) * 1000:.0f})")
    if naive:
        print(f"  naive one-at-a-time, Redis side    {med(naive) * 1000:8.0f} ms  ({trips} round trips + SCAN)")
    print(f"  snapshot + DB writes               {snap * 1000:8.0f} ms  (worst {max(full) * 1000:.0f}; "
          f"{n_streams} stream + {2 * n_streams} group samples per tick)")
    print(f"  first snapshot (creates mirror)    {cold_s * 1000:8.0f} ms")
    print(f"  mirror sync, first full pass       {first_sync_s * 1000:8.0f} ms  (Redis {first_sync.redis_ms} ms; "
          f"{first_sync.consumers} consumers)")
    print(f"  mirror sync, full pass, warm       {warm_sync_s * 1000:8.0f} ms  (Redis {warm_sync.redis_ms} ms)")
    print(f"  mirror sync, incremental, 1% moved {inc_s * 1000:8.0f} ms  (reads and compare {inc.redis_ms} ms; "
          f"{inc.streams_written} streams rewritten)")
    print(f"  retention: rollups                 {rollup_s * 1000:8.0f} ms  ({rollups})")
    print(f"  retention: deletions               {prune_s * 1000:8.0f} ms  ({sum(deleted.values())} rows in "
          f"{len(delete_times)} transactions, longest {max(delete_times, default=0) * 1000:.0f} ms; "
          f"{left} raw stream samples left)")
    print(f"  /metrics                           {metrics_s * 1000:8.0f} ms  ({len(response.content)} bytes, "
          f"{series} series) {omitted}")
    print()
    print(f"ratio snapshot with DB writes / Redis-side read: {snap / med(reads):.2f}x (goal <= 1.5x): "
          f"{verdict(snap / med(reads) <= 1.5)}")
    print(f"snapshot vs its {SNAPSHOT_INTERVAL_S:.0f} s interval: worst {max(full):.2f} s "
          f"({max(full) / SNAPSHOT_INTERVAL_S:.0%}): {verdict(max(full) < SNAPSHOT_INTERVAL_S)}")
    print(f"incremental sync vs its {MIRROR_INTERVAL_S:.0f} s interval: {inc_s:.2f} s: "
          f"{verdict(inc_s < MIRROR_INTERVAL_S)}; full pass {warm_sync_s:.2f} s (every 300 s by default): "
          f"{verdict(warm_sync_s < MIRROR_INTERVAL_S)}")
    print(f"retention within its 180 s budget: {rollup_s + prune_s:.1f} s: {verdict(rollup_s + prune_s < 180)}")
    print(f"/metrics bounded: {series} series: {verdict(series <= 2000 + 100)}")


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--streams", type=int, default=10_000)
    parser.add_argument("--rounds", type=int, default=5)
    args = parser.parse_args()
    started = time.perf_counter()
    with django_bench() as server:
        run(server, args.streams, args.rounds)
    print(f"(benchmark ran {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
