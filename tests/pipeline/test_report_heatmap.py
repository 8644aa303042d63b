"""The reports' heat map over a young lake: 12 minutes of entries are shown as counted, never scaled.

Entries spanning 12 minutes across an hour boundary go through the real exporter, Spark's throughput
job and the rollup load; ``/reports/`` must then give, per hour, the count plain Python makes of the
same entries and the minutes the data covers in it, and no figure scaled to an hour.
"""

from __future__ import annotations

import html
import random
import re
from collections import Counter
from datetime import UTC, datetime
from pathlib import Path

import pytest

from pipeline import main
from streams_app.lake import export
from streams_app.lake import rollups as rollup_load
from tests.console.conftest import logged_in, make_user
from tests.pipeline import data

pytestmark = [pytest.mark.spark, pytest.mark.django_db]

START = data.T0 + 14 * data.HOUR_MS + 50 * 60_000  # Monday 2026-01-05 14:50 UTC
MINUTES = 12  # 14:50 .. 15:01 inclusive


def test_heatmap_shows_counts_and_covered_minutes_not_hourly_rates(spark, r, lake_dir: Path) -> None:
    rng = random.Random(13)
    times = [
        START + m * 60_000 + rng.randrange(60_000) for m in range(MINUTES) for _ in range(rng.randint(20, 60))
    ]
    entries = [
        data.Entry(b"orders", entry_id, ((b"type", b"order.created"),)) for entry_id in data._ids(times)
    ]
    data.write(r, entries)
    assert not export.export_run(tables=False).failed
    main.run_all(
        spark,
        str(lake_dir),
        as_of=datetime.fromtimestamp((START + MINUTES * 60_000) / 1000, UTC),
        jobs=["throughput"],
    )
    rollup_load.rollups_load()

    per_hour = Counter(e.ms - e.ms % data.HOUR_MS for e in entries)
    first_minute = min(e.ms for e in entries) // 60_000 * 60_000
    end = max(e.ms for e in entries) // 60_000 * 60_000 + 60_000
    assert sorted(per_hour) == [data.T0 + 14 * data.HOUR_MS, data.T0 + 15 * data.HOUR_MS]

    page = logged_in(make_user("vera-viewer", groups=("viewer",))).get("/reports/").content.decode()
    heatmap = page[page.index('<div id="heatmap">') : page.index("</div>", page.index('<div id="heatmap">'))]
    titles = {
        int(m.group(1)): html.unescape(m.group(0))
        for m in re.finditer(r'title="Mon (\d\d):00 UTC: ([^"]*)"', heatmap)
    }
    for hour_ms, count in per_hour.items():
        low, high = max(hour_ms, first_minute), min(hour_ms + data.HOUR_MS, end)
        minutes = (high - low) // 60_000
        fmt = "%H:%M"
        span = f"{datetime.fromtimestamp(low / 1000, UTC):{fmt}}–{datetime.fromtimestamp(high / 1000, UTC):{fmt}}"
        hour = (hour_ms // data.HOUR_MS) % 24
        assert titles[hour] == (
            f'title="Mon {hour:02d}:00 UTC: {count} entries in a partial hour, {minutes} of 60 minutes covered '
            f'({span} on 2026-01-05)"'
        )
        # the count itself, on the cell and in the visible list of partial hours
        assert f'data-entries="{count}" data-full-hours="0" data-covered-minutes="{minutes}"' in heatmap
        assert f"{count} entries in {minutes} of 60 minutes ({span} UTC)" in html.unescape(heatmap)
        # nothing scaled up to an hour: neither the rate per hour nor "per hour" next to a number
        assert str(round(count * 60 / minutes)) not in heatmap
    assert not re.search(r"[0-9.]+ (entries )?per hour", heatmap)
    # every other cell is outside the data, and says so
    assert (
        sum("not covered by the data" in title for title in re.findall(r'title="([^"]*)"', heatmap))
        == 7 * 24 - 2
    )
