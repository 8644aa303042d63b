"""What ``/metrics`` exposes of the newest snapshot: bounded, whatever the number of streams.

A scrape of every stream and group of a 100k-stream bus was 336k series and 25 MB, built in memory in
the web process: more than any Prometheus wants per target, and a memory spike per scrape. So the
exposition is, per connection:

- **aggregates** over everything the snapshot sampled (streams, entries, entries per second, groups,
  pending, lag, the longest pending idle time, DLQs and their depth), from a few ``GROUP BY`` queries,
  and over the mirror's consumers (how many, the longest idle time of any, and of any holding pending
  entries: a consumer that holds entries and does nothing is stuck). Consumers are aggregated, never a
  series each: a bus has more of them than of groups, and the console's group page names them;
- **per-object series** for the streams matching a BUSCONSOLE_METRICS_INCLUDE glob (with their groups),
  then the BUSCONSOLE_METRICS_TOP_N largest streams, the TOP_N groups with the most lag, the TOP_N with
  the most pending entries and the TOP_N deepest DLQs, never a stream matching a
  BUSCONSOLE_METRICS_EXCLUDE glob, and at most BUSCONSOLE_METRICS_MAX_SERIES per-object series in all
  (objects are taken in that order until the ceiling);
- **per-family series** (keys, entries, entries per second, groups, pending, DLQ depth, the oldest entry's
  age) for each connection's BUSCONSOLE_METRICS_TOP_N stream families with the most entries, from its newest
  family rows (:mod:`streams_app.metrics.family_exposition`), taken after the rankings above, within the
  same ceiling;
- how many per-object series (families included) the full export would have had, and how many were left
  out, and the same for the family series alone.

In **family mode** (a connection whose family rows count more streams than the tick's per-stream samples,
which then exist only for the members that matter) the connection aggregates of streams, entries, rate,
groups, pending, DLQs and DLQ depth are the family rows' sums (the rule and what it leaves a lower bound:
:mod:`streams_app.metrics.family_exposition`), and its top streams and groups are ranked among those the
tick sampled (the mirror keeps its rows from before family mode, which may no longer exist).

Objects are ranked in the mirror (whose figures each snapshot refreshes; the streams' length has an
index) and their values read from the snapshot's samples by id, so every query is bounded by the
ceiling or by an index, and memory by the ceiling.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from django.conf import settings
from django.db.models import Count, F, Max, Q, QuerySet, Sum

from eventbus.glob import Glob, glob_compile
from streams_app.metrics.bulk import chunks
from streams_app.metrics.family_exposition import FamilySeries, FamilyView, family_view
from streams_app.metrics.mirror import prefix_filter
from streams_app.metrics.models import (
    ConsumerMirror,
    DlqSample,
    GroupMirror,
    GroupSample,
    Resolution,
    SnapshotRun,
    StreamMirror,
    StreamSample,
)
from streams_app.redis_ops.client import connections

#: Rows a ranking looks at (in pages) before it gives up finding TOP_N objects outside the excluded ones.
RANK_SCAN_MAX = 20_000
_PAGE = 500


@dataclass(frozen=True, slots=True)
class StreamSeries:
    conn: str
    key: str
    length: int
    entries_added: int | None
    rate: float | None

    @property
    def series(self) -> int:
        return 1 + (self.entries_added is not None) + (self.rate is not None)


@dataclass(frozen=True, slots=True)
class GroupSeries:
    conn: str
    key: str
    group: str
    lag: int | None
    pending: int
    oldest_idle_ms: int | None  # the longest idle time among the pending entries (max over the PEL)

    @property
    def series(self) -> int:
        return 1 + (self.lag is not None) + (self.oldest_idle_ms is not None or self.pending == 0)


@dataclass(frozen=True, slots=True)
class DlqSeries:
    conn: str
    key: str
    convention: str
    depth: int

    series = 1


@dataclass(slots=True)
class Aggregate:
    """One connection's totals over everything the snapshot sampled."""

    streams: int = 0
    entries: int = 0
    entries_per_second: float = 0.0
    groups: int = 0
    pending: int = 0
    lag: int = 0
    lag_max: int | None = None
    #: groups whose lag Redis could not tell: ``lag`` and ``lag_max`` leave them out (lower bounds then)
    lag_unknown: int = 0
    oldest_pending_age_ms_max: int | None = None  # the longest pending idle time of any group
    dlqs: int = 0
    dlq_depth: int = 0
    consumers: int = 0
    #: the longest idle time of any consumer (None: no consumer), as of the mirror's last read of its group
    consumer_idle_ms_max: int | None = None
    #: the same among the consumers holding pending entries (0: none holds any)
    consumer_pending_idle_ms_max: int = 0


