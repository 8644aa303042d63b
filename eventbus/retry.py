"""How long to wait before retrying a failed event, and how many times.

Delays grow exponentially (``base * multiplier**retries``, capped at ``cap``) and are jittered
downwards by up to ``jitter`` of their value, so a burst of failures (a database restart) does not
come back as a burst of retries at the same millisecond. With the defaults an event is tried at
about 0, 1, 2, 4, 8 and 16 seconds before it is dead-lettered.

Delayed retries wait in the sorted set :func:`eventbus.keys.retry_key` and are re-added to their
stream by whichever worker's pump finds them due first (see ``lua/pump_retries.lua``).

A retry is a new entry with a new ID, so each carries where the event has been: ``_first_id`` (the
entry ID of its first publish, the same on every retry), ``_failed_id`` (the attempt whose failure
scheduled it) and ``_failed_at`` (when, on the server's clock). A dead letter keeps them with its other
fields, so it names both the first publish and, in ``dlq_original_id``, the last attempt; a reader finds
a retry's failure in the metric events by ``_failed_at`` rather than by reading the whole metrics stream.
"""

from __future__ import annotations

import random
from collections.abc import Mapping
from dataclasses import dataclass
from typing import Any

from . import keys


@dataclass(frozen=True, slots=True)
class RetryPolicy:
    """Retry settings of one handler. Times are in seconds."""

    #: retries after the first attempt; then the event is dead-lettered
    max_retries: int = 5
    base: float = 1.0
    multiplier: float = 2.0
    cap: float = 300.0
    #: fraction of the delay that may be taken off at random (0: none, 1: "full jitter")
    jitter: float = 0.5
    #: deliveries of one entry (crashes, expired leases) after which it is dead-lettered as poison
    max_deliveries: int = 10

    def __post_init__(self) -> None:
        if self.max_retries < 0:
            raise ValueError("max_retries must be >= 0")
        if self.base < 0 or self.cap < 0 or self.multiplier < 1:
            raise ValueError("base and cap must be >= 0 and multiplier >= 1")
        if not 0 <= self.jitter <= 1:
            raise ValueError("jitter must be between 0 and 1")
        if self.max_deliveries < 1:
            raise ValueError("max_deliveries must be >= 1")

    def ceiling(self, retries: int) -> float:
        """The un-jittered delay before retry number ``retries + 1``."""
        # min() before the power would overflow: cap the exponent instead.
        exponent = min(retries, 64)
        return min(self.cap, self.base * self.multiplier**exponent)

    def delay(self, retries: int, rng: random.Random | None = None) -> float:
        """Seconds to wait after the failure of an attempt that had ``retries`` retries before it."""
        ceiling = self.ceiling(retries)
        draw = (rng or random).random()
        return ceiling * (1.0 - self.jitter * draw)


async def schedule_retry(
    scripts: Any,
    *,
    stream: str,
    group: str,
    entry_id: str,
    consumer: str,
    fields: Mapping[bytes, bytes],
    delay_ms: int,
    retries: int,
) -> int | None:
    """Move a failed pending entry to the retry set and ack it (``lua/schedule_retry.lua``).

    ``retries`` is the count the re-added entry will carry. Returns the due time (ms, Redis
    clock), or ``None`` when the entry is no longer pending for ``consumer``.
    """
    args: list[Any] = [group, entry_id, consumer, delay_ms, retries]
    for pair in fields.items():
        args += pair
    scheduled: int | None = await scripts.schedule_retry(keys=[stream, keys.retry_key(stream)], args=args)
    return scheduled


async def pump_due(
    scripts: Any, stream: str, *, maxlen: int | None, batch: int = 500, rounds: int = 20
) -> int:
    """Re-add the due retries of ``stream`` (``lua/pump_retries.lua``); at most ``batch * rounds`` per call."""
    moved_total = 0
    for _ in range(rounds):
        moved = await scripts.pump_retries(
            keys=[keys.retry_key(stream), stream], args=[batch, "" if maxlen is None else maxlen]
        )
        moved_total += moved
        if moved < batch:
            break
    return moved_total
