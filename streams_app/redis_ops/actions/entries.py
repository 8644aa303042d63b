"""Adding an entry to a stream by hand (the "Add entry" form and ``POST .../entries/``).

What producers do all day, done once by an operator: a test message, a fixed-up copy of a failed
one. The stream must already exist (``XADD ... NOMKSTREAM``): a typo in a key must not create a new
stream that no consumer reads. ``TYPE`` rides in the same round trip, so a missing key or another
type is :class:`NotFound`, worded as everywhere else. Input is bounded before anything is sent:
field names non-empty, at most :data:`MAX_FIELDS` fields, at most :func:`max_bytes` bytes of names
and values together.
"""

from __future__ import annotations

from collections.abc import Sequence

from django.conf import settings

from ..client import get_client
from ..commands import stream_pipeline
from ..errors import InvalidArgument
from ..parsers import reply_text
from ._common import _key, _non_negative

MAX_FIELDS = 1000
"""Fields one added entry may hold: far above any real message, far below a mistake's size."""
DEFAULT_MAX_BYTES = 1024 * 1024
"""Bytes of names and values one added entry may hold, unless ``BUSCONSOLE_ENTRY_MAX_BYTES`` says."""


def max_bytes() -> int:
    """The size bound of an added entry (names and values together), in bytes."""
    return int(getattr(settings, "BUSCONSOLE_ENTRY_MAX_BYTES", DEFAULT_MAX_BYTES))


def entry_fields_check(fields: Sequence[tuple[bytes, bytes]]) -> list[tuple[bytes, bytes]]:
    """``fields`` as a list, or InvalidArgument saying what is wrong (empty, a nameless field, too big)."""
    pairs = list(fields)
    if not pairs:
        raise InvalidArgument("An entry needs at least one field.")
    if len(pairs) > MAX_FIELDS:
        raise InvalidArgument(f"At most {MAX_FIELDS} fields per entry ({len(pairs)} given).")
    size = 0
    for index, (name, value) in enumerate(pairs):
        if not isinstance(name, bytes) or not isinstance(value, bytes):
            raise InvalidArgument("Field names and values must be bytes.")
        if not name:
            raise InvalidArgument(f"Field {index + 1} has an empty name: every field needs a name.")
        size += len(name) + len(value)
    limit = max_bytes()
    if size > limit:
        raise InvalidArgument(
            f"The entry is {size} bytes; at most {limit} bytes ({limit // 1024} KiB) of names and values."
        )
    return pairs


def entry_add(
    conn: str, key: bytes, fields: Sequence[tuple[bytes, bytes]], *, maxlen: int | None = None
) -> str:
    """XADD ``fields`` (in order, repeats kept) to the existing stream ``key``; the new entry's ID.

    ``maxlen`` trims the stream to about that many entries in the same command (``MAXLEN ~``: whole
    nodes only, so Redis never walks the stream entry by entry).
    """
    _key(key)
    pairs = entry_fields_check(fields)
    trim: list[object] = []
    if maxlen is not None:
        trim = ["MAXLEN", "~", _non_negative(maxlen, "maxlen")]
    flat = [part for pair in pairs for part in pair]
    (new_id,) = stream_pipeline(conn, get_client(conn), key, [("XADD", key, "NOMKSTREAM", *trim, "*", *flat)])
    return reply_text(new_id) or ""
