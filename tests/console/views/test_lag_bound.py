"""A stream with one group whose lag Redis cannot tell shows its known lag as a lower bound.

``orders`` has ``reporting`` 40 behind, ``analytics`` 38, and ``fraud-check`` moved by ``XGROUP SETID`` to an
arbitrary ID without ENTRIESREAD, which makes Redis report its lag as null. Every expected figure and
order is computed in plain Python from XINFO GROUPS itself.
"""

from __future__ import annotations

import json
import re

import pytest
import redis
from django.test import Client
from django.utils import timezone

from eventbus.__main__ import main
from streams_app.metrics import mirror, snapshots
from tests.console.helpers import CONN, api, stream_api, stream_url

KEYS = ("all-unknown", "nogroup", "orders", "small", "zero")


def lag_bus(r: redis.Redis) -> None:
    ids = [r.xadd("orders", {"n": str(i)}) for i in range(50)]
    r.xgroup_create("orders", "reporting", id=ids[9], entries_read=10)  # 40 behind
    r.xgroup_create("orders", "analytics", id=ids[11], entries_read=12)  # 38 behind
    r.xgroup_create("orders", "fraud-check", id="0")
    r.xreadgroup("fraud-check", "w", {"orders": ">"}, count=2)
    r.execute_command("XGROUP", "SETID", "orders", "fraud-check", ids[20])  # no ENTRIESREAD: lag unknown
    small = [r.xadd("small", {"n": str(i)}) for i in range(5)]
    r.xgroup_create("small", "g", id="0")
    r.xadd("zero", {"n": "0"})
    r.xgroup_create("zero", "g", id="$")
    other = [r.xadd("all-unknown", {"n": str(i)}) for i in range(5)]
    r.xgroup_create("all-unknown", "g", id="0")
    r.xreadgroup("g", "w", {"all-unknown": ">"}, count=1)
    r.execute_command("XGROUP", "SETID", "all-unknown", "g", other[2])
    r.xadd("nogroup", {"n": "0"})
    assert small


def redis_lags(r: redis.Redis) -> dict[str, tuple[int, int | None, int]]:
    """Per stream, from XINFO GROUPS: (groups, the largest known lag or None, groups whose lag is null)."""
    out = {}
    for key in KEYS:
        lags = [g["lag"] for g in r.xinfo_groups(key)]
        known = [lag for lag in lags if lag is not None]
        out[key] = (len(lags), max(known) if known else None, len(lags) - len(known))
    return out


def expected_order(lags: dict[str, tuple[int, int | None, int]]) -> list[str]:
    """Most lag first: by the known largest lag (at a tie, a bound before an exact figure, since the true
    lag may be larger), then streams whose every group's lag is unknown, then streams without a group."""

    def rank(key: str) -> tuple:
        groups, bound, unknown = lags[key]
        if bound is not None:
            return (0, -bound, 0 if unknown else 1, key)
        return (1 if groups else 2, 0, 0, key)

    return sorted(lags, key=rank)


