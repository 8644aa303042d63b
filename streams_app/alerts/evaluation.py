"""Alert rules evaluated after every metric snapshot, with an open/resolved lifecycle and webhooks.

:func:`alerts_evaluate` runs once per snapshot tick (connected to ``snapshot_taken`` in
``StreamsAppConfig.ready``). For each enabled rule it computes the set of targets breaching now,
opens an :class:`~streams_app.models.Alert` for each new one, keeps open ones up to date and resolves
those that no longer breach. Each transition of a rule that has a webhook is POSTed as JSON by the
Celery task ``alert_notify`` (retried with backoff), enqueued once the transaction commits.

How each kind reads (N = ``threshold``, T = ``for_seconds``; "now" is the snapshot tick):

``group_lag_above``
    the group's lag in this tick's sample is above N, and every raw sample since some moment at or
    before now - T was above N too (the streak start is found from the samples, so a new rule fires at once for a
    group that has been lagging for long enough, and the alert says since when). Unknown lag
    (``None``, docs/architecture.md#lag-redis-cannot-tell) never breaches.
``oldest_pending_above``
    one of the group's pending entries has been idle (not delivered again) for longer than T: this tick's
    sample holds the longest idle time over the group's PEL (the maximum, not the lowest ID's, which a
    claim makes fresh: see :mod:`streams_app.redis_ops.pending_idle` for how it is bounded; when the
    bounded search stops early it is a lower bound, so a breach it shows is real). The kind keeps its
    stored name.
``dlq_growth``
    a DLQ's depth at this tick minus its lowest depth among the raw samples of the last T is at least N
    (N < 1 counts as 1). It resolves once the DLQ has not grown by N for T.
``consumer_inactive``
    the consumer's idle time in the mirror (the time since it last read, claimed or acked: a live
    worker's blocking reads keep it low, so it is what tells a dead worker) is above T.
``stream_silent``
    no entry was added for T (the time part of the stream's last generated ID in the mirror, and no
    snapshot since T ago counted an added entry), and the stream usually
    receives entries: at least max(N, 1) were added during the baseline, the max(T, 1 h) before the
    silent window. Once open it stays open until entries arrive again, however long the silence.
    Streams whose IDs are not time-based (explicit IDs) cannot be judged this way; DLQs are skipped
    (a silent DLQ is good news).
``family_*``
    a stream family's figure from its connection's newest family rows: see
    :mod:`streams_app.alerts.family_evaluation`.

Evaluation is bulk per rule (one query over the tick's samples or the mirror, one aggregate over the
samples where needed, per-target queries only for targets that newly breach), and a rule that fails is
logged and skipped without stopping the others or the snapshot. Alerts on a connection the tick could
not sample stay as they are. Webhook delivery lives in :mod:`streams_app.alerts.webhooks`, rule editing
in :mod:`streams_app.alerts.rules`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Iterable, Iterator, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta
from typing import TypeVar

from django.db import IntegrityError, transaction
from django.db.models import Min, Q, QuerySet, Sum

from busconsole.locks import lock_held
from eventbus.glob import glob_match
from eventbus.text import display_text, id_ms
from streams_app.alerts.family_evaluation import FAMILY_EVALUATORS
from streams_app.alerts.models import Alert, AlertRule
from streams_app.alerts.targets import MAX_NEW_PER_TICK, Breach, Target
from streams_app.alerts.webhooks import alerts_notify_on_commit
from streams_app.metrics.bulk import chunks
from streams_app.metrics.charts import format_value
from streams_app.metrics.models import (
    ConsumerMirror,
    DlqSample,
    GroupMirror,
    GroupSample,
    SnapshotRun,
    StreamMirror,
    StreamSample,
    name_hash,
)
from streams_app.metrics.signals import snapshot_taken
from streams_app.metrics.ticks import ticks_back, window_parts

log = logging.getLogger(__name__)

T_ = TypeVar("T_")

Kind = AlertRule.Kind
RAW = "raw"
#: SQLite allows a limited number of parameters per statement; ``__in`` lists are sent in chunks.
_CHUNK = 500
SILENT_BASELINE_MIN_S = 3600



# ----------------------------------------------------------------------------------------- targets


@dataclass(frozen=True, slots=True)
class Evaluation:
    opened: tuple[int, ...]
    resolved: tuple[int, ...]
    still_open: int
    failed_rules: tuple[int, ...] = ()


def _matches(pattern: str, raw: bytes) -> bool:
    """Rule globs follow Redis's own semantics on the raw bytes, like the streams page's filter."""
    return glob_match(pattern or "*", raw)


def _for_rule(
    rule: AlertRule,
    rows: Iterable[T_],
    *,
    stream_of: Callable[[T_], StreamMirror],
    group_of: Callable[[T_], GroupMirror] | None = None,
) -> Iterator[T_]:
    """The rows whose connection, stream key and (for group and consumer rules) group match the rule."""
    for row in rows:
        s = stream_of(row)
        if rule.connection and s.connection != rule.connection:
            continue
        if not _matches(rule.stream_glob, s.key_bytes):
            continue
        if group_of is not None and not _matches(rule.group_glob, group_of(row).name_bytes):
            continue
        yield row


def _ms(value: float) -> str:
    return format_value(value, "ms")


def _utc(moment: datetime) -> str:
    return f"{moment:%Y-%m-%d %H:%M:%S} UTC"


# -------------------------------------------------------------------------------------- evaluators
#
# Each evaluator answers "which targets of this rule breach at ``tick``?" as {target hash: Breach}.
# Group figures come from the tick's own raw samples (exact for the tick, and a group that vanished
# has none, so its alerts resolve); consumers and last-entry times come from the mirror, which the
# mirror sync refreshes every BUSCONSOLE_MIRROR_INTERVAL_S.


def _tick_groups(rule: AlertRule, tick: datetime) -> QuerySet[GroupSample]:
    rows = GroupSample.objects.filter(resolution=RAW, at=tick).select_related("group__stream")
    if rule.connection:
        rows = rows.filter(group__stream__connection=rule.connection)
    return rows


def _sample_stream(sample: GroupSample) -> StreamMirror:
    return sample.group.stream


def _sample_group(sample: GroupSample) -> GroupMirror:
    return sample.group


def _group_target(g: GroupMirror) -> Target:
    return Target(connection=g.stream.connection, key=g.stream.key_bytes, group=g.name_bytes)


def _lag_streak_starts(group_ids: Sequence[int], threshold: float, tick: datetime) -> dict[int, datetime | None]:
    """When each group's current run of raw samples with lag above ``threshold`` began (None: no run).

    The run is the group's samples at or before ``tick``, newest first, up to the first whose lag is not
    above (or unknown); ticks without a sample of the group are passed over. The sample tables are keyed
    time first, so this walks back through the ticks (streams_app.metrics.ticks) in pages that grow from a
    few ticks (most runs are short) and reads the samples of the groups still in a run at each page's
    ticks, until every run has ended or the table's first tick is passed."""
    start: dict[int, datetime | None] = dict.fromkeys(group_ids)
    open_runs = set(group_ids)
    for page in ticks_back(GroupSample, RAW, until=tick):
        seen: dict[int, list[tuple[datetime, int | None]]] = {}
        for ids in chunks(sorted(open_runs), _CHUNK):
            for ats in chunks(page, _CHUNK):
                rows = GroupSample.objects.filter(group_id__in=ids, resolution=RAW, at__in=ats)
                for group_id, at, lag in rows.values_list("group_id", "at", "lag"):
                    seen.setdefault(group_id, []).append((at, lag))
        for group_id, samples in seen.items():
            for at, lag in sorted(samples, reverse=True):
                if lag is None or lag <= threshold:
                    open_runs.discard(group_id)
                    break
                start[group_id] = at
        if not open_runs:
            break
    return start


