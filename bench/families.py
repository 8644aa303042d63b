"""Benchmark: stream families (docs/performance.md#stream-families) over many short-lived progress streams.

The seed's progress-stream pattern (one stream per task, ``progress:<task>``, a few ``start``/``delta``/
``done`` events, MAXLEN and a TTL once done) reaches a great many keys quickly. This fills a private
redis-server, server-side in bounded Lua batches, with ``--streams`` of them (100,000 by default; the
1M-stream goal is ``--streams 1000000``), each with a TTL of an hour so none expires while it runs, and
beside them one ``task:<n>:events`` stream per 50 progress streams, a group with pending entries on every
tenth of those and the bus's DLQ ``{task:<n>:events}:dlq`` on every twentieth. Then, medians of
``--reps`` interleaved rounds:

- the floor: the Redis side of the same facts with nothing else, raw redis-py: ``SCAN ... TYPE stream``
  to the end and, per 1,000 keys, one pipeline of ``XINFO STREAM`` and ``XINFO GROUPS`` (no parsing, no
  grouping);
- the family pass the families page and API run (:func:`streams_app.redis_ops.reads.families.
  families_read`), with its budget set above the key count so it is complete; goal: within 2x of the
  floor (parsing the replies and summing them by family adds at most as much again);
- the families page (``GET /c/default/families/`` as a signed-in viewer, the pass included): its time
  and its size, under 300 KB;
- Redis's own CPU per pass (``INFO cpu``, user + system, before and after), printed.

Run from the repository root: ``.venv/bin/python bench/families.py [--streams 20000]``. It starts its own
redis-server on a free port and a throwaway SQLite database; nothing else is touched. The load average
is printed: on a shared machine the figures mean little without it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import django_bench  # noqa: E402
from bench._summary import check, within  # noqa: E402
from tests.servers import RedisServer  # noqa: E402

BATCH = 1000  # streams per Lua call: a few ms of Redis each
RATIO = 2.0
PAGE_LIMIT = 300 * 1024

# progress:<i> for i in first..first+n-1: start, 1-3 deltas, done, MAXLEN ~ 100, an hour's TTL (the seed's
# shape, the TTL longer than the run); task:<i/50>:events beside every 50th, with a group and a pending
# entry on every tenth of those and a dead letter on every twentieth.
FILL_LUA = """
local first, n = tonumber(ARGV[1]), tonumber(ARGV[2])
for i = first, first + n - 1 do
  local key = 'progress:' .. i
  redis.call('XADD', key, 'MAXLEN', '~', 100, '*', 'event', 'start', 'data', '{}', 'ts', i)
  for d = 1, 1 + i % 3 do
    redis.call('XADD', key, 'MAXLEN', '~', 100, '*', 'event', 'delta', 'data', '{"done":' .. d .. '}', 'ts', i)
  end
  redis.call('XADD', key, 'MAXLEN', '~', 100, '*', 'event', 'done', 'data', '{}', 'ts', i)
  redis.call('EXPIRE', key, 3600)
  if i % 50 == 0 then
    local t = i / 50
    local events = 'task:' .. t .. ':events'
    redis.call('XADD', events, '*', 'type', 'task.done', 'data', '{}')
    if t % 10 == 0 then
      redis.call('XGROUP', 'CREATE', events, 'workers', '0')
      redis.call('XREADGROUP', 'GROUP', 'workers', 'w1', 'COUNT', 1, 'STREAMS', events, '>')
    end
    if t % 20 == 0 then
      redis.call('XADD', '{' .. events .. '}:dlq', '*', 'type', 'task.done', 'dlq_error', 'boom')
    end
  end
end
return n
"""


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def fill(raw, streams: int) -> None:
    script = raw.register_script(FILL_LUA)
    for first in range(0, streams, BATCH):
        script(args=[first, min(BATCH, streams - first)])


def floor_read(raw) -> int:
    """The floor (module docstring): every stream's XINFO STREAM and XINFO GROUPS, unparsed."""
    read = 0
    keys: list[bytes] = []

    def flush() -> None:
        nonlocal read
        pipe = raw.pipeline(transaction=False)
        for key in keys:
            pipe.execute_command("XINFO", "STREAM", key)
            pipe.execute_command("XINFO", "GROUPS", key)
        read += len(pipe.execute(raise_on_error=False)) // 2
        keys.clear()

    cursor = None
    while cursor != 0:
        cursor, batch = raw.scan(cursor or 0, count=1000, _type="stream")
        keys += batch
        if len(keys) >= 1000:
            flush()
    if keys:
        flush()
    return read


def redis_cpu_s(raw) -> float:
    cpu = raw.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def run(server: RedisServer, streams: int, reps: int) -> None:
    import redis
    from django.contrib.auth.models import Group, User
    from django.test import Client, override_settings

    from streams_app.redis_ops import client as redis_client
    from streams_app.redis_ops.reads import families as family_reads

    raw = redis.Redis.from_url(server.url(0))
    started = time.perf_counter()
    fill(raw, streams)
    keys = raw.dbsize()
    print(f"busconsole families benchmark: {streams:,} progress streams, {keys:,} keys, filled in"
          f" {time.perf_counter() - started:.1f} s; {load()}", flush=True)
    user = User.objects.create_user("bench")
    user.groups.add(Group.objects.get(name="viewer"))
    web = Client(HTTP_HOST="localhost")
    web.force_login(user)
    redis_client.reset()

    times: dict[str, list[float]] = {"floor": [], "pass": [], "page": []}
    cpu: list[float] = []
    size = 0
    with override_settings(BUSCONSOLE_FAMILY_SCAN_BUDGET=keys * 2 + 10_000):
        for _ in range(reps):
            t = time.perf_counter()
            read = floor_read(raw)
            times["floor"].append(time.perf_counter() - t)
            before = redis_cpu_s(raw)
            t = time.perf_counter()
            found = family_reads.families_read("default")
            times["pass"].append(time.perf_counter() - t)
            cpu.append(redis_cpu_s(raw) - before)
            assert found.complete and found.streams == read, (found.complete, found.streams, read)
            t = time.perf_counter()
            reply = web.get("/c/default/families/")
            times["page"].append(time.perf_counter() - t)
            assert reply.status_code == 200, reply.status_code
            size = len(reply.content)
    m = {name: statistics.median(values) for name, values in times.items()}
    rows = {row.family.pattern: row for row in found.families}
    progress = rows[b"progress:*"]
    print(f"  {found.streams:,} streams in {len(found.families)} families; progress:* {progress.keys:,} keys,"
          f" {progress.entries:,} entries; {found.round_trips} round trips a pass", flush=True)
    print(f"  floor (SCAN + XINFO pipelines, unparsed) {m['floor']:.2f} s; family pass {m['pass']:.2f} s;"
          f" families page {m['page']:.2f} s, {size / 1024:,.0f} KB; Redis CPU per pass"
          f" {statistics.median(cpu):.2f} s; {load()}", flush=True)
    within(f"family pass, {found.streams:,} streams", m["pass"], m["floor"], RATIO, unit="s")
    check(f"families page size, {found.streams:,} streams", f"{size / 1024:,.0f} KB", "< 300 KB", size < PAGE_LIMIT)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=100_000)
    parser.add_argument("--reps", type=int, default=3)
    args = parser.parse_args()
    with django_bench(read_only=True) as server:
        run(server, args.streams, args.reps)


if __name__ == "__main__":
    main()
