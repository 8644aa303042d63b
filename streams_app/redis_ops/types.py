"""One frozen dataclass per Redis object the console shows: entry, stream, group, consumer, pending entry.

Pages, the JSON API, the metric snapshots and the mirror all read these same types, so a figure means
the same thing everywhere. They are built only by :mod:`.parsers` (from Redis's replies), except
:class:`StreamSummary`, a streams-list row that the mirror can also fill when Redis is slow to answer.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from .ids import parse_id

Fields = tuple[tuple[bytes, bytes], ...]
RawEntry = Sequence[Any]
"""One entry as Redis sends it: ``[id, [name, value, name, value, ...]]``, bytes."""


@dataclass(frozen=True, slots=True)
class Entry:
    id: str
    fields: Fields

    @property
    def time(self) -> datetime:
        return parse_id(self.id).time


@dataclass(frozen=True, slots=True)
class ConsumerInfo:
    """One row of XINFO CONSUMERS."""

    name: bytes
    pending: int
    idle_ms: int
    inactive_ms: int | None  # None: Redis < 7.2, or the consumer never tried to read


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """One row of XINFO GROUPS, plus what the snapshot reader adds from other replies.

    The last three fields are read only by :mod:`.snapshot_reads` (None there too when not asked for):
    the oldest pending entry comes from ``XPENDING key group - + 1``, the consumers from XINFO CONSUMERS.
    """

    name: bytes
    consumers: int
    pending: int
    last_delivered_id: str
    entries_read: int | None  # None: Redis < 7 or unknown
    lag: int | None  # None: Redis cannot tell (see SPEC section 9)
    oldest_pending_id: str | None = None
    oldest_pending_idle_ms: int | None = None
    consumer_list: tuple[ConsumerInfo, ...] | None = None  # None: not read (snapshots skip consumers)


@dataclass(frozen=True, slots=True)
class StreamInfo:
    """XINFO STREAM (never FULL) of one stream with its XINFO GROUPS."""

    key: bytes
    length: int
    first_id: str | None
    last_id: str | None
    last_generated_id: str | None
    entries_added: int | None  # Redis 7+
    max_deleted_entry_id: str | None  # Redis 7+
    radix_tree_keys: int | None
    groups: tuple[GroupInfo, ...]

    @property
    def pending(self) -> int:
        return sum(g.pending for g in self.groups)


@dataclass(frozen=True, slots=True)
class StreamSummary:
    """The facts shown in one row of the streams list: a :class:`StreamInfo` with its groups counted."""

    key: bytes
    length: int
    first_id: str | None
    last_id: str | None
    last_generated_id: str | None
    groups: int
    pending: int

    @classmethod
    def of(cls, info: StreamInfo) -> StreamSummary:
        return cls(
            key=info.key,
            length=info.length,
            first_id=info.first_id,
            last_id=info.last_id,
            last_generated_id=info.last_generated_id,
            groups=len(info.groups),
            pending=info.pending,
        )


@dataclass(frozen=True, slots=True)
class PendingSummary:
    """XPENDING's summary form: how many, the ID range, and per consumer."""

    count: int
    min_id: str | None
    max_id: str | None
    consumers: tuple[tuple[bytes, int], ...]


@dataclass(frozen=True, slots=True)
class PendingEntry:
    """One row of XPENDING's extended form."""

    id: str
    consumer: bytes
    idle_ms: int
    deliveries: int
    exists: bool  # False: the message was deleted from the stream but is still pending