def evaluate_group_lag(rule: AlertRule, tick: datetime, open_alerts: dict[str, Alert]) -> dict[str, Breach]:
    n, t = rule.threshold, rule.for_seconds
    out: dict[str, Breach] = {}
    over = _tick_groups(rule, tick).filter(lag__gt=n)
    rows = list(_for_rule(rule, over, stream_of=_sample_stream, group_of=_sample_group))
    targets = {sample.group_id: _group_target(sample.group) for sample in rows}
    fresh = [sample.group_id for sample in rows if targets[sample.group_id].hash not in open_alerts]
    starts = _lag_streak_starts(fresh, n, tick) if fresh else {}
    new = 0
    for sample in rows:
        target = targets[sample.group_id]
        existing = open_alerts.get(target.hash)
        if existing is not None:
            since = existing.since
        else:
            if new >= MAX_NEW_PER_TICK:
                continue
            since = starts[sample.group_id]
            if since is None or since > tick - timedelta(seconds=t):
                continue
            new += 1
        out[target.hash] = Breach(
            target=target,
            value=float(sample.lag or 0),
            since=since,
            message=f"Lag {sample.lag} is above {format_value(n)}"
            + (f", and has been since {_utc(since)}" if since else "")
            + f" (the rule allows {_ms(t * 1000)}).",
        )
    return out