@dataclass(slots=True)
class Exposition:
    aggregates: dict[str, Aggregate] = field(default_factory=dict)
    streams: list[StreamSeries] = field(default_factory=list)
    groups: list[GroupSeries] = field(default_factory=list)
    dlqs: list[DlqSeries] = field(default_factory=list)
    families: list[FamilySeries] = field(default_factory=list)
    total_series: int = 0  # per-object series of the full export (families included)
    emitted_series: int = 0
    family_total_series: int = 0  # the family series alone
    family_emitted_series: int = 0
    #: per connection with family rows: the ``at`` of the rows shown, and whether the aggregates came from them
    family_at: dict[str, datetime] = field(default_factory=dict)
    family_mode: dict[str, bool] = field(default_factory=dict)

    @property
    def omitted_series(self) -> int:
        return max(0, self.total_series - self.emitted_series)

    @property
    def family_omitted_series(self) -> int:
        return max(0, self.family_total_series - self.family_emitted_series)


def exposition_build(*, tick: datetime) -> Exposition:
    """The bounded exposition of the snapshot of ``tick`` (see the module docstring)."""
    at = {"resolution": Resolution.RAW, "at": tick}
    out = Exposition()
    out.total_series = _aggregates(at, out.aggregates)
    include = [glob_compile(g) for g in settings.BUSCONSOLE_METRICS_INCLUDE]
    exclude = [glob_compile(g) for g in settings.BUSCONSOLE_METRICS_EXCLUDE]
    ceiling = settings.BUSCONSOLE_METRICS_MAX_SERIES
    top_n = settings.BUSCONSOLE_METRICS_TOP_N
    fam = family_view(sorted(set(out.aggregates) | {c.name for c in connections()}), tick=tick, top_n=top_n)
    run = SnapshotRun.objects.filter(tick=tick).first()
    _family_aggregates(out, fam, marks=getattr(run, "families", None) or {})
    _consumer_aggregates(out.aggregates)

    # Candidates in priority order: ("stream" | "group" | "dlq", mirror id) or ("family", family row id).
    wanted: list[tuple[str, int]] = []
    for conn in sorted(out.aggregates):
        pinned = _included(conn, include, exclude, limit=ceiling)
        wanted += [("stream", pk) for pk in pinned]
        wanted += [("group", pk) for pk in _rows_in(GroupMirror.objects.filter(deleted_at__isnull=True),
                                                     "stream_id", pinned, "id")]
        wanted += [("dlq", pk) for pk in _dlq_ids(pinned)]
        live = StreamMirror.objects.filter(connection=conn, deleted_at__isnull=True)
        groups = GroupMirror.objects.filter(
            stream__connection=conn, deleted_at__isnull=True, stream__deleted_at__isnull=True
        )
        if out.family_mode.get(conn):
            # The mirror keeps the rows it had before family mode (it marks nothing deleted then): rank
            # among the streams this tick sampled, the members that matter (a few thousand at most).
            live = live.filter(id__in=StreamSample.objects.filter(**at).values("stream_id"))
            groups = groups.filter(id__in=GroupSample.objects.filter(**at).values("group_id"))
        wanted += [("stream", pk) for pk in _ranked(live.order_by("-length", "id"), "key", exclude, top_n)]
        wanted += [("group", pk) for pk in _ranked(
            groups.order_by(F("lag").desc(nulls_last=True), "id"), "stream__key", exclude, top_n)]
        wanted += [("group", pk) for pk in _ranked(
            groups.order_by("-pending", "id"), "stream__key", exclude, top_n)]
        wanted += [("dlq", pk) for pk in _ranked(
            live.filter(is_dlq=True).order_by("-length", "id"), "key", exclude, top_n)]
        wanted += [("family", pk) for pk in fam.top.get(conn, [])]

    ordered = list(dict.fromkeys(wanted))  # first mention wins
    values = _values(at, ordered)
    values.update({("family", pk): v for pk, v in fam.values.items()})
    for kind_id in ordered:
        item = values.get(kind_id)
        if item is None:  # not sampled at this tick (vanished since the mirror saw it)
            continue
        if out.emitted_series + item.series > ceiling:
            continue  # a smaller one further down may still fit
        out.emitted_series += item.series
        if kind_id[0] == "family":
            out.family_emitted_series += item.series
        by_kind: dict[str, list[Any]] = {
            "stream": out.streams, "group": out.groups, "dlq": out.dlqs, "family": out.families,
        }
        by_kind[kind_id[0]].append(item)
    return out


