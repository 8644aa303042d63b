"""A lag Redis cannot tell stays unknown on every page and in the API (docs/architecture.md#lag-redis-cannot-tell); a stream with some
groups' lags known shows the largest of them as a lower bound, never as its exact lag.

The unknown lag is made the way Redis makes it: ``XGROUP SETID`` to an arbitrary ID without
ENTRIESREAD; each test checks that XINFO GROUPS then reports ``lag`` as null before looking at a page.
Expected figures and orders are computed in plain Python from XINFO GROUPS itself.
"""

from __future__ import annotations

import html
import re
from datetime import timedelta

import redis
from django.test import Client
from django.utils import timezone

from streams_app.metrics import mirror, snapshots
from tests.console.helpers import CONN, group_url, stream_url

#: The streams of :func:`lag_bus`, in key order.
KEYS = ("a-big", "b-unknown", "c-small", "d-nogroup")


def lag_bus(r: redis.Redis) -> None:
    """``a-big``: lag 7. ``b-unknown``: one group caught up (lag 0) and one moved by SETID (lag unknown).
    ``c-small``: lag 1. ``d-nogroup``: no group."""
    ids = [r.xadd("a-big", {"n": str(i)}) for i in range(7)]
    r.xgroup_create("a-big", "g", id="0")
    ids = [r.xadd("b-unknown", {"n": str(i)}) for i in range(10)]
    r.xgroup_create("b-unknown", "caught-up", id="$")
    r.xgroup_create("b-unknown", "moved", id="0")
    r.xreadgroup("moved", "worker", {"b-unknown": ">"}, count=2)
    r.execute_command("XGROUP", "SETID", "b-unknown", "moved", ids[4])  # no ENTRIESREAD: Redis loses count
    r.xadd("c-small", {"n": "0"})
    r.xgroup_create("c-small", "g", id="0")
    r.xadd("d-nogroup", {"n": "0"})


def redis_lags(r: redis.Redis) -> dict[str, tuple[int, int | None, bool]]:
    """Per stream, from XINFO GROUPS: (groups, the largest known lag or None, whether some lag is unknown)."""
    out = {}
    for key in KEYS:
        lags = [g["lag"] for g in r.xinfo_groups(key)]
        known = [lag for lag in lags if lag is not None]
        out[key] = (len(lags), max(known) if known else None, len(known) < len(lags))
    return out


def expected_lag_order(lags: dict[str, tuple[int, int | None, bool]]) -> list[str]:
    """The documented "most lag first": by the largest known lag (a lower bound before an exact figure at a
    tie), then the streams whose every lag is unknown, then no group; by name."""

    def rank(key: str) -> tuple:
        groups, lag, unknown = lags[key]
        return (0, -lag, 0 if unknown else 1, key) if lag is not None else (1 if unknown else 2, 0, 0, key)

    return sorted(lags, key=rank)


def lag_cells(body: str) -> dict[str, str]:
    """The Lag cell of each row of the streams list, by key."""
    rows = re.findall(
        r'<a class="mono" href="/c/default/streams/([^"/]+)/">.*?<td class="num lag-cell">(.*?)</td>',
        body,
        re.S,
    )
    return dict(rows)


def assert_explained(cell: str) -> None:
    """An "unknown" (or a lower bound, "≥ 0, 1 group unknown") that says on hover why Redis cannot count it
    and what makes it known again."""
    match = re.search(
        r'<span class="unknown-figure" title="([^"]+)"[^>]*>(unknown|≥ \d+, \d+ groups? unknown)</span>', cell
    )
    assert match, cell
    title = html.unescape(match.group(1))
    assert "SETID" in title and "without ENTRIESREAD" in title and "deleted" in title  # why
    assert "reads past the last entry" in title and "rewind with ENTRIESREAD" in title  # what makes it known


def test_redis_reports_the_moved_groups_lag_as_null(r: redis.Redis) -> None:
    lag_bus(r)
    groups = {g["name"]: g["lag"] for g in r.xinfo_groups("b-unknown")}
    assert groups == {b"caught-up": 0, b"moved": None}


def test_streams_list_shows_unknown_not_zero_in_both_modes(r: redis.Redis, viewer_client: Client) -> None:
    lag_bus(r)
    lags = redis_lags(r)
    assert lags["b-unknown"] == (2, 0, True)  # Redis itself: one group's lag is 0, the other's null

    live = lag_cells(viewer_client.get("/c/default/streams/?live=1").content.decode())
    mirror.mirror_sync(conn=CONN)
    mirrored = lag_cells(viewer_client.get("/c/default/streams/").content.decode())
    for body in (live, mirrored):
        assert set(body) == set(KEYS)
        assert_explained(body["b-unknown"])
        assert ">0<" not in body["b-unknown"] and body["b-unknown"].strip() != "0"
        assert re.sub(r"<[^>]+>", "", body["a-big"]).strip() == str(lags["a-big"][1])
        assert re.sub(r"<[^>]+>", "", body["c-small"]).strip() == str(lags["c-small"][1])
        assert "No consumer group" in body["d-nogroup"] and "unknown" not in body["d-nogroup"]


