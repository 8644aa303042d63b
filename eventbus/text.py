"""Keys, names and values as text a human can trust, and an entry ID's parts: Django-free, the one copy
for every program that shows the bus's keys and entries (its command line, a monitoring application).

Keys and values are bytes and nothing assumes UTF-8: :func:`display_text` shows any byte that is not
valid UTF-8 as ``\\xNN`` and makes bidi control characters visible, so two names that differ only by
invisible reordering characters never look alike, on a page or in a terminal.
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

BIDI_CONTROLS = "\u061c\u200e\u200f\u202a\u202b\u202c\u202d\u202e\u2066\u2067\u2068\u2069"
"""Unicode's bidirectional formatting characters (ALM, LRM, RLM, the embeddings and overrides, the
isolates): invisible, yet they reorder the text around them, so ``pay\u202eexe.txt`` reads as another name."""
_BIDI = re.compile(f"[{BIDI_CONTROLS}]")


def display_text(raw: bytes | str) -> str:
    """Bytes as text for display: UTF-8, any byte that is not part of valid UTF-8 as ``\\xNN``, NUL as
    ``\\x00`` and any bidi control character as ``\\uNNNN``.

    Every name shown to a person (keys, groups, consumers, field names) should go through here, so two
    names that differ only by invisible reordering characters never look alike. NUL is escaped too, so the
    text can be stored where NUL is refused (PostgreSQL's text and JSON columns).
    """
    return escape_bidi(as_bytes(raw).decode("utf-8", "backslashreplace")).replace("\x00", "\\x00")


def escape_bidi(text: str) -> str:
    """``text`` with each bidi control character written as ``\\uNNNN``: visible, and unable to reorder
    what a page shows after it."""
    return _BIDI.sub(lambda m: f"\\u{ord(m.group()):04x}", text)


def as_bytes(value: object) -> bytes:
    """Bytes as given; ``str`` (a client with ``decode_responses``) as UTF-8; anything else as its str."""
    if isinstance(value, bytes):
        return value
    if isinstance(value, bytearray | memoryview):
        return bytes(value)
    if isinstance(value, str):
        return value.encode("utf-8", "surrogateescape")
    return str(value).encode("utf-8", "backslashreplace")


def id_order(entry_id: str | bytes) -> tuple[int, int]:
    """``(ms, seq)`` of an entry ID as Redis gave it (a bare ``<ms>`` is ``<ms>-0``), for comparing and
    sorting IDs: the one place an ID is cut in two. No validation, so cheap enough for every entry of a
    live tail; text that is no ID raises ValueError. An ID a person typed needs checking first."""
    if isinstance(entry_id, bytes):
        ms, _, seq = entry_id.partition(b"-")
        return int(ms), int(seq or 0)
    head, _, tail = entry_id.partition("-")
    return int(head), int(tail or 0)


def id_ms(entry_id: str | None) -> int | None:
    """The millisecond part of an entry ID as Redis gave it; None for a missing or malformed one."""
    if not entry_id:
        return None
    head = str(entry_id).split("-", 1)[0]
    # ASCII and decimal: "²" is a digit that int() refuses, "١" a decimal that int() accepts.
    return int(head) if head.isascii() and head.isdecimal() else None


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def id_time(ms: int) -> datetime:
    """The UTC time of an ID's millisecond part, clamped to what datetime can hold: an ID's ms runs to
    2**64 - 1, datetime ends in the year 9999, and a page or a search must not fail on a far-future ID.

    Integer arithmetic rather than ``fromtimestamp(ms / 1000)``: a float of seconds drops microseconds
    from the times of far-future IDs (the last millisecond of 9999 came out 7 us early).
    """
    try:
        return _EPOCH + timedelta(milliseconds=ms)
    except OverflowError:
        return datetime.max.replace(tzinfo=UTC)