def evaluate_oldest_pending(rule: AlertRule, tick: datetime, open_alerts: dict[str, Alert]) -> dict[str, Breach]:
    limit_ms = rule.for_seconds * 1000
    out: dict[str, Breach] = {}
    rows = _tick_groups(rule, tick).filter(oldest_pending_idle_ms__gt=limit_ms)
    for sample in _for_rule(rule, rows, stream_of=_sample_stream, group_of=_sample_group):
        target = _group_target(sample.group)
        idle = int(sample.oldest_pending_idle_ms or 0)
        entry = sample.group.oldest_pending_id  # the idlest entry, as the same snapshot refreshed it
        out[target.hash] = Breach(
            target=target,
            value=float(idle),
            since=tick - timedelta(milliseconds=idle),
            message=f"A pending entry{f' ({entry})' if entry else ''} has been idle for {_ms(idle)}, longer "
            f"than {_ms(limit_ms)} (the longest idle of the group's {sample.pending} pending).",
        )
    return out


def evaluate_dlq_growth(rule: AlertRule, tick: datetime, open_alerts: dict[str, Alert]) -> dict[str, Breach]:
    n = max(1.0, rule.threshold)
    t = rule.for_seconds
    now_rows = DlqSample.objects.filter(resolution=RAW, at=tick).select_related("stream")
    if rule.connection:
        now_rows = now_rows.filter(stream__connection=rule.connection)
    current = {d.stream_id: d for d in _for_rule(rule, now_rows, stream_of=lambda d: d.stream)}
    lowest: dict[int, int] = {}
    window = {"since": tick - timedelta(seconds=t), "until": tick}
    for ids, ats in window_parts(DlqSample, RAW, list(current), size=_CHUNK, **window):
        for row in (
            DlqSample.objects.filter(stream_id__in=ids, resolution=RAW, at__in=ats)
            .values("stream_id")
            .annotate(lo=Min("depth"))
        ):
            lowest[row["stream_id"]] = min(row["lo"], lowest.get(row["stream_id"], row["lo"]))
    out: dict[str, Breach] = {}
    for pk, d in current.items():
        lo = lowest.get(pk, d.depth)
        growth = d.depth - lo
        if growth >= n:
            target = Target(connection=d.stream.connection, key=d.stream.key_bytes)
            out[target.hash] = Breach(
                target=target,
                value=float(growth),
                message=f"Depth grew by {growth} (from {lo} to {d.depth}) within {_ms(t * 1000)}; "
                f"the rule allows growth below {format_value(n)}.",
            )
    return out


def evaluate_consumer_inactive(rule: AlertRule, tick: datetime, open_alerts: dict[str, Alert]) -> dict[str, Breach]:
    limit_ms = rule.for_seconds * 1000
    rows = ConsumerMirror.objects.filter(
        deleted_at__isnull=True,
        group__deleted_at__isnull=True,
        group__stream__deleted_at__isnull=True,
        idle_ms__gt=limit_ms,
    ).select_related("group__stream")
    if rule.connection:
        rows = rows.filter(group__stream__connection=rule.connection)
    out: dict[str, Breach] = {}
    for c in _for_rule(rule, rows, stream_of=lambda c: c.group.stream, group_of=lambda c: c.group):
        stream = c.group.stream
        target = Target(
            connection=stream.connection, key=stream.key_bytes, group=c.group.name_bytes, consumer=c.name_bytes
        )
        out[target.hash] = Breach(
            target=target,
            value=float(c.idle_ms),
            since=c.last_seen - timedelta(milliseconds=int(c.idle_ms)),
            message=f"Consumer {c.name_text} idle for {_ms(c.idle_ms)} (as of {_utc(c.last_seen)}), longer than "
            f"{_ms(limit_ms)}; it holds {c.pending} pending.",
        )
    return out


