"""Alert rules over stream families, evaluated after every snapshot from the newest family rows.

At a million keys there is no per-stream sample of every stream (docs/operations.md#stream-families): a
rule about ``progress:*`` reads the family's :class:`~streams_app.metrics.models.FamilySample` rows
instead. For each connection the rule watches (``connection``, else every configured one) the rows are
those of the newest ``at`` at or before the tick (the family pass that finished last; in family mode a
pass takes several ticks, and its rows stand until the next one completes). A rule watches one family, by
the glob's text as the families page shows it, or every family when ``family`` is blank or ``*``.
A family missing from the newest rows (no key left) breaches nothing, so its alert resolves.

How each kind reads (N = ``threshold``, T = ``for_seconds``; "now" is the snapshot tick):

``family_keys_above``, ``family_entries_above``, ``family_pending_above``, ``family_dlq_depth_above``, ``family_rate_above``
    the figure (keys, entries, pending entries, DLQ depth, entries per second) in the newest row is above N,
    and every row of the family since some ``at`` at or before now - T was above N too (the streak is found
    from the family's rows, as the group lag rule finds it from its samples). An unknown rate (a family's
    first row, or counters that fell) never breaches.
``family_dlq_growth``
    the family's DLQ depth in the newest row minus its lowest depth among the family's rows of the last T
    is at least N (N < 1 counts as 1).

The alert's target is the family: its key is the glob's text, so the alerts page links to the family's
members. A row from a pass that stopped at its budget (``complete`` False) is a lower bound: a breach it
shows is real, and the message says so.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from datetime import datetime, timedelta

from django.db.models import Min, Q, QuerySet

from streams_app.alerts.models import Alert, AlertRule
from streams_app.alerts.targets import MAX_NEW_PER_TICK, Breach, Target
from streams_app.metrics.bulk import chunks
from streams_app.metrics.charts import format_value
from streams_app.metrics.family_exposition import newest_family_at
from streams_app.metrics.models import FamilySample
from streams_app.redis_ops.client import connections

Kind = AlertRule.Kind
#: The family row's column each "above N for T" kind reads, and how a message names it.
FIGURES: dict[str, tuple[str, str]] = {
    Kind.FAMILY_KEYS_ABOVE: ("keys", "keys"),
    Kind.FAMILY_ENTRIES_ABOVE: ("entries", "entries"),
    Kind.FAMILY_PENDING_ABOVE: ("pending", "pending entries"),
    Kind.FAMILY_DLQ_DEPTH_ABOVE: ("dlq_depth", "dead letters"),
    Kind.FAMILY_RATE_ABOVE: ("rate_per_s", "entries per second"),
}
_CHUNK = 500


def _newest(rule: AlertRule, tick: datetime) -> Iterator[tuple[datetime, QuerySet[FamilySample]]]:
    """Per connection the rule watches: the ``at`` of its newest family rows and those of the rule's family."""
    conns = [rule.connection] if rule.connection else [c.name for c in connections()]
    for conn in conns:
        at = newest_family_at(conn, tick)
        if at is None:
            continue
        rows = FamilySample.objects.filter(connection=conn, at=at)
        if rule.family not in ("", "*"):
            rows = rows.filter(family=rule.family)
        yield at, rows


def _target(row: FamilySample) -> Target:
    return Target(connection=row.connection, key=row.family.encode())


def _partial(row: FamilySample) -> str:
    if row.complete:
        return ""
    of = f" of {row.keys_total:,}" if row.keys_total is not None else ""
    return f" The pass looked at {row.looked_at:,}{of} keys: a lower bound."


def _streak_start(row: FamilySample, column: str, n: float) -> datetime | None:
    """When the family's current run of rows with ``column`` above ``n`` began (None: no run)."""
    rows = FamilySample.objects.filter(connection=row.connection, family_hash=row.family_hash, at__lte=row.at)
    last_ok = (
        rows.filter(Q(**{f"{column}__isnull": True}) | Q(**{f"{column}__lte": n}))
        .order_by("-at").values_list("at", flat=True).first()
    )
    streak = rows.filter(**{f"{column}__gt": n})
    if last_ok is not None:
        streak = streak.filter(at__gt=last_ok)
    return streak.order_by("at").values_list("at", flat=True).first()


def evaluate_family_above(rule: AlertRule, tick: datetime, open_alerts: dict[str, Alert]) -> dict[str, Breach]:
    column, noun = FIGURES[rule.kind]
    n, t = rule.threshold, rule.for_seconds
    out: dict[str, Breach] = {}
    new = 0
    for _, rows in _newest(rule, tick):
        for row in rows.filter(**{f"{column}__gt": n}).order_by("family"):
            target = _target(row)
            existing = open_alerts.get(target.hash)
            if existing is not None:
                since = existing.since
            else:
                if new >= MAX_NEW_PER_TICK:
                    continue
                since = _streak_start(row, column, n)
                if since is None or since > tick - timedelta(seconds=t):
                    continue
                new += 1
            value = float(getattr(row, column))
            out[target.hash] = Breach(
                target=target,
                value=value,
                since=since,
                message=f"Family {row.family}: {format_value(value)} {noun}, above {format_value(n)}"
                + (f" since {since:%Y-%m-%d %H:%M:%S} UTC" if since else "")
                + f" (the rule allows {format_value(t * 1000, 'ms')}; figures of the pass at "
                f"{row.at:%H:%M:%S} UTC).{_partial(row)}",
            )
    return out


def evaluate_family_dlq_growth(rule: AlertRule, tick: datetime, open_alerts: dict[str, Alert]) -> dict[str, Breach]:
    n = max(1.0, rule.threshold)
    t = rule.for_seconds
    out: dict[str, Breach] = {}
    for at, rows in _newest(rule, tick):
        current = {row.family_hash: row for row in rows.filter(dlq_depth__gte=n)}
        lowest: dict[str, int] = {}
        for hashes in chunks(list(current), _CHUNK):
            for found in (
                FamilySample.objects.filter(
                    connection=next(iter(current.values())).connection, family_hash__in=hashes,
                    at__gte=tick - timedelta(seconds=t), at__lte=at,
                ).values("family_hash").annotate(lo=Min("dlq_depth")).order_by()
            ):
                lowest[found["family_hash"]] = found["lo"]
        for digest, row in current.items():
            lo = lowest.get(digest, row.dlq_depth)
            if row.dlq_depth - lo >= n:
                target = _target(row)
                out[target.hash] = Breach(
                    target=target,
                    value=float(row.dlq_depth - lo),
                    message=f"Family {row.family}: DLQ depth grew by {row.dlq_depth - lo} (from {lo} to "
                    f"{row.dlq_depth}) within {format_value(t * 1000, 'ms')}; the rule allows growth below "
                    f"{format_value(n)}.{_partial(row)}",
                )
    return out


FAMILY_EVALUATORS: dict[str, Callable[[AlertRule, datetime, dict[str, Alert]], dict[str, Breach]]] = {
    **dict.fromkeys(FIGURES, evaluate_family_above),
    Kind.FAMILY_DLQ_GROWTH: evaluate_family_dlq_growth,
}
