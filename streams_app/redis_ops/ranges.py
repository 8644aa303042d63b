"""A stream read from one ID to its end, page by page, as Redis sends it: the lake exporter's reader.

The exporter (:mod:`streams_app.lake.export`) converts whole replies to Arrow and needs them raw
(``[id, [name, value, ...]]``, bytes: binary-safe, field order and duplicate names kept), not as
the dataclasses of :mod:`~streams_app.redis_ops.reads`, which copy every entry once more. Each page
is ``XRANGE key <start> + COUNT n`` with an exclusive start after the previous page's last ID, so a
page costs O(log N + n) however far into the stream it is, and ``XRANGE - +`` without ``COUNT``
never happens. Errors are :class:`~streams_app.redis_ops.errors.OpsError`.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator

from .client import get_client
from .errors import translated
from .parsers import parse_entry
from .types import Entry, RawEntry


def range_pages(conn: str, key: bytes, start: str, *, count: Callable[[], int]) -> Iterator[list[RawEntry]]:
    """The entries of ``key`` from ``start`` (an XRANGE start: ``-``, ``<id>`` or ``(<id>``) to its end.

    ``count()`` is asked before each page, so the caller may size the next page by the last one's
    bytes. Empty pages are not yielded; the iteration ends after the first page shorter than asked.
    """
    client = get_client(conn)
    while True:
        asked = count()
        with translated(conn):
            reply = client.execute_command("XRANGE", key, start, "+", "COUNT", asked)
        if reply:
            yield reply
        if len(reply) < asked:
            return
        start = "(" + reply[-1][0].decode()


def range_entry_pages(conn: str, key: bytes, *, start: str, end: str, page: int) -> Iterator[list[Entry]]:
    """The entries of ``key`` from ``start`` to ``end`` (XRANGE bounds, both included), ``page`` at a time.

    The exports' reader (:mod:`streams_app.exports`): each page is one ``XRANGE key <start> <end> COUNT
    page``, the next one starting just after the last ID read, so a generator that yields per page
    holds one page in memory and the server never sees an unbounded XRANGE. Empty pages are not
    yielded; the iteration ends after the first page shorter than asked.
    """
    if page < 1:
        raise ValueError("page must be at least 1")
    client = get_client(conn)
    while True:
        with translated(conn):
            reply = client.execute_command("XRANGE", key, start, end, "COUNT", page)
        if reply:
            yield [parse_entry(raw) for raw in reply]
        if len(reply) < page:
            return
        start = "(" + parse_entry(reply[-1]).id
