"""The Redis side of payload search: one page of a bounded range, in either direction, masked.

Search (:mod:`streams_app.search`) reads a range page by page and decides itself which entries match,
on the entries as the searching user sees them (field order and repeated names kept, each entry through
the user's mask, :data:`.types.EntryMask`), and never ``XRANGE - +`` without ``COUNT``. Each page is one ``XRANGE``/``XREVRANGE``
sent with the key's ``TYPE`` through :func:`~streams_app.redis_ops.commands.stream_read` (so a missing
key or another type is a NotFound, and on a cluster the command goes to the node owning the key); it
costs O(log N + count) however deep into the stream it starts.
"""

from __future__ import annotations

from .client import get_client
from .commands import stream_pipeline, stream_read
from .errors import InvalidArgument
from .parsers import parse_entry
from .types import Entry, EntryMask, masked

SEARCH_PAGE = 500
"""Entries per XRANGE page: big enough that round trips do not dominate, small enough to stop on time."""


def search_range_page(
    conn: str, key: bytes, *, low: str, high: str, forward: bool, count: int = SEARCH_PAGE,
    mask: EntryMask | None,
) -> list[Entry]:
    """Up to ``count`` entries between ``low`` and ``high`` (XRANGE bounds: ``-``, ``+``, ``<id>`` or
    ``(<id>`` for an exclusive one), oldest first when ``forward``, newest first otherwise, each as
    ``mask`` shows it."""
    if not isinstance(key, bytes) or not key:
        raise InvalidArgument("A stream key is required.")
    if count < 1:
        raise InvalidArgument("count must be at least 1.")
    client = get_client(conn)
    if forward:
        raw = stream_read(conn, client, key, "XRANGE", key, low, high, "COUNT", count)
    else:
        raw = stream_read(conn, client, key, "XREVRANGE", key, high, low, "COUNT", count)
    return masked(mask, [parse_entry(item) for item in raw or ()])


def search_stream_length(conn: str, key: bytes) -> int:
    """XLEN, the "of M" of "scanned N of M entries" (NotFound when the key is not a stream)."""
    return int(stream_read(conn, get_client(conn), key, "XLEN", key))


def search_stream_snapshot(conn: str, key: bytes) -> tuple[int, str | None]:
    """The stream's length and its newest entry's ID (None: empty), read in one MULTI, so that no entry
    is added between the two: a search that stops at that ID scans at most that many entries."""
    length, newest = stream_pipeline(
        conn,
        get_client(conn),
        key,
        [("XLEN", key), ("XREVRANGE", key, "+", "-", "COUNT", 1)],
        transaction=True,
    )
    return int(length), (newest[0][0].decode() if newest else None)
