"""The newest stream-family rows of a connection, as the pages read them (docs/operations.md#stream-families).

The snapshot tick stores one :class:`FamilySample` per family and connection, all with the same ``at``
(the tick whose pass made them). The families page, the streams page in family mode and the overview
read the rows of the newest ``at`` here: two indexed queries per page (the newest ``at``, then one page of
its rows ordered in the database), whatever the number of keys in Redis, and no Redis command at all.

A connection is in *family mode* when those rows say it holds more than ``BUSCONSOLE_FAMILY_MODE_KEYS``
keys (DBSIZE when the pass began, else the keys the pass looked at): the snapshot then keeps per-stream
rows only for the members that matter, and the streams page lists families first.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from django.conf import settings
from django.db.models import Count, Q, Sum

from eventbus.glob import glob_compile

from .models import FamilyPassState, FamilySample

#: The orders a page may ask for: the column first, the glob's text as the tie-break (stable paging).
FAMILY_SORTS = {
    "": ("-keys", "family"),
    "keys": ("-keys", "family"),
    "entries": ("-entries", "family"),
    "pending": ("-pending", "family"),
    "dlq": ("-dlq_depth", "family"),
    "name": ("family",),
}
_GLOB_CHARS = set("*?[")


@dataclass(frozen=True, slots=True)
class FamilyRows:
    """One page of the newest rows of a connection, and what the pass behind them saw."""

    at: datetime  # the tick of the pass that made the rows
    rows: list[FamilySample]
    total: int  # families matching the filter
    families: int  # families in all
    keys: int  # keys summed over every family (streams the pass read)
    complete: bool  # the pass saw every key (else the figures are a lower bound)
    looked_at: int
    keys_total: int | None  # DBSIZE when the pass began (None: refused)
    offset: int
    count: int

    @property
    def family_mode(self) -> bool:
        return mode_keys(self.keys_total, self.looked_at) > settings.BUSCONSOLE_FAMILY_MODE_KEYS


def mode_keys(keys_total: int | None, looked_at: int) -> int:
    """The key count family mode is decided by: DBSIZE, else the keys the pass looked at."""
    return keys_total if keys_total is not None else looked_at


@dataclass(frozen=True, slots=True)
class PassUnderWay:
    """The rolling family pass of a connection in family mode, while it has not completed yet."""

    started_at: datetime | None
    looked_at: int
    keys_total: int | None
    streams: int

    @property
    def family_mode(self) -> bool:
        return mode_keys(self.keys_total, self.looked_at) > settings.BUSCONSOLE_FAMILY_MODE_KEYS


def pass_under_way(conn: str) -> PassUnderWay | None:
    """The connection's rolling family pass under way (one indexed row), None when there is none: what a
    page says before the first family rows of a connection in family mode exist."""
    state = (
        FamilyPassState.objects.filter(connection=conn, cursor__isnull=False)
        .values_list("started_at", "looked_at", "keys_total", "streams")
        .first()
    )
    if state is None:
        return None
    return PassUnderWay(started_at=state[0], looked_at=int(state[1] or 0), keys_total=state[2],
                        streams=int(state[3] or 0))


def members_left_out(conn: str) -> int:
    """How many members that matter the cap (``BUSCONSOLE_FAMILY_MEMBERS_MAX``) left without per-stream rows
    in the connection's last completed family pass (one indexed row; 0 when none)."""
    left = FamilyPassState.objects.filter(connection=conn).values_list("members_left_out", flat=True).first()
    return int(left or 0)


def newest_at(conn: str) -> datetime | None:
    """The ``at`` of the connection's newest family rows (one index lookup), None before any."""
    return (
        FamilySample.objects.filter(connection=conn).order_by("-at").values_list("at", flat=True).first()
    )


def family_rows(conn: str, *, offset: int = 0, count: int = 50, match: str = "", sort: str = "") -> FamilyRows | None:
    """One page of ``conn``'s newest family rows, filtered and sorted in the database; None before any row.

    ``match`` filters the families by their glob's text: as a glob (``*``, ``?``, ``[``) matched against
    that text, else a case-insensitive substring. The rows of one ``at`` are one per family, so a glob
    filter reads that tick's texts (no more rows than families) and keeps one page."""
    at = newest_at(conn)
    if at is None:
        return None
    tick = FamilySample.objects.filter(connection=conn, at=at)
    head = tick.values_list("complete", "looked_at", "keys_total").first() or (True, 0, None)
    sums = tick.aggregate(families=Count("id"), keys=Sum("keys"))
    rows = tick
    order = FAMILY_SORTS.get(sort, FAMILY_SORTS[""])
    if match and match != "*" and _GLOB_CHARS & set(match):
        glob = glob_compile(match.encode())
        ids = [pk for pk, text in tick.order_by(*order).values_list("id", "family") if glob.matches(text.encode())]
        total = len(ids)
        found = FamilySample.objects.in_bulk(ids[offset : offset + count])
        page = [found[pk] for pk in ids[offset : offset + count]]
    else:
        if match and match != "*":
            rows = rows.filter(Q(family__icontains=match))
        total = rows.count()
        page = list(rows.order_by(*order)[offset : offset + count])
    return FamilyRows(
        at=at, rows=page, total=total, families=int(sums["families"] or 0), keys=int(sums["keys"] or 0),
        complete=bool(head[0]), looked_at=int(head[1] or 0), keys_total=head[2], offset=offset, count=count,
    )
