"""``/metrics`` per stream family: the newest family rows of each connection as series, the families with the
most entries first, within BUSCONSOLE_METRICS_MAX_SERIES, with the family series left out counted; and the
connection totals taken from the family rows in family mode (per-stream samples for a few members only).

The family rows are written here (as the snapshot's family pass would), and the expected series, their
values and the left-out count are computed from them in plain Python; per-stream figures come from Redis.
"""

from __future__ import annotations

import random
from datetime import timedelta

import pytest
import redis
from django.test import Client
from prometheus_client.parser import text_string_to_metric_families

from streams_app.metrics import snapshots
from streams_app.metrics.models import FamilySample, SnapshotRun, StreamSample, name_hash
from tests.console.helpers import CONN
from tests.console.metrics.helpers import T0

FAMILIES = 3000
C = (("connection", CONN),)


def _rows(n: int, *, at=T0, seed: int = 7) -> list[FamilySample]:
    rnd = random.Random(seed)
    rows = []
    for i in range(n):
        glob = f"fam{i}:*"
        rows.append(FamilySample(
            connection=CONN, family=glob, family_hash=name_hash(glob.encode()), kind="detected", at=at,
            keys=rnd.randint(1, 500), entries=rnd.randint(0, 50) * 7,  # ties on purpose: the glob breaks them
            rate_per_s=None if i % 3 == 0 else rnd.random() * 10, groups=rnd.randint(0, 4),
            pending=rnd.randint(0, 30), dlq_keys=i % 2, dlq_depth=rnd.randint(0, 9),
            oldest_id="" if i % 5 == 0 else f"{int(at.timestamp() * 1000) - rnd.randint(0, 10**6)}-0",
            newest_id="", looked_at=0,
        ))
    return rows


def _replace_family_rows(rows: list[FamilySample]) -> None:
    """Whatever family rows the snapshot wrote, the test's rows instead."""
    FamilySample.objects.all().delete()
    FamilySample.objects.bulk_create(rows, batch_size=500)


def _scrape(client: Client, token: str) -> tuple[str, dict[str, dict[tuple, float]], int]:
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}").content.decode()
    out: dict[str, dict[tuple, float]] = {}
    samples = 0
    for family in text_string_to_metric_families(text):
        for sample in family.samples:
            samples += 1
            out.setdefault(sample.name, {})[tuple(sorted(sample.labels.items()))] = sample.value
    return text, out, samples


def _series(row: FamilySample) -> dict[str, float]:
    """What the exposition must show of one row, by metric name (the optional ones only when known)."""
    out = {"keys": row.keys, "entries": row.entries, "groups": row.groups, "pending": row.pending,
           "dlq_depth": row.dlq_depth}
    if row.rate_per_s is not None:
        out["entries_per_second"] = row.rate_per_s
    if row.oldest_id:
        out["oldest_entry_age_seconds"] = (T0.timestamp() * 1000 - int(row.oldest_id.split("-")[0])) / 1000
    return out


def _shown(metrics: dict[str, dict[tuple, float]]) -> dict[str, dict[str, float]]:
    shown: dict[str, dict[str, float]] = {}
    for name, values in metrics.items():
        if name.startswith("busconsole_family_") and name != "busconsole_family_pass_timestamp_seconds":
            for labels, value in values.items():
                shown.setdefault(dict(labels)["family"], {})[name.removeprefix("busconsole_family_")] = value
    return shown


@pytest.mark.slow
def test_3000_families_ranked_capped_under_the_ceiling_and_the_totals_from_the_rows(
    client: Client, viewer, api_token, settings
) -> None:
    # A run with no per-stream sample at all, that does not say which mode it was in: judged by its rows.
    SnapshotRun.objects.create(tick=T0, started_at=T0, finished_at=T0)
    older = _rows(FAMILIES, at=T0 - timedelta(seconds=10), seed=1)
    rows = _rows(FAMILIES)
    _replace_family_rows(older + rows)
    ranked = sorted(rows, key=lambda row: (-row.entries, row.family))
    token = api_token(viewer)

    # Defaults: the 50 families with the most entries, well within the ceiling.
    text, metrics, samples = _scrape(client, token)
    shown = _shown(metrics)
    assert set(shown) == {row.family for row in ranked[:50]}
    for row in ranked[:50]:
        assert shown[row.family].keys() == _series(row).keys()
        for name, value in _series(row).items():
            assert abs(shown[row.family][name] - value) < 1e-6, (row.family, name)
    every = sum(len(_series(row)) for row in rows)
    emitted = sum(len(_series(row)) for row in ranked[:50])
    assert metrics["busconsole_metrics_family_series"][()] == every
    assert metrics["busconsole_metrics_family_series_omitted"][()] == every - emitted
    assert metrics["busconsole_metrics_series_omitted"][()] == every - emitted
    assert f"# busconsole: {every - emitted} of {every} family series left out" in text

    # The connection totals are the newest rows' sums (no per-stream sample: family mode).
    assert metrics["busconsole_connection_family_mode"][C] == 1
    assert metrics["busconsole_connection_streams"][C] == sum(row.keys for row in rows)
    assert metrics["busconsole_connection_entries"][C] == sum(row.entries for row in rows)
    assert metrics["busconsole_connection_pending"][C] == sum(row.pending for row in rows)
    assert metrics["busconsole_connection_groups"][C] == sum(row.groups for row in rows)
    assert metrics["busconsole_connection_dlqs"][C] == sum(row.dlq_keys for row in rows)
    assert metrics["busconsole_connection_dlq_depth"][C] == sum(row.dlq_depth for row in rows)
    rate = sum(row.rate_per_s for row in rows if row.rate_per_s is not None)
    assert abs(metrics["busconsole_connection_entries_per_second"][C] - rate) < 1e-6
    assert metrics["busconsole_family_pass_timestamp_seconds"][C] == T0.timestamp()

    # Every family a candidate: the ceiling decides, taking them in rank order while they fit.
    settings.BUSCONSOLE_METRICS_TOP_N = FAMILIES
    text, metrics, samples = _scrape(client, token)
    fitted, room = [], settings.BUSCONSOLE_METRICS_MAX_SERIES
    for row in ranked:
        if len(_series(row)) <= room:
            fitted.append(row.family)
            room -= len(_series(row))
    emitted = settings.BUSCONSOLE_METRICS_MAX_SERIES - room
    assert set(_shown(metrics)) == set(fitted) and emitted > 1990
    assert metrics["busconsole_metrics_family_series_omitted"][()] == every - emitted
    assert samples < 2100, samples