def _family_aggregates(out: Exposition, fam: FamilyView, *, marks: dict[str, Any]) -> None:
    """Count every family's series, and take a connection's totals from its family rows in family mode.

    Family mode is what the tick's snapshot run says of the connection (``SnapshotRun.families[conn]["mode"]``,
    ``"family"`` or ``"stream"``); a run that says nothing (made before the family snapshot existed) is
    judged by its rows: family rows counting more keys than the tick's per-stream samples.
    """
    for conn, totals in fam.totals.items():
        out.family_total_series += totals.series
        out.total_series += totals.series
        out.family_at[conn] = totals.at
        agg = out.aggregates.setdefault(conn, Aggregate())
        mark = marks.get(conn)
        mode = mark.get("mode") if isinstance(mark, dict) else None
        out.family_mode[conn] = family_mode = mode == "family" if mode in ("family", "stream") else totals.keys > agg.streams
        if family_mode:
            agg.streams, agg.entries, agg.entries_per_second = totals.keys, totals.entries, totals.rate
            agg.groups, agg.pending = totals.groups, totals.pending
            agg.dlqs, agg.dlq_depth = totals.dlq_keys, totals.dlq_depth


def _aggregates(at: dict[str, Any], into: dict[str, Aggregate]) -> int:
    """Fill ``into`` per connection; returns the per-object series of the full export."""
    total = 0
    for row in StreamSample.objects.filter(**at).values("stream__connection").annotate(
        n=Count("id"), entries=Sum("length"), rate_sum=Sum("rate_per_s"), added_known=Count("entries_added"),
        rate_known=Count("rate_per_s"),
    ).order_by():
        agg = into.setdefault(row["stream__connection"], Aggregate())
        agg.streams, agg.entries, agg.entries_per_second = row["n"], row["entries"] or 0, row["rate_sum"] or 0.0
        total += row["n"] + row["added_known"] + row["rate_known"]
    for group_row in GroupSample.objects.filter(**at).values("group__stream__connection").annotate(
        n=Count("id"), pending_sum=Sum("pending"), lag_sum=Sum("lag"), lag_max=Max("lag"), lag_known=Count("lag"),
        oldest=Max("oldest_pending_idle_ms"),
        oldest_known=Count("id", filter=Q(oldest_pending_idle_ms__isnull=False) | Q(pending=0)),
    ).order_by():
        agg = into.setdefault(group_row["group__stream__connection"], Aggregate())
        agg.groups, agg.pending, agg.lag = group_row["n"], group_row["pending_sum"] or 0, group_row["lag_sum"] or 0
        agg.lag_max, agg.oldest_pending_age_ms_max = group_row["lag_max"], group_row["oldest"]
        agg.lag_unknown = group_row["n"] - group_row["lag_known"]
        total += group_row["n"] + group_row["lag_known"] + group_row["oldest_known"]
    for dlq_row in DlqSample.objects.filter(**at).values("stream__connection").annotate(
        n=Count("id"), depth_sum=Sum("depth")
    ).order_by():
        agg = into.setdefault(dlq_row["stream__connection"], Aggregate())
        agg.dlqs, agg.dlq_depth = dlq_row["n"], dlq_row["depth_sum"] or 0
        total += dlq_row["n"]
    return total


def _consumer_aggregates(into: dict[str, Aggregate]) -> None:
    """The consumers of the connections in ``into``, from the mirror: how many (each snapshot refreshes a
    group's count) and their longest idle times (as of the mirror sync that last read the group's consumers:
    a full sync reads every group, so an idle time is never overstated, at worst BUSCONSOLE_MIRROR_FULL_EVERY_S
    old)."""
    live = {"deleted_at__isnull": True, "stream__deleted_at__isnull": True}
    for row in GroupMirror.objects.filter(**live).values("stream__connection").annotate(
        n=Sum("consumers")
    ).order_by():
        if (agg := into.get(row["stream__connection"])) is not None:
            agg.consumers = row["n"] or 0
    for consumer_row in ConsumerMirror.objects.filter(
        deleted_at__isnull=True, **{f"group__{k}": v for k, v in live.items()}
    ).values("group__stream__connection").annotate(
        idle=Max("idle_ms"), holding=Max("idle_ms", filter=Q(pending__gt=0))
    ).order_by():
        if (agg := into.get(consumer_row["group__stream__connection"])) is not None:
            agg.consumer_idle_ms_max, agg.consumer_pending_idle_ms_max = consumer_row["idle"], consumer_row["holding"] or 0


