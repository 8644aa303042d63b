"""A stream read from one ID to its end, page by page, as Redis sends it: the lake exporter's reader.

The exporter (:mod:`streams_app.lake.export`) converts whole replies to Arrow and needs them raw
(``[id, [name, value, ...]]``, bytes: binary-safe, field order and duplicate names kept), not as
the dataclasses of :mod:`~streams_app.redis_ops.reads.entries`, which copy every entry once more. Each page
is ``XRANGE key <start> + COUNT n`` with an exclusive start after the previous page's last ID, so a
page costs O(log N + n) however far into the stream it is, and ``XRANGE - +`` without ``COUNT``
never happens. Errors are :class:`~streams_app.redis_ops.errors.OpsError`.
"""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator

from .client import get_client, key_client
from .errors import translated
from .parsers import parse_entry
from .types import Entry, EntryMask, RawEntry, masked


def range_pages(
    conn: str, key: bytes, start: str, *, count: Callable[[], int], mask: EntryMask | None
) -> Generator[list[RawEntry], None, None]:
    """The entries of ``key`` from ``start`` (an XRANGE start: ``-``, ``<id>`` or ``(<id>``) to its end,
    each as ``mask`` shows it (None: no rule applies, and the replies are handed over as they came).

    The next page is asked for before a page is handed over: while the caller works on one page (the
    exporter converts and writes it), Redis reads the next and its reply waits in the socket. That is
    one request in flight on a connection held for the read (taken from the pool of the key's primary,
    :func:`~.client.key_client`, and dropped if the caller stops with a request in flight). It replaced
    a thread fetching one page ahead: a stream exported alone went faster and with less CPU an entry
    (the thread's were switches of the GIL); the exporter's two workers on two cores ran at the same
    rate either way, with less memory without it (docs/performance.md#figures-behind-the-design).

    ``count()`` is asked before each request, so the caller may size the pages by the last one's bytes
    (a page later than with one request at a time). Empty pages are not yielded; the iteration ends
    after the first page shorter than asked. On a cluster, a key that a reshard moves during the read
    raises :class:`~.errors.Unreachable` (MOVED is not followed), as any failure of the node does.
    """
    pool = key_client(conn, key).connection_pool
    with translated(conn):
        connection = pool.get_connection()
    in_flight = False
    try:
        with translated(conn):
            asked = count()
            connection.send_command("XRANGE", key, start, "+", "COUNT", asked)
            in_flight = True
        while in_flight:
            with translated(conn):
                reply = connection.read_response()
                in_flight = len(reply) == asked
                if in_flight:
                    asked = count()
                    connection.send_command("XRANGE", key, b"(" + reply[-1][0], "+", "COUNT", asked)
            if reply:
                yield reply if mask is None else [_masked_raw(raw, mask) for raw in reply]
    finally:
        if in_flight:  # the caller stopped early, or the read failed: no later user may get this reply
            connection.disconnect()
        pool.release(connection)


def _masked_raw(raw: RawEntry, mask: EntryMask) -> RawEntry:
    shown = mask(parse_entry(raw))
    return [raw[0], [part for pair in shown.fields for part in pair]]


def range_entry_pages(
    conn: str, key: bytes, *, start: str, end: str, page: int, mask: EntryMask | None
) -> Iterator[list[Entry]]:
    """The entries of ``key`` from ``start`` to ``end`` (XRANGE bounds, both included), ``page`` at a time,
    each as ``mask`` shows it (applied before the caller's search and encoder see it).

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
            reply = client.execute_command("XRANGE", key, start, end, "COUNT", page)  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
        if reply:
            yield masked(mask, [parse_entry(raw) for raw in reply])
        if len(reply) < page:
            return
        start = "(" + parse_entry(reply[-1]).id
