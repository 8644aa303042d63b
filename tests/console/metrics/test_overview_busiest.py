"""The overview's "busiest streams": the bus's own metrics streams are marked and left
out unless asked for, the list is ordered by the rate each row shows at every window, and sparklines
span the samples they have instead of a sliver of a 24 h width.

Traffic is written between real snapshots; the expected rates and order are computed here in plain
Python from the entries the test added per tick (the snapshot's rate is entries added since the
previous tick over the seconds between them; "busiest" averages the ticks of the last minute).
"""

from __future__ import annotations

import re
from datetime import UTC, datetime, timedelta

import pytest
import redis
from django.test import Client
from django.utils import timezone

from eventbus.conventions import is_internal_stream
from streams_app.metrics import mirror, snapshots
from streams_app.metrics.charts import GEOMETRY, WINDOWS, chart_build
from tests.console.metrics.helpers import path_points

STEP_S = 10
TICKS = 13  # two minutes of history: the last minute ranks, the spike before it must not


#: Entries added to each stream before each tick (tick 0 only creates them). "spiky" had a burst two
#: minutes ago, then one entry per tick: its 24 h sparkline peaks high, its rate now is the lowest.
def added(key: str, tick: int) -> int:
    if tick == 0:
        return 0
    return {
        "eventbus:metrics": 100,
        "{orders}:metrics": 50,
        "orders": 20,
        "spiky": 200 if tick == 3 else 1,
    }[key]


KEYS = ("eventbus:metrics", "{orders}:metrics", "orders", "spiky")


def traffic(r: redis.Redis) -> list[datetime]:
    now = timezone.now().replace(microsecond=0)
    first = snapshots.snapshot_tick_for(now=now - timedelta(seconds=STEP_S * TICKS), interval_s=STEP_S)
    ticks = []
    for i in range(TICKS):
        for key in KEYS:
            for _ in range(added(key, i) or (1 if i == 0 else 0)):
                r.xadd(key, {"type": "handled", "n": str(i)})
        tick = first + timedelta(seconds=STEP_S * i)
        snapshots.snapshot_take(tick=tick)
        ticks.append(tick)
    return ticks


def expected_rates(ticks: list[datetime]) -> dict[str, float]:
    """Mean of the per-tick rates over the ticks of the last minute (tick 0 has no rate: no previous tick)."""
    last = ticks[-1]
    recent = [i for i, t in enumerate(ticks) if i > 0 and last - timedelta(minutes=1) < t <= last]
    return {key: sum(added(key, i) / STEP_S for i in recent) / len(recent) for key in KEYS}


def busiest(body: str) -> list[tuple[str, float, bool, str]]:
    """(key, the rate the row is ranked by, internal pill?, the figure shown) of each "busiest" row."""
    table = re.search(r'<table class="grid compact sparks busiest">(.*?)</table>', body, re.S)
    if table is None:
        return []
    rows = re.findall(r"<tr>(.*?)</tr>", table.group(1), re.S)
    out = []
    for row in rows:
        key = re.search(r'title="([^"]+)">', row).group(1)
        rate = float(re.search(r'data-rate="([^"]+)"', row).group(1))
        shown = re.search(r'<span class="spark-last">(.*?)</span>', row, re.S).group(1).strip()
        out.append((key.replace("&#x27;", "'"), rate, 'class="pill internal"' in row, shown))
    return out


def test_the_internal_predicate_follows_the_buss_naming() -> None:
    assert is_internal_stream(b"eventbus:metrics") and is_internal_stream(b"{orders}:metrics")
    assert is_internal_stream(b"{orders}.v2:metrics")
    assert not is_internal_stream(b"orders:metrics")  # the bus would have named it {orders}:metrics
    assert not is_internal_stream(b"{orders}:dlq") and not is_internal_stream(b"orders")


@pytest.mark.parametrize("window", ["1h", "24h", "7d"])
def test_busiest_leaves_internal_out_and_is_ordered_by_the_rate_it_shows(
    r: redis.Redis, viewer_client: Client, window: str
) -> None:
    rates = expected_rates(traffic(r))
    apps = sorted((k for k in KEYS if not is_internal_stream(k.encode())), key=lambda k: -rates[k])
    everything = sorted(KEYS, key=lambda k: -rates[k])
    assert apps == ["orders", "spiky"] and everything[0] == "eventbus:metrics"

    body = viewer_client.get(f"/?window={window}").content.decode()
    rows = busiest(body)
    assert [k for k, *_ in rows] == apps
    for key, rate, internal, shown in rows:
        assert rate == pytest.approx(rates[key]) and not internal
        assert shown == f"{rates[key]:g}/s"
    assert "2 internal streams (the bus's metrics) left out." in body
    assert f'href="?window={window}&amp;internal=1"' in body

    included = viewer_client.get(
        f"/charts/overview/?window={window}&internal=1", HTTP_HX_REQUEST="true"
    ).content.decode()
    rows = busiest(included)
    assert [k for k, *_ in rows] == everything
    assert [internal for _, _, internal, _ in rows] == [is_internal_stream(k.encode()) for k in everything]
    assert [rate for _, rate, _, _ in rows] == sorted((rate for _, rate, _, _ in rows), reverse=True)
    assert (
        f'hx-get="/charts/overview/?window={window}&amp;internal=1"' in included
    )  # a refresh keeps the choice


def test_streams_list_marks_internal_streams(r: redis.Redis, viewer_client: Client) -> None:
    for key in KEYS:
        r.xadd(key, {"a": "1"})
    for url in ("/c/default/streams/?live=1", "/c/default/streams/"):
        if url.endswith("/"):
            mirror.mirror_sync(conn="default")
        body = viewer_client.get(url).content.decode()
        rows = re.findall(r'<a class="mono" href="/c/default/streams/([^"/]+)/">(.*?)</td>', body, re.S)
        marked = {key: 'class="pill internal"' in cell for key, cell in rows}
        assert marked == {
            "eventbus%3Ametrics": True,
            "%7Borders%7D%3Ametrics": True,
            "orders": False,
            "spiky": False,
        }
    api = {s["key"]: s["internal"] for s in viewer_client.get("/api/v1/c/default/streams/").json()["streams"]}
    assert api == {k: is_internal_stream(k.encode()) for k in KEYS}


def test_a_sparkline_spans_its_samples_not_the_whole_window() -> None:
    """Ten minutes of samples on a 24 h sparkline fill its width; a full chart keeps the window."""
    end = datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    points = [(end - timedelta(minutes=10) + timedelta(seconds=10 * i), float(i % 7)) for i in range(61)]
    spark = chart_build(points, title="s", window=WINDOWS["24h"], end=end, size="spark", unit="rate")
    geo = GEOMETRY["spark"]
    xs = [x for seg in path_points(spark.line_path) for x, _ in seg]
    assert min(xs) == pytest.approx(geo.left, abs=0.2) and max(xs) == pytest.approx(geo.plot_right, abs=0.2)
    assert spark.since == points[0][0] and "since" in spark.summary
    full = chart_build(points, title="f", window=WINDOWS["24h"], end=end, size="full", unit="rate")
    full_xs = [x for seg in path_points(full.line_path) for x, _ in seg]
    assert (
        min(full_xs) > GEOMETRY["full"].plot_right - GEOMETRY["full"].plot_width / 100
    )  # the last 1/144 of it