def _excluded(key: bytes, exclude: Sequence[Glob]) -> bool:
    return any(g.matches(key) for g in exclude)


def _ranked(rows: QuerySet, key_column: str, exclude: Sequence[Glob], n: int) -> list[int]:
    """The ids of the first ``n`` rows (in ``rows``' order) whose stream key no exclude glob matches.

    Read in pages of at most :data:`_PAGE` and :data:`RANK_SCAN_MAX` rows in all: an exclude glob that
    matches nearly everything costs a bounded scan, not the whole table.
    """
    if n <= 0:
        return []
    if not exclude:
        return list(rows.values_list("id", flat=True)[:n])
    out: list[int] = []
    for start in range(0, RANK_SCAN_MAX, _PAGE):
        page = list(rows.values_list("id", key_column)[start : start + _PAGE])
        out += [pk for pk, key in page if not _excluded(bytes(key), exclude)]
        if len(out) >= n or len(page) < _PAGE:
            break
    return out[:n]


def _included(conn: str, include: Sequence[Glob], exclude: Sequence[Glob], *, limit: int) -> list[int]:
    """Ids of ``conn``'s live streams matching an include glob (and no exclude glob), at most ``limit``.

    Each glob's literal prefix narrows the rows in SQL (:func:`~streams_app.metrics.mirror.prefix_filter`); the rest of the glob is
    matched here against the key's bytes, with Redis's semantics.
    """
    out: dict[int, None] = {}
    for glob in include:
        rows = prefix_filter(StreamMirror.objects.filter(connection=conn, deleted_at__isnull=True),
                             glob.literal_prefix)
        for pk, key in rows.order_by("id").values_list("id", "key").iterator(chunk_size=_PAGE):
            if len(out) >= limit:
                return list(out)
            key = bytes(key)
            if glob.matches(key) and not _excluded(key, exclude):
                out[pk] = None
    return list(out)


def _dlq_ids(stream_ids: Sequence[int]) -> list[int]:
    return _rows_in(StreamMirror.objects.filter(is_dlq=True), "id", stream_ids, "id")


def _rows_in(rows: QuerySet, column: str, ids: Sequence[int], value: str) -> list[Any]:
    out: list[Any] = []
    for part in chunks(list(ids), 500):
        out += rows.filter(**{f"{column}__in": list(part)}).order_by("id").values_list(value, flat=True)
    return out


def _values(
    at: dict[str, Any], ordered: Iterable[tuple[str, int]]
) -> dict[tuple[str, int], StreamSeries | GroupSeries | DlqSeries | FamilySeries]:
    """The sampled values of the wanted objects at the tick, by (kind, mirror id)."""
    ids: dict[str, list[int]] = {"stream": [], "group": [], "dlq": [], "family": []}
    for kind, pk in ordered:
        ids[kind].append(pk)
    out: dict[tuple[str, int], Any] = {}
    for part in chunks(ids["stream"], 500):
        for pk, conn, key, length, added, rate in StreamSample.objects.filter(**at, stream_id__in=list(part)).values_list(
            "stream_id", "stream__connection", "stream__key_text", "length", "entries_added", "rate_per_s"
        ):
            out[("stream", pk)] = StreamSeries(conn, key, length, added, rate)
    for part in chunks(ids["group"], 500):
        for pk, conn, key, group, lag, pending, idle in GroupSample.objects.filter(
            **at, group_id__in=list(part)
        ).values_list(
            "group_id", "group__stream__connection", "group__stream__key_text", "group__name_text", "lag",
            "pending", "oldest_pending_idle_ms",
        ):
            out[("group", pk)] = GroupSeries(conn, key, group, lag, pending, idle)
    for part in chunks(ids["dlq"], 500):
        for pk, conn, key, convention, depth in DlqSample.objects.filter(**at, stream_id__in=list(part)).values_list(
            "stream_id", "stream__connection", "stream__key_text", "stream__dlq_convention", "depth"
        ):
            out[("dlq", pk)] = DlqSeries(conn, key, convention, depth)
    return out


def families_order(items: Iterable[Any]) -> Iterator[Any]:
    """``items`` sorted by their labels, so that two scrapes list the same series in the same order."""
    return iter(sorted(items, key=lambda i: tuple(str(v) for v in (i.conn, i.key, getattr(i, "group", "")))))
