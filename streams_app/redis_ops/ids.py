"""Stream entry IDs: validation, and conversion between IDs and times.

An entry ID is ``<ms>-<seq>``, both unsigned 64-bit integers. Users may also give a bare ``<ms>``
or an ISO-8601 date-time wherever the console asks "where": :func:`parse_position` turns any of
these into a position Redis understands, or raises :class:`InvalidArgument`.
"""

from __future__ import annotations

import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

from eventbus.text import id_time

from .errors import InvalidArgument

U64_MAX = 2**64 - 1
# [0-9], not \d: in a str pattern \d also matches "١" or "５", which int() then reads as digits,
# so "١-0" would pass as the ID 1-0. Redis and every client write ASCII digits only.
_ID = re.compile(r"^([0-9]{1,20})(?:-([0-9]{1,20}))?$")


@dataclass(frozen=True, order=True, slots=True)
class StreamId:
    ms: int
    seq: int

    def __str__(self) -> str:
        return f"{self.ms}-{self.seq}"

    @property
    def time(self) -> datetime:
        return id_time(self.ms)


def parse_id(value: str, *, allow_bare: bool = True, what: str = "ID") -> StreamId:
    """Parse ``ms-seq`` (or bare ``ms`` when allowed: ``ms-0``); raise InvalidArgument otherwise."""
    value = (value or "").strip()
    match = _ID.match(value)
    if not match or (match.group(2) is None and not allow_bare):
        raise InvalidArgument(
            f"{what} {value[:64]!r} is not a stream ID (expected <milliseconds>-<sequence>)."
        )
    ms = int(match.group(1))
    seq = int(match.group(2) or 0)
    if ms > U64_MAX or seq > U64_MAX:
        raise InvalidArgument(f"{what} {value[:64]!r} is out of range.")
    return StreamId(ms, seq)


def reply_id(entry: Sequence[Any] | None) -> str | None:
    """The ID of an entry as Redis replies with it (``[id, fields]``, e.g. XINFO STREAM's first-entry).

    None for nil: XINFO STREAM of an empty stream has no first or last entry.
    """
    if not entry:
        return None
    head = entry[0]
    return head.decode() if isinstance(head, bytes) else str(head)


def parse_time(value: str) -> int:
    """Milliseconds since the epoch of an ISO-8601 date-time (naive means UTC)."""
    text = (value or "").strip()
    if text.endswith("Z"):
        text = text[:-1] + "+00:00"
    try:
        moment = datetime.fromisoformat(text)
    except ValueError:
        raise InvalidArgument(
            f"{value[:64]!r} is neither a stream ID nor an ISO-8601 date-time (e.g. 2026-11-22T10:30:00Z)."
        ) from None
    if moment.tzinfo is None:
        moment = moment.replace(tzinfo=UTC)
    ms = int(moment.timestamp() * 1000)
    if ms < 0:
        raise InvalidArgument("Times before 1970 have no stream IDs.")
    return ms


@dataclass(frozen=True, slots=True)
class Position:
    """Where to start reading: an exact ID, or a millisecond (all entries of that ms are included)."""

    ms: int
    seq: int | None  # None: the whole millisecond

    @property
    def lowest(self) -> StreamId:
        return StreamId(self.ms, 0 if self.seq is None else self.seq)

    @property
    def highest(self) -> StreamId:
        return StreamId(self.ms, U64_MAX if self.seq is None else self.seq)


def parse_position(value: str, *, what: str = "position") -> Position:
    """An entry ID, a bare millisecond timestamp, or an ISO-8601 date-time."""
    text = (value or "").strip()
    if not text:
        raise InvalidArgument(f"The {what} is empty.")
    if _ID.match(text):
        sid = parse_id(text, what=what)
        return Position(sid.ms, sid.seq if "-" in text else None)
    return Position(parse_time(text), None)


def _clock(ms: int) -> str:
    return id_time(ms).strftime("%Y-%m-%d %H:%M:%S.%f")[:-3] + " UTC"


def bound_text(value: str | None, *, side: str) -> str:
    """A range bound as a person reads it, ``side`` being "start" or "end" of the range.

    A time typed for a range is stored as a whole millisecond: ``<ms>-0`` at the start and
    ``<ms>-18446744073709551615`` (the largest sequence, so every entry of that millisecond is in) at the
    end. Those read ``from 2026-11-29 12:30:00.000 UTC`` and ``to the end of 2026-11-29 12:30:00.000 UTC``;
    any other ID keeps its digits with its time beside it; ``-`` and ``+`` are the stream's first and last
    entries. Only for display: the stored and sent value stays the exact ID.
    """
    word = "from" if side == "start" else "to"
    if not value:
        return ""
    if value in ("-", "0", "0-0") and side == "start":
        return "from the first entry"
    if value in ("+", "$") and side == "end":
        return "to the last entry"
    match = _ID.match(value)
    if match is None or int(match.group(1)) > U64_MAX:
        return f"{word} {value}"
    ms, seq = int(match.group(1)), match.group(2)
    if seq == str(U64_MAX) or (seq is None and side == "end"):
        return f"{word} the end of {_clock(ms)}"
    if seq in ("0", None) and side == "start":
        return f"from {_clock(ms)}"
    return f"{word} {value} ({_clock(ms)})"


def range_text(start: str | None, end: str | None) -> str:
    """``from … to the end of …``: both bounds of a range (see :func:`bound_text`)."""
    return f"{bound_text(start, side='start')} {bound_text(end, side='end')}".strip()
