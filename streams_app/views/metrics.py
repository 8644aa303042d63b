"""``/metrics``: the latest snapshot in the Prometheus text format, for a scraper holding an API token.

The figures come from the database (the last committed snapshot and the mirror's labels), never from
Redis, and the exposition is bounded whatever the number of streams (:mod:`streams_app.metrics.exposition`:
aggregates per connection, the top streams and groups, the stream families with the most entries,
include/exclude globs, a ceiling of BUSCONSOLE_METRICS_MAX_SERIES per-object series, and a count of what
was left out). Prometheus scrapers send
``Authorization: Bearer <token>`` (``bearer_token_file``); a browser session is not enough, so the
login-required middleware is told to stay out of the way and the view checks the token itself.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streams_app.accounts.tokens import user_for_bearer
from streams_app.metrics.exposition import Exposition, exposition_build, families_order
from streams_app.metrics.health import snapshot_health
from streams_app.metrics.models import MirrorState, SnapshotRun
from streams_app.redis_ops.client import connections


class SnapshotCollector(Collector):
    """The newest snapshot, bounded (aggregates, top objects), plus the snapshot and mirror jobs' health."""

    def __init__(self) -> None:
        self.exposition: Exposition | None = None

    def collect(self) -> Iterator[Metric]:
        run = SnapshotRun.objects.filter(finished_at__isnull=False).order_by("-tick").first()
        yield from self._job(run)
        yield from self._mirror()
        if run is None:
            return
        self.exposition = ex = exposition_build(tick=run.tick)
        yield from self._aggregates(ex)

        length = GaugeMetricFamily("busconsole_stream_length", "Entries in the stream.", labels=["connection", "stream"])
        added = CounterMetricFamily(
            "busconsole_stream_entries_added", "Entries ever added to the stream (Redis 7+).",
            labels=["connection", "stream"],
        )
        rate = GaugeMetricFamily(
            "busconsole_stream_entries_per_second", "Entries added per second since the previous snapshot.",
            labels=["connection", "stream"],
        )
        for s in families_order(ex.streams):
            length.add_metric([s.conn, s.key], s.length)
            if s.entries_added is not None:
                added.add_metric([s.conn, s.key], s.entries_added)
            if s.rate is not None:
                rate.add_metric([s.conn, s.key], s.rate)
        yield from (length, added, rate)

        labels = ["connection", "stream", "group"]
        lag = GaugeMetricFamily("busconsole_group_lag", "Entries not yet delivered to the group.", labels=labels)
        pending = GaugeMetricFamily("busconsole_group_pending", "Entries delivered, not acknowledged.", labels=labels)
        oldest = GaugeMetricFamily(
            "busconsole_group_oldest_pending_age_seconds",
            "Longest idle time among the group's pending entries, i.e. the age of its oldest delivery "
            "(the maximum over the PEL; 0 when none is pending).",
            labels=labels,
        )
        for g in families_order(ex.groups):
            if g.lag is not None:  # Redis cannot always tell (docs/architecture.md#lag-redis-cannot-tell): no value beats a wrong one
                lag.add_metric([g.conn, g.key, g.group], g.lag)
            pending.add_metric([g.conn, g.key, g.group], g.pending)
            if g.oldest_idle_ms is not None or g.pending == 0:
                oldest.add_metric([g.conn, g.key, g.group], (g.oldest_idle_ms or 0) / 1000)
        yield from (lag, pending, oldest)

        depth = GaugeMetricFamily(
            "busconsole_dlq_depth", "Entries in the dead-letter queue.", labels=["connection", "dlq", "convention"]
        )
        for d in families_order(ex.dlqs):
            depth.add_metric([d.conn, d.key, d.convention], d.depth)
        yield depth
        yield from self._families(ex)

        total = GaugeMetricFamily(
            "busconsole_metrics_series", "Per-object series (stream, group, DLQ, family) a full export would have."
        )
        total.add_metric([], ex.total_series)
        omitted = GaugeMetricFamily(
            "busconsole_metrics_series_omitted",
            "Per-object series left out of this exposition (BUSCONSOLE_METRICS_TOP_N, _INCLUDE/_EXCLUDE, "
            "_MAX_SERIES); the busconsole_connection_* aggregates cover every object.",
        )
        omitted.add_metric([], ex.omitted_series)
        family_total = GaugeMetricFamily(
            "busconsole_metrics_family_series", "Per-family series a full export of every stream family would have."
        )
        family_total.add_metric([], ex.family_total_series)
        family_omitted = GaugeMetricFamily(
            "busconsole_metrics_family_series_omitted",
            "Per-family series left out of this exposition (the BUSCONSOLE_METRICS_TOP_N families with the most "
            "entries per connection, within _MAX_SERIES).",
        )
        family_omitted.add_metric([], ex.family_omitted_series)
        yield from (total, omitted, family_total, family_omitted)

    def _families(self, ex: Exposition) -> Iterator[Metric]:
        """The top stream families' series, and per connection when its family rows were made and whether
        its aggregates come from them (family mode)."""
        labels = ["connection", "family"]
        specs = [
            ("keys", "Streams in the family (as of the family pass of busconsole_family_pass_timestamp_seconds).",
             lambda f: f.keys),
            ("entries", "Entries in the family's streams (the sum of XLEN).", lambda f: f.entries),
            ("entries_per_second", "Entries added per second to the family since its previous row.", lambda f: f.rate),
            ("groups", "Consumer groups of the family's streams.", lambda f: f.groups),
            ("pending", "Pending entries, all the family's groups.", lambda f: f.pending),
            ("dlq_depth", "Entries in the dead-letter queues that feed back into the family's streams.",
             lambda f: f.dlq_depth),
            ("oldest_entry_age_seconds", "Age of the family's oldest entry (its ID's time) at the pass.",
             lambda f: f.oldest_age_s),
        ]
        for name, text, value in specs:
            family = GaugeMetricFamily(f"busconsole_family_{name}", text, labels=labels)
            for f in families_order(ex.families):
                v = value(f)
                if v is not None:
                    family.add_metric([f.conn, f.family], v)
            yield family
        at = GaugeMetricFamily(
            "busconsole_family_pass_timestamp_seconds", "When the family pass behind the family series finished "
            "(Unix time).", labels=["connection"],
        )
        mode = GaugeMetricFamily(
            "busconsole_connection_family_mode",
            "1 when the connection's busconsole_connection_* totals come from its stream-family rows (per-stream "
            "samples exist for the members that matter only; lag and consumer figures then cover those members).",
            labels=["connection"],
        )
        for conn in sorted(ex.family_at):
            at.add_metric([conn], ex.family_at[conn].timestamp())
            mode.add_metric([conn], 1 if ex.family_mode[conn] else 0)
        yield from (at, mode)

    def _aggregates(self, ex: Exposition) -> Iterator[Metric]:
        specs = [
            ("streams", "Streams sampled by the last snapshot.", lambda a: a.streams),
            ("entries", "Entries in all the streams.", lambda a: a.entries),
            ("entries_per_second", "Entries added per second, all streams.", lambda a: a.entries_per_second),
            ("groups", "Consumer groups.", lambda a: a.groups),
            ("pending", "Pending entries, all groups.", lambda a: a.pending),
            ("lag", "Lag summed over the groups that report one.", lambda a: a.lag),
            ("lag_max", "The largest lag a group reports (a lower bound when groups_lag_unknown > 0).",
             lambda a: a.lag_max),
            ("groups_lag_unknown", "Groups whose lag Redis cannot tell (left out of lag and lag_max).",
             lambda a: a.lag_unknown),
            ("oldest_pending_age_seconds_max", "Longest idle time of a pending entry, any group.",
             lambda a: None if a.oldest_pending_age_ms_max is None else a.oldest_pending_age_ms_max / 1000),
            ("dlqs", "Dead-letter queues.", lambda a: a.dlqs),
            ("dlq_depth", "Entries in all the dead-letter queues.", lambda a: a.dlq_depth),
            ("consumers", "Consumers in all the groups.", lambda a: a.consumers),
            ("consumer_idle_seconds_max",
             "Longest idle time of any consumer, as of the mirror's last read of its group (a full mirror sync "
             "reads every group).", lambda a: None if a.consumer_idle_ms_max is None else a.consumer_idle_ms_max / 1000),
            ("consumer_pending_idle_seconds_max",
             "Longest idle time of a consumer holding pending entries (0 when none holds any), as of the mirror's "
             "last read of its group: a consumer that holds entries and does nothing is stuck.",
             lambda a: a.consumer_pending_idle_ms_max / 1000),
        ]
        for name, text, value in specs:
            family = GaugeMetricFamily(f"busconsole_connection_{name}", text, labels=["connection"])
            for conn in sorted(ex.aggregates):
                v = value(ex.aggregates[conn])
                if v is not None:
                    family.add_metric([conn], v)
            yield family

    def _job(self, run: SnapshotRun | None) -> Iterator[Metric]:
        duration = GaugeMetricFamily("busconsole_snapshot_duration_seconds", "Duration of the last snapshot run.")
        redis_s = GaugeMetricFamily(
            "busconsole_snapshot_redis_seconds", "Time the last snapshot run spent reading Redis."
        )
        errors = GaugeMetricFamily("busconsole_snapshot_errors", "Connections the last snapshot run could not read.")
        tick = GaugeMetricFamily(
            "busconsole_snapshot_last_tick_timestamp_seconds", "Tick of the last snapshot (Unix time)."
        )
        streams = GaugeMetricFamily("busconsole_snapshot_streams", "Streams sampled by the last snapshot run.")
        failed = GaugeMetricFamily(
            "busconsole_snapshot_connection_error", "1 if the last snapshot could not read the connection.",
            labels=["connection"],
        )
        health = snapshot_health()
        interval = GaugeMetricFamily("busconsole_snapshot_interval_seconds", "The snapshot interval.")
        interval.add_metric([], health.interval_s)
        lag = GaugeMetricFamily(
            "busconsole_snapshot_lag_seconds",
            "Seconds since the newest recorded tick: above the interval plus a run's duration, snapshots fall behind.",
        )
        skipped = CounterMetricFamily(
            "busconsole_snapshot_skipped", "Snapshot ticks that got no run (as far back as the 1-hour retention)."
        )
        skipped.add_metric([], health.skipped_total)
        backlog = GaugeMetricFamily(
            "busconsole_snapshot_rollup_backlog_seconds",
            "Seconds from where the 1-minute rollups end to the newest tick: raw samples are deleted only once "
            "rolled up, so a backlog that keeps growing is a database that keeps growing.",
        )
        if health.rollup_backlog_s is not None:
            backlog.add_metric([], health.rollup_backlog_s)
        if run is not None:
            duration.add_metric([], run.duration_ms / 1000)
            redis_s.add_metric([], run.redis_ms / 1000)
            errors.add_metric([], len(run.errors))
            tick.add_metric([], run.tick.timestamp())
            streams.add_metric([], run.streams)
            lag.add_metric([], health.lag_s or 0.0)
            broken = {str(error.get("conn", "")) for error in run.errors}
            for conn in sorted(broken | {c.name for c in connections()}):
                failed.add_metric([conn], 1 if conn in broken else 0)
        yield from (duration, redis_s, errors, tick, streams, failed, interval, lag, skipped, backlog)

    def _mirror(self) -> Iterator[Metric]:
        labels = ["connection"]
        duration = GaugeMetricFamily(
            "busconsole_mirror_sync_duration_seconds", "Duration of the last mirror sync.", labels=labels
        )
        age = GaugeMetricFamily("busconsole_mirror_sync_age_seconds", "Seconds since the last mirror sync.", labels=labels)
        full_age = GaugeMetricFamily(
            "busconsole_mirror_full_sync_age_seconds", "Seconds since the last full mirror sync.", labels=labels
        )
        written = GaugeMetricFamily(
            "busconsole_mirror_sync_streams_written", "Streams the last mirror sync rewrote.", labels=labels
        )
        now = timezone.now()
        for state in MirrorState.objects.order_by("connection"):
            duration.add_metric([state.connection], state.duration_ms / 1000)
            age.add_metric([state.connection], (now - state.synced_at).total_seconds())
            if state.full_synced_at is not None:
                full_age.add_metric([state.connection], (now - state.full_synced_at).total_seconds())
            written.add_metric([state.connection], state.streams_written)
        yield from (duration, age, full_age, written)


