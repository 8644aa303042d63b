"""An export's bytes, page by page: the range read through :mod:`streams_app.redis_ops.ranges`, the
entries kept by the optional predicate, each page encoded as it comes (:mod:`.formats`).

The one place a search query becomes an export's predicate is :func:`export_matcher`.
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterator
from dataclasses import dataclass

from eventbus.search.cost import seconds_per_entry
from eventbus.search.query import Query
from streams_app.exports.formats import Encoder, encoder_for
from streams_app.redis_ops import actions
from streams_app.redis_ops.ranges import range_entry_pages
from streams_app.redis_ops.types import Entry
from streams_app.search import compile_query

#: Entries per XRANGE page: what an export holds in memory at once, and one Parquet row group.
PAGE = 1000

Matches = Callable[[Entry], bool]
#: What a user may see of an entry (:meth:`streams_app.masking.apply.Masker.entry`).
Mask = Callable[[Entry], Entry]


class Predicate:
    """A search query as an export's predicate: ``query.matches`` with ``dlq`` (a dead letter's parsed
    fields can be searched), and :attr:`too_costly`, the entries it left out so far because their own
    data made the query too costly to evaluate (:attr:`eventbus.search.query.Query.too_costly`): not
    written, and counted so the audit row and the job say how many (never a silent non-match)."""

    def __init__(self, query: Query, *, dlq: bool) -> None:
        self.query = query
        self.dlq = dlq

    def __call__(self, entry: Entry) -> bool:
        return self.query.matches(entry, dlq=self.dlq)

    @property
    def too_costly(self) -> int:
        return self.query.too_costly


def export_matcher(q: str | None, *, dlq: bool = False) -> Predicate | None:
    """The predicate of the search query ``q`` (None keeps every entry).

    The search's own ``compile_query(q).matches``, with ``dlq`` so a dead letter's parsed fields can be
    searched. A bad query is the search's InvalidArgument (400).
    """
    query = export_query(q)
    if query is None:
        return None
    return Predicate(query, dlq=dlq)


def export_query(q: str | None) -> Query | None:
    """``q`` compiled (None: no query); a bad or too costly one is the search's InvalidArgument (400)."""
    return compile_query(q) if q else None


def evaluation_bound(query: Query | None, entries: int) -> float:
    """What ``query`` costs over ``entries`` entries by the expression alone (:mod:`eventbus.search.cost`):
    a lower bound of its time, known before it runs (the data's own sizes come on top)."""
    return entries * seconds_per_entry(query.estimate if query is not None else None)


class QueryOverBudget(Exception):
    """A direct download's query spent its time budget: the download stops, incomplete (and says so)."""


def budgeted(matches: Matches, budget_s: float) -> Matches:
    """``matches`` that raises :class:`QueryOverBudget` once its evaluations have taken ``budget_s`` in
    all: the entries' own data made the query dearer than its bound said (time spent sending is not
    counted, so a slow client is not cut off)."""
    spent = 0.0

    def check(entry: Entry) -> bool:
        nonlocal spent
        began = time.perf_counter()
        try:
            return matches(entry)
        finally:
            spent += time.perf_counter() - began
            if spent > budget_s:
                raise QueryOverBudget(
                    f"The query took more than the {budget_s:g} s a direct download may spend on it: the "
                    "download stopped incomplete; start a background export instead."
                )

    return check


def range_size(conn: str, key: bytes, *, start: str, end: str, limit: int) -> int:
    """How many entries ``[start, end]`` holds, counted inside Redis (no transfer), reading at most
    ``limit + 1``: a figure over ``limit`` means "more than ``limit``"."""
    return actions.replay_count_detail(conn, key, start=start, end=end, limit=limit + 1).scanned


@dataclass
class Tally:
    """What an export read and wrote so far (the audit row and the job's progress say it)."""

    scanned: int = 0
    written: int = 0


def range_bounds(conn: str, key: bytes, start: str, end: str) -> tuple[str, str]:
    """The range as exact IDs, both included: ``start`` and ``end`` are entry IDs, millisecond times,
    ISO-8601 times (a time covers its whole millisecond), ``-`` or ``+``. The end is capped at the
    stream's last ID now, so entries added while the export runs are not in it (replay's rule)."""
    return actions.resolve_range(conn, key, start or "-", end or "+")


def range_over(conn: str, key: bytes, *, start: str, end: str, limit: int) -> bool:
    """Whether ``[start, end]`` holds more than ``limit`` entries, counted inside Redis (no transfer),
    reading at most ``limit + 1``."""
    return range_size(conn, key, start=start, end=end, limit=limit) > limit


def encoded_pages(
    pages: Iterator[list[Entry]],
    *,
    fmt: str,
    matches: Matches | None,
    tally: Tally,
    encoder: Encoder | None = None,
    finish: bool = True,
) -> Iterator[bytes]:
    """The file's bytes for ``pages``: the head (the encoder is made from the first page read unless
    given), one chunk per page, and the tail when ``finish``. Empty chunks are not yielded."""
    for page in pages:
        if encoder is None:
            encoder = encoder_for(fmt, page)
            if head := encoder.start():
                yield head
        kept = page if matches is None else [e for e in page if matches(e)]
        tally.scanned += len(page)
        tally.written += len(kept)
        if chunk := encoder.page(kept):
            yield chunk
    if encoder is None:
        encoder = encoder_for(fmt, [])
        if head := encoder.start():
            yield head
    if finish and (tail := encoder.finish()):
        yield tail


def export_bytes(
    conn: str,
    key: bytes,
    *,
    start: str,
    end: str,
    fmt: str,
    matches: Matches | None,
    tally: Tally,
    mask: Mask | None,
    page: int = PAGE,
) -> Iterator[bytes]:
    """The whole export of the exact range ``[start, end]`` as a stream of chunks, one per page read,
    each entry masked as ``mask`` says (before the search predicate and the encoder: a masked value is
    neither written nor found by searching for it)."""
    pages = range_entry_pages(conn, key, start=start, end=end, page=page, mask=mask)
    yield from encoded_pages(pages, fmt=fmt, matches=matches, tally=tally)
