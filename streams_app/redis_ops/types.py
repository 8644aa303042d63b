"""One frozen dataclass per Redis object the console shows: entry, stream, group, consumer, pending entry.

Pages, the JSON API, the metric snapshots and the mirror all read these same types, so a figure means
the same thing everywhere. They are built only by :mod:`.parsers` (from Redis's replies), except
:class:`StreamSummary`, a streams-list row that the mirror can also fill when Redis is slow to answer.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable, Sequence
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


EntryMask = Callable[[Entry], Entry]
"""What a reader may see of an entry: :meth:`streams_app.masking.apply.Masker.entry`, or
:func:`streams_app.masking.apply.search_mask`'s answer (None when no rule applies to the stream).

The masked-reader rule (docs/api.md#masking): every function here that hands out entry bytes takes one as a
required keyword, ``mask``, and applies it before the entries leave, so no caller can read a payload
without saying how it is masked (``tests/test_architecture.py`` checks every such function and every
call; the masking matrix, ``tests/security/test_masking_matrix.py``, checks every route)."""


def masked(mask: EntryMask | None, entries: Iterable[Entry]) -> list[Entry]:
    """``entries`` as ``mask`` lets a reader see them."""
    return list(entries) if mask is None else [mask(entry) for entry in entries]


@dataclass(frozen=True, slots=True)
class ConsumerInfo:
    """One row of XINFO CONSUMERS."""

    name: bytes
    pending: int
    idle_ms: int
    inactive_ms: int | None  # None: Redis < 7.2, or the consumer never tried to read


@dataclass(frozen=True, slots=True)
class PendingIdle:
    """The longest idle time among a group's pending entries, and the entry that has been idle that long.

    Idle is the time since the entry was last delivered (XREADGROUP, XCLAIM, XAUTOCLAIM): the maximum
    over the PEL is how long work has waited, whatever the entries' IDs. ``exact`` is False when the
    bounded search of :mod:`.pending_idle` stopped early: the figure is then a lower bound ("at least").
    """

    id: str
    idle_ms: int
    exact: bool


@dataclass(frozen=True, slots=True)
class GroupInfo:
    """One row of XINFO GROUPS, plus what the snapshot reader adds from other replies.

    The last two fields are filled only by the readers that ask for them (None otherwise):
    ``longest_idle`` (the snapshot reader and :func:`.reads.groups.group_info`) comes from the bounded
    XPENDING probes of :mod:`.pending_idle`, ``consumer_list`` (the mirror's reads) from XINFO CONSUMERS.
    """

    name: bytes
    consumers: int
    pending: int
    last_delivered_id: str
    entries_read: int | None  # None: Redis < 7 or unknown
    lag: int | None  # None: Redis cannot tell (docs/architecture.md#lag-redis-cannot-tell)
    longest_idle: PendingIdle | None = None  # None: nothing pending, or not read
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

    @property
    def lag(self) -> int | None:
        """The stream's lag, a lower bound when :attr:`lag_unknown_groups` (see :func:`groups_lag`)."""
        return groups_lag(self.groups)

    @property
    def lag_unknown_groups(self) -> int:
        return groups_lag_unknown(self.groups)


def groups_lag(groups: Sequence[GroupInfo]) -> int | None:
    """The largest lag Redis reports among ``groups``: the stream's lag, or, when some group's lag is
    unknown (:func:`groups_lag_unknown`), a lower bound of it (the largest of 5 and "unknown" is at least 5).
    None when no group reports a lag (none, or all unknown). The mirror stores the same figure.
    """
    known = [g.lag for g in groups if g.lag is not None]
    return max(known) if known else None


def groups_lag_unknown(groups: Sequence[GroupInfo]) -> int:
    """How many of ``groups`` have a lag Redis cannot tell (docs/architecture.md#lag-redis-cannot-tell)."""
    return sum(1 for g in groups if g.lag is None)


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
    lag: int | None = None  # :func:`groups_lag`: a lower bound when lag_unknown_groups; None: no group reports one
    lag_unknown_groups: int = 0  # :func:`groups_lag_unknown`

    @property
    def lag_unknown(self) -> bool:
        """Whether the stream has groups whose lag Redis cannot tell (``lag`` is then a lower bound, or None)."""
        return self.lag_unknown_groups > 0

    @property
    def lag_exact(self) -> bool:
        """Whether ``lag`` is the stream's lag: it has groups and Redis tells the lag of each."""
        return self.groups > 0 and self.lag_unknown_groups == 0

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
            lag=groups_lag(info.groups),
            lag_unknown_groups=groups_lag_unknown(info.groups),
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