def evaluate_stream_silent(rule: AlertRule, tick: datetime, open_alerts: dict[str, Alert]) -> dict[str, Breach]:
    t = rule.for_seconds
    need = max(1, int(rule.threshold))
    tick_ms = int(tick.timestamp() * 1000)
    silent_after_ms = tick_ms - t * 1000  # newest entry older than this: silent for T
    baseline_start_ms = silent_after_ms - max(t, SILENT_BASELINE_MIN_S) * 1000
    rows = StreamMirror.objects.filter(deleted_at__isnull=True, is_dlq=False).filter(
        Q(last_entry_ms__lt=silent_after_ms) | Q(last_entry_ms__isnull=True)
    )
    if rule.connection:
        rows = rows.filter(connection=rule.connection)
    candidates: dict[int, tuple[StreamMirror, Target, int]] = {}
    for s in _for_rule(rule, rows, stream_of=lambda s: s):
        last_ms = max((v for v in (id_ms(s.last_generated_id), s.last_entry_ms) if v is not None), default=0)
        if not last_ms or last_ms >= silent_after_ms:
            continue
        target = Target(connection=s.connection, key=s.key_bytes)
        # Open already: stays open until entries arrive. New: it must have gone silent in the baseline.
        if target.hash in open_alerts or last_ms >= baseline_start_ms:
            candidates[s.pk] = (s, target, last_ms)
    # The mirror may be a sync interval old: entries the snapshots saw arrive since then end the silence.
    arrived: set[int] = set()
    recent = {"after": tick - timedelta(seconds=t), "until": tick}
    for ids, ats in window_parts(StreamSample, RAW, list(candidates), size=_CHUNK, **recent):
        arrived.update(
            StreamSample.objects.filter(stream_id__in=ids, resolution=RAW, at__in=ats, added__gt=0).values_list(
                "stream_id", flat=True
            )
        )
    added: dict[int, int] = {}
    if need > 1:
        start = tick - timedelta(milliseconds=tick_ms - baseline_start_ms)
        end = tick - timedelta(seconds=t)
        fresh = [pk for pk, (_, target, _) in candidates.items() if target.hash not in open_alerts and pk not in arrived]
        for ids, ats in window_parts(StreamSample, RAW, fresh, size=_CHUNK, after=start, until=end):
            for row in (
                StreamSample.objects.filter(stream_id__in=ids, resolution=RAW, at__in=ats)
                .values("stream_id")
                .annotate(total=Sum("added"))
            ):
                added[row["stream_id"]] = added.get(row["stream_id"], 0) + int(row["total"] or 0)
    out: dict[str, Breach] = {}
    for pk, (_, target, last_ms) in candidates.items():
        if pk in arrived:
            continue
        if target.hash not in open_alerts and need > 1 and added.get(pk, 0) < need:
            continue
        since = tick - timedelta(milliseconds=tick_ms - last_ms)
        silent_ms = tick_ms - last_ms
        out[target.hash] = Breach(
            target=target,
            value=float(silent_ms),
            since=since,
            message=f"No entry added for {_ms(silent_ms)} (the last at {_utc(since)}); "
            f"the rule allows {_ms(t * 1000)}.",
        )
    return out


EVALUATORS: dict[str, Callable[[AlertRule, datetime, dict[str, Alert]], dict[str, Breach]]] = {
    Kind.GROUP_LAG_ABOVE: evaluate_group_lag,
    Kind.OLDEST_PENDING_ABOVE: evaluate_oldest_pending,
    Kind.DLQ_GROWTH: evaluate_dlq_growth,
    Kind.CONSUMER_INACTIVE: evaluate_consumer_inactive,
    Kind.STREAM_SILENT: evaluate_stream_silent,
    **FAMILY_EVALUATORS,
}


# ------------------------------------------------------------------------------------- lifecycle