def _unauthorized() -> HttpResponse:
    response = HttpResponse(
        "Send an API token: Authorization: Bearer <token> (manage.py console_token <user>).\n",
        status=401,
        content_type="text/plain; charset=utf-8",
    )
    response["WWW-Authenticate"] = 'Bearer realm="busconsole"'
    return response


@login_not_required
@require_GET
def metrics(request: HttpRequest) -> HttpResponse:
    header = request.headers.get("Authorization", "")
    if not header or user_for_bearer(header) is None:
        return _unauthorized()
    registry = CollectorRegistry(auto_describe=False)
    collector = SnapshotCollector()
    registry.register(collector)
    body = generate_latest(registry)
    ex = collector.exposition
    if ex is not None and ex.omitted_series:
        body += (
            f"# busconsole: {ex.omitted_series} of {ex.total_series} per-object series left out "
            "(BUSCONSOLE_METRICS_TOP_N, _INCLUDE, _EXCLUDE, _MAX_SERIES); the busconsole_connection_* "
            "aggregates cover every object.\n"
        ).encode()
    if ex is not None and ex.family_omitted_series:
        body += (
            f"# busconsole: {ex.family_omitted_series} of {ex.family_total_series} family series left out "
            "(BUSCONSOLE_METRICS_TOP_N families per connection, _MAX_SERIES).\n"
        ).encode()
    return HttpResponse(body, content_type=CONTENT_TYPE_LATEST)