def test_the_totals_stay_the_samples_when_every_stream_was_sampled(
    r: redis.Redis, client: Client, viewer, api_token
) -> None:
    for i in range(4):
        for j in range(i + 1):
            r.xadd(f"job:{i}", {"n": str(j)})
    snapshots.snapshot_take(tick=T0)
    row = _rows(1)[0]
    row.family, row.family_hash, row.keys, row.entries = "job:*", name_hash(b"job:*"), 4, 999
    _replace_family_rows([row])
    _, metrics, _ = _scrape(client, api_token(viewer))
    assert metrics["busconsole_connection_family_mode"][C] == 0
    assert metrics["busconsole_connection_entries"][C] == sum(r.xlen(f"job:{i}") for i in range(4))
    assert _shown(metrics)["job:*"]["entries"] == 999


def test_in_family_mode_the_totals_are_redis_own_though_few_streams_are_sampled(
    r: redis.Redis, client: Client, viewer, api_token, settings
) -> None:
    settings.BUSCONSOLE_FAMILY_MODE_KEYS = 10  # 64 keys: family mode
    settings.BUSCONSOLE_FAMILY_MEMBERS_MAX = 5
    for i in range(60):
        for j in range(i % 3 + 1):
            r.xadd(f"progress:{i}", {"j": str(j)})
    for key in ("progress:1", "progress:2"):
        r.xgroup_create(key, "g", id="0")
        r.xreadgroup("g", "worker", {key: ">"})
    for j in range(4):
        r.xadd("orders", {"j": str(j)})
        r.xadd("orders:dlq", {"j": str(j), "dlq_error": "boom"})
    r.set("not-a-stream", "1")
    for n in range(2):
        snapshots.snapshot_take(tick=T0 + timedelta(seconds=10 * n))
    tick = T0 + timedelta(seconds=10)
    _, metrics, _ = _scrape(client, api_token(viewer))

    keys = [k.decode() for k in r.scan_iter(_type="stream")]
    sampled = StreamSample.objects.filter(at=tick, stream__connection=CONN).count()
    assert 0 < sampled < len(keys) == 62  # per-stream samples of the members that matter only
    assert metrics["busconsole_connection_family_mode"][C] == 1
    assert metrics["busconsole_connection_streams"][C] == len(keys)
    assert metrics["busconsole_connection_entries"][C] == sum(r.xlen(k) for k in keys)
    assert metrics["busconsole_connection_groups"][C] == sum(len(r.xinfo_groups(k)) for k in keys)
    assert metrics["busconsole_connection_pending"][C] == sum(
        g["pending"] for k in keys for g in r.xinfo_groups(k)) == 2 + 3
    assert metrics["busconsole_connection_dlq_depth"][C] == r.xlen("orders:dlq")
    assert _shown(metrics)["progress:*"]["keys"] == 60


def test_in_family_mode_the_top_streams_are_ranked_among_the_streams_sampled(
    r: redis.Redis, client: Client, viewer, api_token, settings
) -> None:
    """A stream the mirror kept from before family mode (which marks nothing deleted) takes no top slot."""
    settings.BUSCONSOLE_METRICS_TOP_N = 1
    for j in range(50):
        r.xadd("big", {"j": str(j)})
    for i in range(20):
        r.xadd(f"progress:{i}", {"i": str(i)})
    r.xadd("orders", {"j": "1"})
    r.xadd("orders", {"j": "2"})
    snapshots.snapshot_take(tick=T0)  # stream by stream: "big" gets its mirror row
    r.delete("big")
    settings.BUSCONSOLE_FAMILY_MODE_KEYS = 10
    for n in range(1, 3):
        snapshots.snapshot_take(tick=T0 + timedelta(seconds=10 * n))
    _, metrics, _ = _scrape(client, api_token(viewer))
    tick = T0 + timedelta(seconds=20)
    sampled = {bytes(k).decode(): n for k, n in StreamSample.objects.filter(at=tick).values_list("stream__key", "length")}
    assert "big" not in sampled and metrics["busconsole_connection_family_mode"][C] == 1
    longest = max(sampled.values())
    assert {dict(labels)["stream"] for labels in metrics["busconsole_stream_length"]} == {
        k for k, n in sampled.items() if n == longest} == {"orders"}
