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
from .types import RawEntry


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
