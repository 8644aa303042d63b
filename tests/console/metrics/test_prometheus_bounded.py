"""``/metrics`` bounded: aggregates per connection over everything, per-object series only for the top
streams and groups (and the include globs' streams, never the exclude globs'), at most MAX_SERIES of them,
and a count of what was left out.

Expected values come from Redis (XLEN, XINFO GROUPS, XPENDING) and plain Python over them; the text is
parsed with prometheus_client's parser.
"""

from __future__ import annotations

import redis
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from streams_app.metrics import snapshots
from streams_app.metrics.models import FamilySample
from tests.console.helpers import CONN
from tests.console.metrics.helpers import T0

N = 24


def _bus(r: redis.Redis) -> None:
    """``s:<i>`` with i + 1 entries and a group "g" that read i // 2 of them (so pending i // 2, lag the rest);
    ``keep:a`` small with a group; ``s:3:dlq`` a DLQ with 2 entries."""
    for i in range(N):
        key = f"s:{i}"
        for j in range(i + 1):
            r.xadd(key, {"n": str(j)})
        r.xgroup_create(key, "g", id="0")
        if i // 2:
            r.xreadgroup("g", "c", {key: ">"}, count=i // 2)
    r.xadd("keep:a", {"n": "1"})
    r.xgroup_create("keep:a", "g", id="$")
    for j in range(2):
        r.xadd("s:3:dlq", {"n": str(j), "dlq_error": "boom"})


def _scrape(client: Client, token: str) -> tuple[str, dict[str, dict[tuple, float]]]:
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").content.decode()
    out: dict[str, dict[tuple, float]] = {}
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return text, out


def _family_series() -> int:
    """The per-family series a full export has (the snapshot's family rows: 5 each, a rate and an oldest
    entry's age when known), counted like the stream, group and DLQ series."""
    return sum(5 + (rate is not None) + bool(oldest)
               for rate, oldest in FamilySample.objects.values_list("rate_per_s", "oldest_id"))


_PER_OBJECT = ("busconsole_stream_", "busconsole_group_", "busconsole_dlq_depth", "busconsole_family_")


def _per_object(metrics: dict[str, dict[tuple, float]]) -> int:
    return sum(len(v) for name, v in metrics.items()
               if name.startswith(_PER_OBJECT) and name != "busconsole_family_pass_timestamp_seconds")


def _streams_of(metric: dict[tuple, float]) -> set[str]:
    return {dict(labels)["stream"] for labels in metric}


def test_top_n_include_exclude_and_the_aggregates(
    r: redis.Redis, client: Client, viewer, api_token, settings
) -> None:
    settings.BUSCONSOLE_METRICS_TOP_N = 3
    settings.BUSCONSOLE_METRICS_MAX_SERIES = 1000
    settings.BUSCONSOLE_METRICS_INCLUDE = ["keep:*"]
    settings.BUSCONSOLE_METRICS_EXCLUDE = ["s:2?"]  # s:20 .. s:23, the largest
    _bus(r)
    snapshots.snapshot_take(tick=T0)
    text, metrics = _scrape(client, api_token(viewer))

    keys = [k.decode() for k in r.scan_iter(_type="stream")]
    lengths = {k: r.xlen(k) for k in keys}
    allowed = sorted((k for k in keys if not (k.startswith("s:2") and len(k) == 4)), key=lambda k: -lengths[k])
    assert _streams_of(metrics["busconsole_stream_length"]) == {"keep:a", *allowed[:3]}
    for labels, value in metrics["busconsole_stream_length"].items():
        assert value == lengths[dict(labels)["stream"]]

    groups = {(k, g["name"].decode()): g for k in keys for g in r.xinfo_groups(k)}
    by_lag = sorted((kg for kg in groups if not kg[0].startswith("s:2") or len(kg[0]) != 4),
                    key=lambda kg: -groups[kg]["lag"])
    shown = {(dict(lb)["stream"], dict(lb)["group"]) for lb in metrics["busconsole_group_pending"]}
    assert set(by_lag[:3]) <= shown and ("keep:a", "g") in shown
    assert not any(k.startswith("s:2") and len(k) == 4 for k, _ in shown)

    conn = (("connection", CONN),)
    assert metrics["busconsole_connection_streams"][conn] == len(keys)
    assert metrics["busconsole_connection_entries"][conn] == sum(lengths.values())
    assert metrics["busconsole_connection_groups"][conn] == len(groups)
    assert metrics["busconsole_connection_pending"][conn] == sum(g["pending"] for g in groups.values())
    assert metrics["busconsole_connection_lag_max"][conn] == max(g["lag"] for g in groups.values())
    assert metrics["busconsole_connection_dlq_depth"][conn] == r.xlen("s:3:dlq")

    # Every stream has length and entries-added (no rate on a first tick); every group pending, lag and
    # (pending or not) an oldest-pending age; the DLQ its depth.
    full = 2 * len(keys) + 3 * len(groups) + 1 + _family_series()
    emitted = _per_object(metrics)
    assert metrics["busconsole_metrics_series"][()] == full
    assert metrics["busconsole_metrics_series_omitted"][()] == full - emitted > 0
    assert f"# busconsole: {full - emitted} of {full} per-object series left out" in text


def test_the_ceiling_bounds_the_per_object_series(r: redis.Redis, client: Client, viewer, api_token, settings) -> None:
    settings.BUSCONSOLE_METRICS_TOP_N = 100
    settings.BUSCONSOLE_METRICS_MAX_SERIES = 10
    _bus(r)
    snapshots.snapshot_take(tick=T0)
    _, metrics = _scrape(client, api_token(viewer))
    per_object = _per_object(metrics)
    assert 0 < per_object <= 10
    assert metrics["busconsole_metrics_series"][()] - metrics["busconsole_metrics_series_omitted"][()] == per_object
    # the largest stream comes first
    assert "s:23" in _streams_of(metrics["busconsole_stream_length"])
    assert metrics["busconsole_connection_streams"][(("connection", CONN),)] == N + 2


def test_an_include_glob_narrows_by_its_prefix_and_matches_with_redis_semantics(
    r: redis.Redis, client: Client, viewer, api_token, settings
) -> None:
    settings.BUSCONSOLE_METRICS_TOP_N = 0
    settings.BUSCONSOLE_METRICS_INCLUDE = ["s:1[0-2]", "S:*"]  # the second matches nothing: globs are case-sensitive
    _bus(r)
    snapshots.snapshot_take(tick=T0)
    _, metrics = _scrape(client, api_token(viewer))
    assert _streams_of(metrics["busconsole_stream_length"]) == {"s:10", "s:11", "s:12"}
    assert _streams_of(metrics["busconsole_group_pending"]) == {"s:10", "s:11", "s:12"}
