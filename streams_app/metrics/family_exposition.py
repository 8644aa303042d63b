"""``/metrics``' stream families: a series set per family, and the connection totals in family mode.

Each connection's newest :class:`~streams_app.metrics.models.FamilySample` rows (those of the newest
``at`` at or before the scraped tick: the family pass that finished last) give, per family, its keys,
entries, entries per second, groups, pending entries, DLQ depth and the age of its oldest entry (from the
oldest entry ID's time to the row's ``at``). The families are ranked by entries (the glob's text breaks
ties) and the first BUSCONSOLE_METRICS_TOP_N of each connection are candidates for the exposition, within
the same BUSCONSOLE_METRICS_MAX_SERIES ceiling as the per-stream series; what a full export of every
family would have is counted in one aggregate query, so the left-out count needs no row per family.

**Family mode** (docs/operations.md#stream-families): a connection above BUSCONSOLE_FAMILY_MODE_KEYS keys
is snapshotted by family, with per-stream samples of the members that matter only, and the tick's
snapshot run says so (``SnapshotRun.families[conn]["mode"] == "family"``). Its ``busconsole_connection_*``
totals of streams, entries, entries per second, groups, pending, DLQs and DLQ depth are then its newest
family rows' sums; otherwise (every stream sampled) they stay the per-stream samples' sums, exact for the
tick. A run that says nothing of the mode (made before the family snapshot) is judged by its rows: family
rows counting more keys than the tick's per-stream samples of the connection mean family mode. Lag is not
in a family row: in family mode the lag figures cover the kept members only (a lower bound), and so do
the consumer figures read from the mirror. Until a connection's first family pass completes it has no
family rows, and its totals are its per-stream samples' (in family mode, the kept members' only).
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime

from django.db.models import Count, Q, Sum

from eventbus.text import id_ms
from streams_app.metrics.models import FamilySample

#: Series every family has (keys, entries, groups, pending, DLQ depth); a rate and an oldest entry's age
#: come on top when known.
FAMILY_BASE_SERIES = 5


@dataclass(frozen=True, slots=True)
class FamilySeries:
    conn: str
    family: str
    keys: int
    entries: int
    rate: float | None
    groups: int
    pending: int
    dlq_depth: int
    oldest_age_s: float | None  # from the oldest entry's ID time to the pass's ``at``

    @property
    def series(self) -> int:
        return FAMILY_BASE_SERIES + (self.rate is not None) + (self.oldest_age_s is not None)

    @property
    def key(self) -> str:  # for :func:`~streams_app.metrics.exposition.families_order`
        return self.family


@dataclass(slots=True)
class FamilyTotals:
    """The sums over every family of one connection's newest rows."""

    at: datetime
    families: int = 0
    keys: int = 0
    entries: int = 0
    rate: float = 0.0
    groups: int = 0
    pending: int = 0
    dlq_keys: int = 0
    dlq_depth: int = 0
    complete: bool = True
    series: int = 0  # the family series a full export of every family would have


@dataclass(slots=True)
class FamilyView:
    """Per connection: the totals of its newest family rows and its top families' series, by row id."""

    totals: dict[str, FamilyTotals] = field(default_factory=dict)
    top: dict[str, list[int]] = field(default_factory=dict)
    values: dict[int, FamilySeries] = field(default_factory=dict)


def newest_family_at(conn: str, tick: datetime) -> datetime | None:
    """The ``at`` of ``conn``'s newest family rows at or before ``tick`` (one lookup on the index)."""
    rows = FamilySample.objects.filter(connection=conn, at__lte=tick).order_by("-at")
    return rows.values_list("at", flat=True).first()


def family_view(conns: list[str], *, tick: datetime, top_n: int) -> FamilyView:
    """The newest family rows of each of ``conns``: totals over all, the ``top_n`` largest as series."""
    out = FamilyView()
    for conn in conns:
        at = newest_family_at(conn, tick)
        if at is None:
            continue
        rows = FamilySample.objects.filter(connection=conn, at=at)
        sums = rows.aggregate(
            n=Count("id"), keys=Sum("keys"), entries=Sum("entries"), rate=Sum("rate_per_s"),
            rate_known=Count("rate_per_s"), groups=Sum("groups"), pending=Sum("pending"),
            dlq_keys=Sum("dlq_keys"), dlq_depth=Sum("dlq_depth"),
            oldest_known=Count("id", filter=~Q(oldest_id="")), incomplete=Count("id", filter=Q(complete=False)),
        )
        out.totals[conn] = FamilyTotals(
            at=at, families=sums["n"], keys=sums["keys"] or 0, entries=sums["entries"] or 0,
            rate=sums["rate"] or 0.0, groups=sums["groups"] or 0, pending=sums["pending"] or 0,
            dlq_keys=sums["dlq_keys"] or 0, dlq_depth=sums["dlq_depth"] or 0, complete=not sums["incomplete"],
            series=FAMILY_BASE_SERIES * sums["n"] + sums["rate_known"] + sums["oldest_known"],
        )
        if top_n <= 0:
            continue
        ids: list[int] = []
        for pk, family, keys, entries, rate, groups, pending, dlq_depth, oldest in rows.order_by(
            "-entries", "family"
        ).values_list(
            "id", "family", "keys", "entries", "rate_per_s", "groups", "pending", "dlq_depth", "oldest_id"
        )[:top_n]:
            oldest_ms = id_ms(oldest)
            age = None if oldest_ms is None else max(0.0, at.timestamp() - oldest_ms / 1000)
            out.values[pk] = FamilySeries(conn, family, keys, entries, rate, groups, pending, dlq_depth, age)
            ids.append(pk)
        out.top[conn] = ids
    return out
