"""One bounded, honest step of a search: scan a range page by page until a budget runs out.

A search never reads a whole stream at once: :func:`search_page` reads pages of
:data:`~streams_app.redis_ops.search.SEARCH_PAGE` entries (fewer when the entry budget is nearly spent)
through :mod:`streams_app.redis_ops.search`, tests each entry, and stops at the first of: the range's
end (``complete``), ``limit`` matches, ``budget_entries`` entries scanned, ``budget_ms`` spent. The time
is checked after every entry, not every page: one entry's evaluation is itself bounded (the query's
cost bound, :mod:`eventbus.search.cost`), so a step overruns its budget by one entry at most.

It always says what it covered: ``scanned`` entries from ``first_id`` to ``last_id``, and ``next``, the
cursor to continue from: the last entry it tested, so a continuation starts right after it (no
overlap, no gap) whatever stopped this step. ``total`` is the stream's length when the search began and
``until`` its newest entry then, read together in one MULTI; the scan never goes past ``until``, so
``scanned`` can never exceed ``total`` (a search of a stream that grew while it ran said "Scanned 2551
of 2550 entries": its XLEN was read before the scan, which then also read what arrived meanwhile). A run
of several steps hands its first step's ``until`` and ``total`` to the next ones, so the whole run
counts against one figure. ``too_costly`` counts the entries whose own data made the expression too
costly to evaluate (:attr:`eventbus.search.query.Query.too_costly`): they are not matches, and the
pages and the API say how many there were.
"""

from __future__ import annotations

import time
from dataclasses import dataclass
from typing import Literal

from eventbus.search import query as bus_query
from eventbus.search.query import Query, QueryError
from streams_app.redis_ops import search as redis_search
from streams_app.redis_ops.conventions import dlq_patterns
from streams_app.redis_ops.errors import InvalidArgument
from streams_app.redis_ops.ids import parse_id, parse_position
from streams_app.redis_ops.types import Entry, EntryMask

BUDGET_ENTRIES = 100_000
BUDGET_MS = 2000
MAX_LIMIT = 1000
DEFAULT_LIMIT = 100


def compile_query(text: str) -> Query:
    """The query typed in the box or the API's ``q`` (the language is :mod:`eventbus.search.query`), with
    the console's DLQ conventions (``settings.BUSCONSOLE_DLQ_PATTERNS``: a dead letter's ``error``,
    ``traceback``, ``retries``... are parsed by them); InvalidArgument (a 400 that says why) when it
    cannot be one."""
    try:
        return bus_query.compile_query(text, patterns=dlq_patterns())
    except QueryError as exc:
        raise InvalidArgument(str(exc)) from exc


@dataclass(frozen=True, slots=True)
class SearchPage:
    """What one step found and covered (module docstring)."""

    matches: tuple[Entry, ...]
    scanned: int
    total: int
    first_id: str | None
    last_id: str | None
    next: str | None
    complete: bool
    elapsed_ms: int
    until: str | None = None
    too_costly: int = 0


def _bounds(start: str | None, end: str | None) -> tuple[str, str]:
    """XRANGE bounds from the lowest and highest positions given (IDs, milliseconds or times)."""
    low = str(parse_position(start, what="from").lowest) if start else "-"
    high = str(parse_position(end, what="to").highest) if end else "+"
    if start and end and parse_id(low) > parse_id(high):
        raise InvalidArgument("'from' is after 'to': give the lower end of the range in 'from'.")
    return low, high


def search_page(
    conn: str,
    key: bytes,
    query: Query,
    *,
    start: str | None = None,
    end: str | None = None,
    direction: Literal["asc", "desc"] = "asc",
    cursor: str | None = None,
    limit: int = DEFAULT_LIMIT,
    budget_entries: int = BUDGET_ENTRIES,
    budget_ms: int = BUDGET_MS,
    dlq: bool = False,
    mask: EntryMask | None,
    until: str | None = None,
    total: int | None = None,
) -> SearchPage:
    """Scan ``key`` between ``start`` and ``end`` (the range's lower and upper ends, inclusive, whatever
    the direction), oldest first for ``asc`` and newest first for ``desc``, resuming after ``cursor``.

    ``mask`` is what the searching user may see of an entry (:func:`streams_app.masking.apply.search_mask`,
    None when no rule applies; required, as for every read of entry bytes): the query is evaluated on,
    and the matches are, the masked entries, so a value a user sees masked cannot be found by searching
    for it (kafka-ui #4115).

    ``until`` and ``total``: the newest entry and the length the run's first step found (module
    docstring); read here, in one MULTI, when not given."""
    if direction not in ("asc", "desc"):
        raise InvalidArgument("direction must be 'asc' or 'desc'.")
    if not 1 <= limit <= MAX_LIMIT:
        raise InvalidArgument(f"limit must be between 1 and {MAX_LIMIT}.")
    if budget_entries < 1 or budget_ms < 1:
        raise InvalidArgument("The search budgets must be positive.")
    low, high = _bounds(start, end)
    began = time.monotonic()
    deadline = began + budget_ms / 1000
    if until is None:
        total, until = redis_search.search_stream_snapshot(conn, key)
    elif total is None:
        total = redis_search.search_stream_length(conn, key)
    else:
        until = str(parse_id(until, allow_bare=False, what="until"))
    if until is None:  # empty when the run began: nothing to scan
        elapsed = int((time.monotonic() - began) * 1000)
        return SearchPage((), 0, total, None, None, None, complete=True, elapsed_ms=elapsed, until=None)
    if high == "+" or parse_id(until) < parse_id(high):
        high = until
    forward = direction == "asc"
    if cursor:
        after = "(" + str(parse_id(cursor, allow_bare=False, what="cursor"))
        low, high = (after, high) if forward else (low, after)
    costly_before = query.too_costly
    matches: list[Entry] = []
    scanned = 0
    first_id = last_id = None
    complete = False
    while True:
        asked = min(redis_search.SEARCH_PAGE, budget_entries - scanned)
        # One entry more than is tested: it tells whether the range goes on, so a step that ends with
        # its budget at the range's very end says "complete" rather than offering an empty Continue.
        page = redis_search.search_range_page(
            conn, key, low=low, high=high, forward=forward, count=asked + 1, mask=mask
        )
        tested = page[:asked]
        stopped = out_of_time = False
        for index, entry in enumerate(tested):
            scanned += 1
            first_id = first_id or entry.id
            last_id = entry.id
            if query.matches(entry, dlq=dlq, key=key):
                matches.append(entry)
                if len(matches) >= limit:
                    stopped = True
                    break
            if time.monotonic() >= deadline:  # every entry: one is bounded, a page of them is not
                out_of_time = True
                complete = index + 1 == len(tested) and len(page) <= asked
                break
        if out_of_time:
            break
        if not stopped and len(page) <= asked:
            complete = True
            break
        if stopped or scanned >= budget_entries:
            break
        bound = "(" + last_id  # type: ignore[operator]  # the loop broke out above when no entry was read, so last_id is set
        low, high = (bound, high) if forward else (low, bound)
    return SearchPage(
        matches=tuple(matches),
        scanned=scanned,
        total=total,
        first_id=first_id,
        last_id=last_id,
        next=None if complete else (last_id or cursor),
        complete=complete,
        elapsed_ms=int((time.monotonic() - began) * 1000),
        until=until,
        too_costly=query.too_costly - costly_before,
    )
