"""What the console's cache raises when its Redis is down.

The cache (``settings.CACHES``) is Django's Redis backend on the console's own Redis (REDIS_URL), and
that backend lets redis-py's exceptions through. Code that must keep working through an outage of
that Redis (the login throttle must never lock operators out) catches :data:`CacheUnavailable` from
here, so it depends on neither the backend nor redis-py.
"""

from __future__ import annotations

import redis

CacheUnavailable = redis.RedisError
"""Any failure of a cache call: the console's Redis is unreachable, timed out, or refused."""