def _reconcile(
    rule: AlertRule,
    breaches: dict[str, Breach],
    open_alerts: dict[str, Alert],
    now: datetime,
    *,
    unsampled: frozenset[str] = frozenset(),
) -> tuple[list[int], list[int]]:
    """Open, update and resolve the rule's alerts so that open ones are exactly ``breaches``.

    Open alerts on a connection in ``unsampled`` (unreachable at this tick: no samples, so no
    evidence either way) stay as they are rather than resolve and reopen a tick later.
    """
    opened: list[int] = []
    resolved: list[int] = []
    changed: list[Alert] = []
    for digest, breach in breaches.items():
        alert = open_alerts.get(digest)
        if alert is None:
            t = breach.target
            try:
                with transaction.atomic():
                    alert = Alert.objects.create(
                        rule=rule, connection=t.connection, target_key=t.key, key_hash=name_hash(t.key),
                        target_text=display_text(t.key), target_group_name=t.group or None,
                        target_group=display_text(t.group), target_consumer=display_text(t.consumer),
                        target_hash=digest, since=breach.since, opened_at=now, last_value=breach.value,
                        message=breach.message,
                    )
            except IntegrityError:  # a concurrent evaluation of the same tick opened it first
                continue
            opened.append(alert.pk)
        elif alert.last_value != breach.value or alert.message != breach.message:
            alert.last_value, alert.message = breach.value, breach.message
            changed.append(alert)
    if changed:
        Alert.objects.bulk_update(changed, ["last_value", "message"], batch_size=_CHUNK)
    gone = [a for digest, a in open_alerts.items() if digest not in breaches and a.connection not in unsampled]
    for alert in gone:
        alert.state = Alert.State.RESOLVED
        alert.resolved_at = now
    if gone:
        Alert.objects.bulk_update(gone, ["state", "resolved_at"], batch_size=_CHUNK)
        resolved = [a.pk for a in gone]
    return opened, resolved


def alerts_evaluate(*, tick: datetime) -> Evaluation:
    """Evaluate every enabled rule at ``tick`` and move alerts between open and resolved."""
    with lock_held(name=f"alerts-evaluate:{int(tick.timestamp())}", ttl_ms=120_000) as acquired:
        if not acquired:
            log.info("alerts for tick %s are already being evaluated", tick)
            return Evaluation(opened=(), resolved=(), still_open=0)
        opened, resolved, failed = _evaluate_rules(tick)
    return Evaluation(
        opened=tuple(opened),
        resolved=tuple(resolved),
        still_open=Alert.objects.filter(state=Alert.State.OPEN).count(),
        failed_rules=tuple(failed),
    )


def _evaluate_rules(tick: datetime) -> tuple[list[int], list[int], list[int]]:
    """Every rule in turn: the alerts opened, the alerts resolved, the rules that failed."""
    opened: list[int] = []
    resolved: list[int] = []
    failed: list[int] = []
    run = SnapshotRun.objects.filter(tick=tick).first()
    unsampled = frozenset(e.get("conn", "") for e in (run.errors if run else []) if isinstance(e, dict))
    for rule in AlertRule.objects.all():
        open_alerts = {a.target_hash: a for a in rule.alerts.filter(state=Alert.State.OPEN)}
        if not rule.enabled:
            breaches: dict[str, Breach] = {}
        else:
            try:
                breaches = EVALUATORS[rule.kind](rule, tick, open_alerts)
            except Exception:
                log.exception("alert rule %s (%s) failed to evaluate", rule.pk, rule.kind)
                failed.append(rule.pk)
                continue
        with transaction.atomic():
            o, r = _reconcile(rule, breaches, open_alerts, tick, unsampled=unsampled)
        opened += o
        resolved += r
        if rule.webhook_url and (o or r):
            alerts_notify_on_commit([*o, *r])
    return opened, resolved, failed


def on_snapshot_taken(sender: object, *, tick: datetime, **kwargs: object) -> None:
    """``snapshot_taken`` receiver: evaluation never fails the snapshot that triggered it."""
    try:
        alerts_evaluate(tick=tick)
    except Exception:
        log.exception("alert evaluation after the snapshot of %s failed", tick)


def connect() -> None:
    """Called from ``StreamsAppConfig.ready``."""
    snapshot_taken.connect(on_snapshot_taken, dispatch_uid="streams_app.alerts.evaluation.on_snapshot_taken")


# ------------------------------------------------------------------------------------- reading


def alerts_for_page(*, conn: str, key: bytes, group: bytes | None = None, limit: int = 20) -> list[Alert]:
    """Open alerts about a stream (and, given ``group``, that group and its consumers)."""
    rows = Alert.objects.select_related("rule").filter(state=Alert.State.OPEN, connection=conn, key_hash=name_hash(key))
    if group is not None:
        rows = rows.filter(target_group=display_text(group))
    return list(rows.order_by("-opened_at")[:limit])


def alerts_open(*, limit: int) -> tuple[list[Alert], int]:
    """The newest ``limit`` open alerts, anywhere, and how many are open in all."""
    rows = Alert.objects.filter(state=Alert.State.OPEN).select_related("rule")
    return list(rows.order_by("-opened_at")[:limit]), rows.count()
