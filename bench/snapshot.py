"""Benchmark: the metric snapshot over 10k streams with 2 groups each (SPEC section 8).

Budget: 10k streams with 2 groups each snapshotted in under 2 s, pipelined, no ``XINFO ... FULL``.

Run from the repository root: ``.venv/bin/python bench/snapshot.py`` (about a minute). It starts its own
redis-server on a free port and a throwaway SQLite database (migrated here); nothing else is touched.

The bus: 10k streams of 20 entries, each with two groups that both have pending entries (so every group
costs an ``XPENDING - + 1`` too: the worst case for the snapshot) and lag. Measured in the same run,
interleaved round by round:

- **pipelined, Redis side**: ``snapshot_reads.server_read`` (SCAN TYPE stream in batches of 1000, then per
  chunk of 500 keys one round trip of XINFO STREAM + XINFO GROUPS and one of XPENDING per group);
- **naive, Redis side**: the same SCAN, then the same commands one at a time (one round trip each), the
  loop a first version would write;
- **pipelined snapshot with DB writes**: ``snapshot_take`` for a new tick (Redis reads, mirror refresh,
  30k sample rows bulk-inserted in one transaction, SnapshotRun row). The first one also creates the 30k
  mirror rows (cold); later ones are the steady state the beat task runs every 10 s.
The mirror sync (which adds XINFO CONSUMERS per group and writes the whole mirror) is timed once, for
information: it runs every 30 s and has no budget of its own.
"""

from __future__ import annotations

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
N_STREAMS = 10_000
ENTRIES = 20
BUDGET_S = 2.0
ROUNDS = 5
T0 = datetime(2026, 1, 1, tzinfo=UTC)

# Server-side fill: streams s:<i> with ENTRIES entries, groups g1 (3 pending) and g2 (1 pending).
FILL_LUA = """
local first, n, entries = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for i = first, first + n - 1 do
  local key = 'bench:stream:' .. i
  for j = 1, entries do
    redis.call('XADD', key, '*', 'type', 'order.created', 'data', '{"order_id":' .. (i * 100 + j) .. ',"amount":1250}')
  end
  redis.call('XGROUP', 'CREATE', key, 'g1', '0')
  redis.call('XGROUP', 'CREATE', key, 'g2', '0')
  redis.call('XREADGROUP', 'GROUP', 'g1', 'worker-a', 'COUNT', 3, 'STREAMS', key, '>')
  redis.call('XREADGROUP', 'GROUP', 'g2', 'worker-b', 'COUNT', 1, 'STREAMS', key, '>')
end
return n
"""


def fill(client) -> None:
    script = client.register_script(FILL_LUA)
    for first in range(0, N_STREAMS, 500):
        script(args=[first, min(500, N_STREAMS - first), ENTRIES])


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


def commandstats(client) -> dict[str, int]:
    return {name: int(stats["calls"]) for name, stats in client.info("commandstats").items()}


def run(server: RedisServer) -> None:
    import redis

    from streams_app.metrics import snapshots
    from streams_app.metrics.models import GroupSample, StreamSample
    from streams_app.redis_ops import snapshot_reads

    raw = redis.Redis.from_url(server.url(0))
    t = time.perf_counter()
    fill(raw)
    n_keys = raw.dbsize()
    print(f"filled {n_keys} streams x {ENTRIES} entries, 2 groups each, all with pending entries "
          f"({time.perf_counter() - t:.1f} s)")

    # Warm up the clients and check the work is the same both ways.
    facts = snapshot_reads.server_read(CONN)
    assert len(facts.streams) == N_STREAMS and all(len(s.groups) == 2 for s in facts.streams)
    assert naive_read(CONN)[0] == N_STREAMS

    before = commandstats(raw)
    facts = snapshot_reads.server_read(CONN)
    after = commandstats(raw)
    used = {name: after[name] - before.get(name, 0) for name in after if after[name] != before.get(name, 0)}
    print(f"pipelined read: {facts.round_trips} pipelined round trips + SCAN; commands: "
          + ", ".join(f"{k.removeprefix('cmdstat_')}={v}" for k, v in sorted(used.items()) if k != "cmdstat_info"))

    cold_t = time.perf_counter()
    cold = snapshots.snapshot_take(tick=T0)
    cold_s = time.perf_counter() - cold_t
    assert cold.streams == N_STREAMS and cold.groups == 2 * N_STREAMS, (cold.streams, cold.groups)

    pipelined, naive, full = [], [], []
    trips = 0
    for i in range(1, ROUNDS + 1):
        t = time.perf_counter()
        snapshot_reads.server_read(CONN)
        pipelined.append(time.perf_counter() - t)

        t = time.perf_counter()
        _, trips = naive_read(CONN)
        naive.append(time.perf_counter() - t)

        t = time.perf_counter()
        run_ = snapshots.snapshot_take(tick=T0 + timedelta(seconds=10 * i))
        full.append(time.perf_counter() - t)
        assert run_.streams == N_STREAMS and run_.groups == 2 * N_STREAMS

    samples = StreamSample.objects.filter(resolution="raw").count()
    group_samples = GroupSample.objects.filter(resolution="raw").count()
    assert samples == N_STREAMS * (ROUNDS + 1) and group_samples == 2 * N_STREAMS * (ROUNDS + 1)

    t = time.perf_counter()
    sync = snapshots.mirror_sync(conn=CONN)
    sync_s = time.perf_counter() - t

    med = statistics.median
    print()
    print(f"{N_STREAMS} streams, {2 * N_STREAMS} groups; median of {ROUNDS} interleaved rounds")
    print(f"  pipelined, Redis side            {med(pipelined) * 1000:8.0f} ms  (min {min(pipelined) * 1000:.0f})")
    print(f"  naive one-at-a-time, Redis side  {med(naive) * 1000:8.0f} ms  (min {min(naive) * 1000:.0f}; "
          f"{trips} round trips + SCAN)")
    print(f"  pipelined snapshot + DB writes   {med(full) * 1000:8.0f} ms  (min {min(full) * 1000:.0f}; "
          f"{N_STREAMS} stream + {2 * N_STREAMS} group samples per tick)")
    print(f"  first snapshot (creates mirror)  {cold_s * 1000:8.0f} ms")
    print(f"  mirror sync (with consumers)     {sync_s * 1000:8.0f} ms  (Redis {sync.redis_ms} ms; every 30 s)")
    print()
    print(f"ratio naive / pipelined (Redis side): {med(naive) / med(pipelined):.1f}x")
    print(f"ratio naive Redis side / pipelined snapshot with DB writes: {med(naive) / med(full):.1f}x")
    worst = max(max(full), cold_s)
    verdict = "PASS" if worst < BUDGET_S else "FAIL"
    print(f"budget: snapshot under {BUDGET_S:.0f} s -> worst full snapshot {worst:.2f} s: {verdict}")


def main() -> int:
    started = time.perf_counter()
    with django_bench() as server:
        run(server)
    print(f"(benchmark ran {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
