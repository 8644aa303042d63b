"""Consumer groups and consumers: XINFO GROUPS and XINFO CONSUMERS, ordered and paged here
(Redis answers both lists whole).
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, replace
from operator import attrgetter
from typing import Generic, TypeVar

from ..client import get_client
from ..errors import InvalidArgument, NotFound, translated
from ..parsers import parse_consumer, parse_group
from ..types import ConsumerInfo, GroupInfo
from .limits import DEFAULT_PAGE, check_count, validate_key
from .pending import pending_longest_idle

#: What a stream's groups and a group's consumers can be ordered by, each with the direction it takes
#: unless told (the most pending, lagging or idle first; names A to Z); ``_SORT_FIELDS`` is the field read.
GROUP_SORTS = {"pending": "desc", "lag": "desc", "consumers": "desc", "name": "asc"}
CONSUMER_SORTS = {"pending": "desc", "idle": "desc", "inactive": "desc", "name": "asc"}
_SORT_FIELDS = {"pending": "pending", "lag": "lag", "consumers": "consumers", "idle": "idle_ms",
                "inactive": "inactive_ms"}

RankedRow = TypeVar("RankedRow", GroupInfo, ConsumerInfo)


@dataclass(frozen=True, slots=True)
class RowsPage(Generic[RankedRow]):
    """One page of a list Redis only answers whole (XINFO GROUPS, XINFO CONSUMERS), ordered by ``sort``.

    ``total`` is the length of the whole list, ``offset`` the place of ``rows[0]`` in it.
    """

    rows: tuple[RankedRow, ...]
    total: int
    offset: int
    sort: str
    order: str  # "asc" or "desc", the default of ``sort`` filled in

    @property
    def next_offset(self) -> int | None:
        """Where the next page starts, None when this page reaches the end."""
        end = self.offset + len(self.rows)
        return end if self.rows and end < self.total else None


def ranked(
    rows: Iterable[RankedRow],
    *,
    sorts: dict[str, str],
    sort: str = "pending",
    order: str | None = None,
    offset: int = 0,
    count: int = DEFAULT_PAGE,
) -> RowsPage[RankedRow]:
    """``count`` rows from ``offset`` of ``rows`` ordered by ``sort`` (a key of ``sorts``), ``order``
    being its default when None.

    Redis has no paging for XINFO GROUPS or XINFO CONSUMERS: the reply is the whole list, O(n) on the
    server but cheap next to rendering it, so it is read once per request and ordered here. Ties go by
    name (A to Z whatever the order: Python's sort is stable, also reversed), so a page is the same on
    every reload while the figures stand still. A figure Redis cannot tell (a lag after SETID, an
    ``inactive`` before Redis 7.2) is neither high nor low: those rows come last in both directions.
    """
    if sort not in sorts:
        raise InvalidArgument(f"sort must be one of {', '.join(sorts)}.")
    order = order or sorts[sort]
    if order not in ("asc", "desc"):
        raise InvalidArgument("order must be 'asc' or 'desc'.")
    if offset < 0:
        raise InvalidArgument("offset must not be negative.")
    count = check_count(count)
    by_name = sorted(rows, key=attrgetter("name"))
    if sort == "name":
        ordered = by_name[::-1] if order == "desc" else by_name
    else:
        figure = attrgetter(_SORT_FIELDS[sort])
        ordered = sorted((r for r in by_name if figure(r) is not None), key=figure, reverse=order == "desc")
        ordered += [r for r in by_name if figure(r) is None]
    return RowsPage(rows=tuple(ordered[offset : offset + count]), total=len(by_name), offset=offset,
                    sort=sort, order=order)


def groups(conn: str, key: bytes) -> tuple[GroupInfo, ...]:
    """Every group of the stream, in Redis's order (XINFO GROUPS answers all of them at once)."""
    validate_key(key)
    with translated(conn):
        raw = get_client(conn).execute_command("XINFO", "GROUPS", key)  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
    return tuple(parse_group(g) for g in raw)


def groups_page(
    conn: str, key: bytes, *, sort: str = "pending", order: str | None = None, offset: int = 0,
    count: int = DEFAULT_PAGE,
) -> RowsPage[GroupInfo]:
    """One page of the stream's groups ordered by ``sort`` (see :func:`ranked`, :data:`GROUP_SORTS`)."""
    return ranked(groups(conn, key), sorts=GROUP_SORTS, sort=sort, order=order, offset=offset, count=count)


def group_info(conn: str, key: bytes, group: bytes) -> GroupInfo:
    """The group's XINFO GROUPS row, its longest pending idle time filled in (:func:`pending_longest_idle`)."""
    for g in groups(conn, key):
        if g.name == group:
            if not g.pending:
                return g
            return replace(g, longest_idle=pending_longest_idle(conn, key, group, pending=g.pending))
    raise NotFound("No such consumer group on this stream.", conn=conn)


def consumers(conn: str, key: bytes, group: bytes) -> tuple[ConsumerInfo, ...]:
    """Every consumer of the group, in Redis's order (XINFO CONSUMERS answers all of them at once)."""
    validate_key(key)
    with translated(conn):
        raw = get_client(conn).execute_command("XINFO", "CONSUMERS", key, group)  # type: ignore[no-untyped-call]  # redis-py leaves execute_command unannotated
    return tuple(parse_consumer(item) for item in raw)


def consumers_page(
    conn: str, key: bytes, group: bytes, *, sort: str = "pending", order: str | None = None, offset: int = 0,
    count: int = DEFAULT_PAGE,
) -> RowsPage[ConsumerInfo]:
    """One page of the group's consumers ordered by ``sort`` (see :func:`ranked`, :data:`CONSUMER_SORTS`)."""
    return ranked(consumers(conn, key, group), sorts=CONSUMER_SORTS, sort=sort, order=order, offset=offset,
                  count=count)