def lag_cells(body: str) -> dict[str, str]:
    rows = re.findall(
        r'<a class="mono" href="/c/default/streams/([^"/]+)/">.*?<td class="num lag-cell">(.*?)</td>', body, re.S
    )
    return {key: re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", cell)).strip() for key, cell in rows}


def bound_text(bound: int, unknown: int) -> str:
    return f"≥ {bound}, {unknown} group{'s' if unknown > 1 else ''} unknown"


def test_redis_reports_one_unknown_lag(r: redis.Redis) -> None:
    lag_bus(r)
    assert {g["name"]: g["lag"] for g in r.xinfo_groups("orders")} == {
        b"reporting": 40, b"analytics": 38, b"fraud-check": None,
    }


@pytest.mark.parametrize("mode", ["live", "mirror"])
def test_streams_list_shows_the_bound(r: redis.Redis, viewer_client: Client, mode: str) -> None:
    lag_bus(r)
    lags = redis_lags(r)
    if mode == "mirror":
        mirror.mirror_sync(conn=CONN)
    body = viewer_client.get("/c/default/streams/" + ("?live=1" if mode == "live" else "")).content.decode()
    cells = lag_cells(body)
    groups, bound, unknown = lags["orders"]
    assert cells["orders"].startswith(bound_text(bound, unknown))
    assert cells["zero"].startswith("0") and cells["small"].startswith(str(lags["small"][1]))
    assert cells["all-unknown"].startswith("unknown")


def test_most_lag_first_ranks_by_the_bound(r: redis.Redis, viewer_client: Client) -> None:
    lag_bus(r)
    mirror.mirror_sync(conn=CONN)
    expected = expected_order(redis_lags(r))
    assert expected == ["orders", "small", "zero", "all-unknown", "nogroup"]
    body = viewer_client.get("/c/default/streams/?sort=lag").content.decode()
    assert list(lag_cells(body)) == expected
    reply = viewer_client.get(api("/c/default/streams/?sort=lag")).json()
    assert [s["key"] for s in reply["streams"]] == expected


def test_a_bound_ties_ahead_of_an_exact_figure(r: redis.Redis, viewer_client: Client) -> None:
    """``b`` knows 0 of one group and not the other: its lag is at least 0, so it comes before ``a``'s exact 0."""
    r.xadd("a", {"n": "0"})
    r.xgroup_create("a", "g", id="$")
    ids = [r.xadd("b", {"n": str(i)}) for i in range(4)]
    r.xgroup_create("b", "caught-up", id="$")
    r.xgroup_create("b", "moved", id="0")
    r.execute_command("XGROUP", "SETID", "b", "moved", ids[1])
    assert [g["lag"] for g in r.xinfo_groups("b")] == [0, None]
    mirror.mirror_sync(conn=CONN)
    reply = viewer_client.get(api("/c/default/streams/?sort=lag")).json()
    assert [s["key"] for s in reply["streams"]] == ["b", "a"]


@pytest.mark.parametrize("query", ["", "?sort=lag"])
def test_api_gives_the_bound_and_says_it_is_not_exact(
    r: redis.Redis, viewer_client: Client, query: str
) -> None:
    lag_bus(r)
    lags = redis_lags(r)
    if query:
        mirror.mirror_sync(conn=CONN)
    rows = {s["key"]: s for s in viewer_client.get(api("/c/default/streams/") + query).json()["streams"]}
    for key, (groups, bound, unknown) in lags.items():
        row = rows[key]
        assert row["lag"] == bound, key
        assert row["lag_exact"] is (groups > 0 and unknown == 0), key
        assert row["lag_unknown_groups"] == unknown, key
    info = viewer_client.get(stream_api("orders")).json()
    assert (info["lag"], info["lag_exact"], info["lag_unknown_groups"]) == (40, False, 1)


def test_stream_page_shows_the_bound(r: redis.Redis, viewer_client: Client) -> None:
    lag_bus(r)
    _, bound, unknown = redis_lags(r)["orders"]
    body = viewer_client.get(stream_url("orders")).content.decode()
    cell = re.search(r'data-fact="stream-lag">(.*?)</span></div>', body, re.S)
    assert cell and re.sub(r"<[^>]+>", "", cell.group(1)).strip().startswith(bound_text(bound, unknown))


def test_cli_list_shows_the_bound(redis_server, r: redis.Redis, capsys: pytest.CaptureFixture[str]) -> None:
    lag_bus(r)
    lags = redis_lags(r)
    url = redis_server.url(0)
    assert main(["list", "--url", url, "--json"]) == 0
    rows = {row["key"]: row for row in json.loads(capsys.readouterr().out)["streams"]}
    for key, (groups, bound, unknown) in lags.items():
        assert (rows[key]["lag"], rows[key]["lag_unknown_groups"]) == (bound, unknown), key
        assert rows[key]["lag_exact"] is (groups > 0 and unknown == 0), key
    assert main(["list", "--url", url]) == 0
    line = next(x for x in capsys.readouterr().out.splitlines() if x.startswith("orders "))
    assert "≥40 (1 unknown)" in line


def test_metrics_count_the_groups_whose_lag_is_unknown(r: redis.Redis, client: Client, viewer, api_token) -> None:
    lag_bus(r)
    unknown = sum(lags[2] for lags in redis_lags(r).values())
    snapshots.snapshot_take(tick=snapshots.snapshot_tick_for(now=timezone.now(), interval_s=10))
    text = client.get("/metrics", HTTP_AUTHORIZATION=f"Bearer {api_token(viewer)}").content.decode()
    assert f'busconsole_connection_groups_lag_unknown{{connection="default"}} {float(unknown)}' in text
