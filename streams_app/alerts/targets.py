"""What an alert is about and what a rule's evaluation found: shared by the stream and the family rules."""

from __future__ import annotations

import hashlib
from dataclasses import dataclass
from datetime import datetime

#: A rule opens at most this many alerts per tick: a glob matching ten thousand dead consumers should
#: not write ten thousand rows and POST ten thousand webhooks in one go (the rest follow next ticks).
MAX_NEW_PER_TICK = 500


@dataclass(frozen=True, slots=True)
class Target:
    """What an alert is about: a stream, a group of it, or a consumer of that group (raw bytes); for a
    family rule, the family (``key`` is its glob's text, UTF-8)."""

    connection: str
    key: bytes
    group: bytes = b""
    consumer: bytes = b""

    @property
    def hash(self) -> str:
        """A digest of the exact, length-prefixed parts: the identity of "the same target"."""
        parts = [self.connection.encode(), self.key, self.group, self.consumer]
        return hashlib.sha256(b"".join(b"%d:%s" % (len(p), p) for p in parts)).hexdigest()


@dataclass(frozen=True, slots=True)
class Breach:
    target: Target
    value: float
    message: str
    since: datetime | None = None
