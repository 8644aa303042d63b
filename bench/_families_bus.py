"""The live bus of ``bench/families.py`` (``make bench`` skips this file: its name starts with ``_``).

The seed's progress streams (one stream per task, ``progress:<task>``: start, a few deltas, done, MAXLEN,
a TTL once done) are built server-side in bounded Lua batches, as ``bench/pipeline.py`` builds its lake:
a million keys in a few dozen seconds, where a client loop would take minutes. Beside them, one
``task:<n>:events`` stream per 50 progress streams, a group with a pending entry on every tenth of
those and the bus's DLQ ``{task:<n>:events}:dlq`` on every twentieth.

The keys are made without a TTL, so the pass can be compared with its floor on a keyspace that holds
still; :func:`expire_spread` then gives nine progress streams in ten a TTL spread over the beat window
(the tenth are still running), and :class:`Feeder` creates new progress streams meanwhile, each
expiring in turn, as a real progress-stream bus does. :class:`CpuSampler` reads Redis's own CPU (``INFO
cpu``: used_cpu_user + used_cpu_sys) four times a second, so each snapshot run's share can be told.
"""

from __future__ import annotations

import bisect
import threading
import time

BATCH = 1000  # streams per Lua call: a few ms of Redis each

# progress:<i> for i in first..first+n-1: start, 1-3 deltas, done, MAXLEN ~ 100; ARGV[3] > 0: a TTL of
# that many seconds plus a spread by i (the feeder's new streams); task:<i/50>:events beside every 50th.
FILL_LUA = """
local first, n, ttl = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
for i = first, first + n - 1 do
  local key = 'progress:' .. i
  redis.call('XADD', key, 'MAXLEN', '~', 100, '*', 'event', 'start', 'data', '{}', 'ts', i)
  for d = 1, 1 + i % 3 do
    redis.call('XADD', key, 'MAXLEN', '~', 100, '*', 'event', 'delta', 'data', '{"done":' .. d .. '}', 'ts', i)
  end
  redis.call('XADD', key, 'MAXLEN', '~', 100, '*', 'event', 'done', 'data', '{}', 'ts', i)
  if ttl > 0 then
    redis.call('EXPIRE', key, ttl + (i * 7919) % ttl)
  end
  if i % 50 == 0 then
    local t = i / 50
    local events = 'task:' .. t .. ':events'
    redis.call('XADD', events, '*', 'type', 'task.done', 'data', '{}')
    if t % 10 == 0 then
      redis.call('XGROUP', 'CREATE', events, 'workers', '0', 'MKSTREAM')
      redis.call('XREADGROUP', 'GROUP', 'workers', 'w1', 'COUNT', 1, 'STREAMS', events, '>')
    end
    if t % 20 == 0 then
      redis.call('XADD', '{' .. events .. '}:dlq', '*', 'type', 'task.done', 'dlq_error', 'boom')
    end
  end
end
return n
"""

# Nine progress streams in ten get a TTL of ARGV[3] + (i * 7919) % ARGV[4] seconds: spread over the window.
EXPIRE_LUA = """
local first, n, base, spread = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local set = 0
for i = first, first + n - 1 do
  if i % 10 ~= 0 then
    set = set + redis.call('EXPIRE', 'progress:' .. i, base + (i * 7919) % spread)
  end
end
return set
"""


def fill(raw, first: int, streams: int, *, ttl: int = 0) -> None:
    script = raw.register_script(FILL_LUA)
    for start in range(first, first + streams, BATCH):
        script(args=[start, min(BATCH, first + streams - start), ttl])


def expire_spread(raw, streams: int, *, base_s: int, spread_s: int) -> int:
    script = raw.register_script(EXPIRE_LUA)
    return sum(int(script(args=[first, min(BATCH, streams - first), base_s, spread_s]))
               for first in range(0, streams, BATCH))


class Feeder(threading.Thread):
    """New progress streams at ``per_s`` a second (ten Lua batches a second), numbered from ``first``,
    each with a TTL of ``ttl_s`` to ``2 * ttl_s`` seconds."""

    def __init__(self, url: str, *, first: int, per_s: int, ttl_s: int) -> None:
        super().__init__(daemon=True, name="feeder")
        import redis

        self.raw = redis.Redis.from_url(url)
        self.next, self.per_tenth, self.ttl_s = first, max(1, per_s // 10), ttl_s
        self.created = 0
        self.stopping = threading.Event()

    def run(self) -> None:
        script = self.raw.register_script(FILL_LUA)
        while not self.stopping.wait(0.1):
            script(args=[self.next, self.per_tenth, self.ttl_s])
            self.next += self.per_tenth
            self.created += self.per_tenth

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=10)


class CpuSampler(threading.Thread):
    """Redis's own CPU seconds (user + sys) against the wall clock, sampled every ``every_s``."""

    def __init__(self, url: str, every_s: float = 0.25) -> None:
        super().__init__(daemon=True, name="cpu-sampler")
        import redis

        self.raw, self.every_s = redis.Redis.from_url(url), every_s
        self.times: list[float] = []
        self.cpu: list[float] = []
        self.stopping = threading.Event()

    def sample(self) -> None:
        info = self.raw.info("cpu")
        self.times.append(time.time())
        self.cpu.append(float(info["used_cpu_user"]) + float(info["used_cpu_sys"]))

    def run(self) -> None:
        while not self.stopping.wait(self.every_s):
            self.sample()

    def stop(self) -> None:
        self.stopping.set()
        self.join(timeout=5)
        self.sample()

    def at(self, when: float) -> float:
        """Redis's CPU seconds at wall time ``when``, interpolated between the two samples around it."""
        i = bisect.bisect_left(self.times, when)
        if i <= 0:
            return self.cpu[0]
        if i >= len(self.times):
            return self.cpu[-1]
        t0, t1, c0, c1 = self.times[i - 1], self.times[i], self.cpu[i - 1], self.cpu[i]
        return c0 + (c1 - c0) * (when - t0) / (t1 - t0) if t1 > t0 else c1

    def between(self, start: float, end: float) -> float:
        return self.at(end) - self.at(start)
