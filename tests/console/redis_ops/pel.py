"""Building a pending entries list whose idle times the test chooses, and the truth about it from Redis.

``XCLAIM ... IDLE ms`` sets an entry's idle time (its last delivery moved ``ms`` into the past), and a
plain XCLAIM resets it to zero, as an operator's claim does: so a PEL can be given any shape without
waiting. The expected figure is then what ``XPENDING key group - + <all>`` itself reports, read before
and after the code under test (idle times only grow while nothing touches the PEL).
"""

from __future__ import annotations

import math
import time
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

import redis

from streams_app.redis_ops.pending_idle import TIE_SLACK_MS

T = TypeVar("T")

#: Entry whose idle time is reset (claimed just now) rather than set.
FRESH = None


def pel(r: Any, key: str, group: str, idles: Sequence[int | None], *, consumer: str = "worker") -> list[str]:
    """``len(idles)`` entries added to ``key``, all delivered to ``consumer`` of ``group``, entry i then
    idle ``idles[i]`` ms (FRESH: claimed again just now). Returns the IDs, lowest first."""
    pipe = r.pipeline(transaction=False)
    for i in range(len(idles)):
        pipe.xadd(key, {"n": str(i)})
    ids = [i.decode() for i in pipe.execute()]
    r.xgroup_create(key, group, id="0")
    r.xreadgroup(group, consumer, {key: ">"}, count=len(idles))
    pipe = r.pipeline(transaction=False)
    for entry_id, idle in zip(ids, idles, strict=True):
        if idle is FRESH:
            pipe.xclaim(key, group, consumer, 0, [entry_id])
        else:
            pipe.xclaim(key, group, consumer, 0, [entry_id], idle=idle)
    pipe.execute()
    return ids


def pel_max(r: Any, key: str, group: str) -> tuple[int, str]:
    """(longest idle ms, its entry ID) over the whole PEL, as XPENDING reports it."""
    best: dict[str, Any] | None = None
    for row in r.xpending_range(key, group, "-", "+", 1_000_000):  # ID order: the lowest ID wins a tie
        if best is None or row["time_since_delivered"] > best["time_since_delivered"]:
            best = row
    assert best is not None, "nothing pending"
    return best["time_since_delivered"], best["message_id"].decode()


def lowest(r: redis.Redis, key: str, group: str) -> tuple[int, str]:
    """(idle ms, ID) of the lowest pending ID: what the figure used to be."""
    [row] = r.xpending_range(key, group, "-", "+", 1)
    return row["time_since_delivered"], row["message_id"].decode()


def measured(fn: Callable[[], T]) -> tuple[T, int]:
    """``fn()`` and a bound (ms) on how far below the true maximum its figure may be: the call's own
    duration, measured, plus the documented tie margin."""
    started = time.monotonic()
    out = fn()
    return out, math.ceil((time.monotonic() - started) * 1000) + TIE_SLACK_MS
