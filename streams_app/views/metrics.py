"""``/metrics``: the latest snapshot in the Prometheus text format, for a scraper holding an API token.

The figures come from the database (the last committed snapshot and the mirror's labels), never from
Redis: a scrape costs a few indexed queries whatever the number of streams, and cannot load the monitored
servers. Prometheus scrapers send ``Authorization: Bearer <token>`` (``bearer_token_file``); a browser
session is not enough, so the login-required middleware is told to stay out of the way and the view
checks the token itself.
"""

from __future__ import annotations

from collections.abc import Iterator

from django.contrib.auth.decorators import login_not_required
from django.http import HttpRequest, HttpResponse
from django.views.decorators.http import require_GET
from prometheus_client import CONTENT_TYPE_LATEST, CollectorRegistry, generate_latest
from prometheus_client.core import CounterMetricFamily, GaugeMetricFamily, Metric
from prometheus_client.registry import Collector

from streams_app.accounts.tokens import user_for_bearer
from streams_app.metrics.models import DlqSample, GroupSample, Resolution, SnapshotRun, StreamSample
from streams_app.redis_ops.client import connections


class SnapshotCollector(Collector):
    """Per stream, group and DLQ figures of the newest snapshot, plus the snapshot job's own health."""

    def collect(self) -> Iterator[Metric]:
        run = SnapshotRun.objects.filter(finished_at__isnull=False).order_by("-tick").first()
        yield from self._job(run)
        if run is None:
            return
        at = {"at": run.tick, "resolution": Resolution.RAW}

        length = GaugeMetricFamily("busconsole_stream_length", "Entries in the stream.", labels=["connection", "stream"])
        added = CounterMetricFamily(
            "busconsole_stream_entries_added", "Entries ever added to the stream (Redis 7+).",
            labels=["connection", "stream"],
        )
        rate = GaugeMetricFamily(
            "busconsole_stream_entries_per_second", "Entries added per second since the previous snapshot.",
            labels=["connection", "stream"],
        )
        for conn, key, n, total, per_s in StreamSample.objects.filter(**at).values_list(
            "stream__connection", "stream__key_text", "length", "entries_added", "rate_per_s"
        ):
            length.add_metric([conn, key], n)
            if total is not None:
                added.add_metric([conn, key], total)
            if per_s is not None:
                rate.add_metric([conn, key], per_s)
        yield from (length, added, rate)

        labels = ["connection", "stream", "group"]
        lag = GaugeMetricFamily("busconsole_group_lag", "Entries not yet delivered to the group.", labels=labels)
        pending = GaugeMetricFamily("busconsole_group_pending", "Entries delivered, not acknowledged.", labels=labels)
        oldest = GaugeMetricFamily(
            "busconsole_group_oldest_pending_age_seconds",
            "Idle time of the group's oldest pending entry (0 when none is pending).",
            labels=labels,
        )
        for conn, key, group, n_lag, n_pending, idle_ms in GroupSample.objects.filter(**at).values_list(
            "group__stream__connection", "group__stream__key_text", "group__name_text", "lag", "pending",
            "oldest_pending_idle_ms",
        ):
            if n_lag is not None:  # Redis cannot always tell (SPEC section 9): no value beats a wrong one
                lag.add_metric([conn, key, group], n_lag)
            pending.add_metric([conn, key, group], n_pending)
            if idle_ms is not None or n_pending == 0:
                oldest.add_metric([conn, key, group], (idle_ms or 0) / 1000)
        yield from (lag, pending, oldest)

        depth = GaugeMetricFamily(
            "busconsole_dlq_depth", "Entries in the dead-letter queue.", labels=["connection", "dlq", "convention"]
        )
        for conn, key, convention, n in DlqSample.objects.filter(**at).values_list(
            "stream__connection", "stream__key_text", "stream__dlq_convention", "depth"
        ):
            depth.add_metric([conn, key, convention], n)
        yield depth

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
        if run is not None:
            duration.add_metric([], run.duration_ms / 1000)
            redis_s.add_metric([], run.redis_ms / 1000)
            errors.add_metric([], len(run.errors))
            tick.add_metric([], run.tick.timestamp())
            streams.add_metric([], run.streams)
            broken = {str(error.get("conn", "")) for error in run.errors}
            for conn in sorted(broken | {c.name for c in connections()}):
                failed.add_metric([conn], 1 if conn in broken else 0)
        yield from (duration, redis_s, errors, tick, streams, failed)


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
    registry.register(SnapshotCollector())
    return HttpResponse(generate_latest(registry), content_type=CONTENT_TYPE_LATEST)