def test_sort_by_lag_does_not_take_unknown_for_zero(r: redis.Redis, viewer_client: Client) -> None:
    lag_bus(r)
    r.xadd("e-zero", {"n": "0"})
    r.xgroup_create("e-zero", "g", id="$")  # an exact 0: ranks after b-unknown's "at least 0"
    mirror.mirror_sync(conn=CONN)
    lags = redis_lags(r) | {"e-zero": (1, 0, False)}
    expected = expected_lag_order(lags)
    assert expected == ["a-big", "c-small", "b-unknown", "e-zero", "d-nogroup"]

    body = viewer_client.get("/c/default/streams/?sort=lag").content.decode()
    assert list(lag_cells(body)) == expected

    reply = viewer_client.get("/api/v1/c/default/streams/?sort=lag").json()
    assert [s["key"] for s in reply["streams"]] == expected
    by_key = {s["key"]: s for s in reply["streams"]}
    assert by_key["b-unknown"]["lag"] == 0 and by_key["b-unknown"]["lag_unknown"] is True
    assert by_key["b-unknown"]["lag_exact"] is False
    assert by_key["e-zero"]["lag"] == 0 and by_key["e-zero"]["lag_unknown"] is False
    assert by_key["d-nogroup"]["lag"] is None and by_key["d-nogroup"]["lag_unknown"] is False


def test_api_scan_answers_null_lag(r: redis.Redis, viewer_client: Client) -> None:
    lag_bus(r)
    lags = redis_lags(r)
    rows = {s["key"]: s for s in viewer_client.get("/api/v1/c/default/streams/").json()["streams"]}
    assert set(rows) == set(KEYS)
    for key, (_, lag, unknown) in lags.items():
        assert (rows[key]["lag"], rows[key]["lag_unknown"]) == (lag, unknown)
    groups = viewer_client.get("/api/v1/c/default/streams/b-unknown/groups/").json()["groups"]
    assert {g["name"]: g["lag"] for g in groups} == {"caught-up": 0, "moved": None}


def test_stream_and_group_pages_explain_the_unknown_lag(r: redis.Redis, viewer_client: Client) -> None:
    lag_bus(r)
    body = viewer_client.get(stream_url("b-unknown")).content.decode()
    cells = dict(re.findall(r'groups/([^"/]+)/">.*?<td class="num lag-cell"[^>]*>(.*?)</td>', body, re.S))
    assert_explained(cells["moved"])
    assert cells["caught-up"].strip() == "0"

    page = viewer_client.get(group_url("b-unknown", "moved")).content.decode()
    assert_explained(re.search(r'<span class="value lag-cell">(.*?)</span>\s*</div>', page, re.S).group(1))


def test_inactive_column_says_why_it_is_empty_before_redis_7_2(r: redis.Redis, viewer_client: Client) -> None:
    lag_bus(r)
    version = r.info("server")["redis_version"]
    consumer = r.xinfo_consumers("b-unknown", "moved")[0]
    page = viewer_client.get(group_url("b-unknown", "moved")).content.decode()
    cell = re.search(r'<td class="num inactive-cell"[^>]*>(.*?)</td>', page, re.S).group(1)
    if "inactive" in consumer:  # Redis 7.2+: the figure itself
        assert "unknown-figure" not in cell or ">never<" in cell
        return
    major, minor = version.split(".")[:2]
    match = re.search(r'<span class="unknown-figure" title="([^"]+)"[^>]*>(.*?)</span>', cell)
    assert match and match.group(2) == f"n/a on Redis {major}.{minor}"
    title = html.unescape(match.group(1))
    assert "only from Redis 7.2" in title and version in title


def test_lag_chart_says_unknown_rather_than_the_last_known_value(
    r: redis.Redis, viewer_client: Client
) -> None:
    ids = [r.xadd("orders", {"n": str(i)}) for i in range(6)]
    r.xgroup_create("orders", "billing", id="0")
    first = snapshots.snapshot_tick_for(now=timezone.now() - timedelta(seconds=30), interval_s=10)
    snapshots.snapshot_take(tick=first)  # lag 6, known
    r.execute_command("XGROUP", "SETID", "orders", "billing", ids[2])
    assert r.xinfo_groups("orders")[0]["lag"] is None
    snapshots.snapshot_take(tick=first + timedelta(seconds=10))
    page = viewer_client.get(group_url("orders", "billing")).content.decode()
    figure = re.search(r'data-chart="lag-entries-not-yet-delivered">(.*?)</figcaption>', page, re.S).group(1)
    assert re.search(
        r'<span class="chart-last unknown-figure" title="[^"]*last known value, 6\.">unknown</span>', figure
    )
