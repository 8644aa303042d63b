"""What the console's cache raises when its Redis is down, and fixed-window counters on that Redis.

The cache (``settings.CACHES``) is Django's Redis backend on the console's own Redis (REDIS_URL), and
that backend lets redis-py's exceptions through. Code that must keep working through an outage of
that Redis (the login throttle must never lock operators out) catches :data:`CacheUnavailable` from
here, so it depends on neither the backend nor redis-py.

The counters (:func:`window_take`) are a Lua script rather than the cache's ``add`` and ``incr``: the
login throttle must check every counter and count the attempt in one step, or concurrent guesses all
pass the check before any is counted (40 at once were all checked), and Django's ``incr`` is EXISTS then
INCR, which can recreate an expired counter with no expiry at all.
"""

from __future__ import annotations

import redis

from busconsole.locks import console_redis

CacheUnavailable = redis.RedisError
"""Any failure of a cache call: the console's Redis is unreachable, timed out, or refused."""

# KEYS: the counters. ARGV: limit, window in ms. Refuses (returning the longest wait in ms) when any
# counter has reached the limit, changing nothing; otherwise counts one against each and returns 0.
# A counter's first count starts its window (its expiry); later counts leave the expiry alone.
_TAKE = """
local limit, window, wait = tonumber(ARGV[1]), tonumber(ARGV[2]), 0
for _, key in ipairs(KEYS) do
  if tonumber(redis.call('GET', key) or '0') >= limit then
    local left = redis.call('PTTL', key)
    if left < 0 then left = window end
    if left > wait then wait = left end
  end
end
if wait > 0 then return wait end
for _, key in ipairs(KEYS) do
  redis.call('INCR', key)
  if redis.call('PTTL', key) < 0 then redis.call('PEXPIRE', key, window) end
end
return 0
"""
# Gives one count back, never creating a counter nor going below 0; the expiry is kept.
_GIVE_BACK = """
if tonumber(redis.call('GET', KEYS[1]) or '0') > 0 then return redis.call('DECR', KEYS[1]) end
return 0
"""


def window_take(keys: list[str], *, limit: int, window_s: int) -> float:
    """Count one against every counter in ``keys`` unless one has reached ``limit``: atomically.

    Returns 0 when counted, else the seconds until the fullest of the counters that are at the limit
    expires (nothing counted). Keys are used as given, on the console's Redis (REDIS_URL).
    """
    wait_ms = console_redis().eval(_TAKE, len(keys), *keys, limit, max(1, window_s) * 1000)
    return int(wait_ms) / 1000


def window_give_back(key: str) -> None:
    """Undo one count of :func:`window_take` on ``key`` (an attempt that turned out not to count)."""
    console_redis().eval(_GIVE_BACK, 1, key)


def window_clear(keys: list[str]) -> None:
    """Forget the counters in ``keys``."""
    if keys:
        console_redis().delete(*keys)
