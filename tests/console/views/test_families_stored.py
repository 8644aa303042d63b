"""The families page and API read the snapshot's stored rows (the newest FamilySample rows of the
connection), not a pass over Redis per request: Redis's own INFO commandstats shows no SCAN, XINFO or
DBSIZE issued by them; the figures are the stored rows' (the newest tick's, not an older one's); a partial
pass says "looked at N of M"; before any row the page says so (and how far the first pass under way has
got), and ``now=1`` runs the bounded pass."""

from __future__ import annotations

import re
from datetime import timedelta

import pytest
import redis
from django.test import Client
from django.utils import timezone

from streams_app.metrics.models import FamilyPassState, FamilySample, name_hash
from tests.console.helpers import CONN, api, seg, stream_url

#: Commands a pass over Redis sends (SCAN, XINFO, DBSIZE) and the per-stream reads of a list.
PASS_COMMANDS = ("scan", "xinfo", "dbsize", "xlen", "type")


def _counts(r: redis.Redis) -> dict[str, int]:
    stats = r.info("commandstats")
    out: dict[str, int] = {}
    for name, figures in stats.items():
        base = name.removeprefix("cmdstat_").split("|")[0]
        out[base] = out.get(base, 0) + int(figures["calls"])
    return out


def _stored(at, family: str, *, keys: int, kind: str = "detected", complete: bool = True,
            looked_at: int = 1_000_000, keys_total: int | None = 1_000_000, **more) -> FamilySample:
    return FamilySample.objects.create(
        connection=CONN, family=family, family_hash=name_hash(family.encode()), kind=kind, at=at, keys=keys,
        entries=more.pop("entries", keys * 2), complete=complete, looked_at=looked_at, keys_total=keys_total,
        **more,
    )


@pytest.fixture
def stored_rows(db, r: redis.Redis) -> dict:
    r.xadd("progress:1", {"step": "1"})  # the keyspace holds one stream; the rows speak of a million
    now = timezone.now().replace(microsecond=0)
    older = now - timedelta(seconds=10)
    _stored(older, "progress:*", keys=5, rate_per_s=1.0)
    newest = {
        "progress:*": _stored(now, "progress:*", keys=987_654, entries=1_975_308, groups=0, pending=0,
                              rate_per_s=412.5, busiest=[{"key": "progress:1", "length": 3},
                                                         {"key": "progress:\\xff", "length": 2}]),
        "task:*:events": _stored(now, "task:*:events", keys=12_345, entries=24_690, groups=2_000, pending=321,
                                 dlq_keys=40, dlq_depth=77, oldest_id="1700000000000-0",
                                 newest_id="1800000000000-5"),
        "orders": _stored(now, "orders", kind="key", keys=1, entries=9, busiest=[{"key": "orders", "length": 9}]),
    }
    return {"at": now, "rows": newest}


def test_the_page_and_api_show_the_stored_rows_and_send_no_pass(viewer_client: Client, stored_rows, r) -> None:
    before = _counts(r)
    page = viewer_client.get(f"/c/{CONN}/families/")
    reply = viewer_client.get(api(f"/c/{CONN}/families/"))
    after = _counts(r)
    assert page.status_code == reply.status_code == 200, (page.content[:500], reply.content[:500])
    assert {c: after.get(c, 0) - before.get(c, 0) for c in PASS_COMMANDS} == dict.fromkeys(PASS_COMMANDS, 0)

    body = reply.json()
    assert body["source"] == "snapshot" and body["as_of"] == stored_rows["at"].isoformat()
    assert body["complete"] and body["keys_total"] == 1_000_000 and body["streams"] == 987_654 + 12_345 + 1
    by_glob = {row["pattern"]: row for row in body["families"]}
    assert list(by_glob) == ["progress:*", "task:*:events", "orders"]  # most keys first
    for glob, sample in stored_rows["rows"].items():
        row = by_glob[glob]
        assert (row["keys"], row["entries"], row["groups"], row["pending"], row["dlq_keys"], row["dlq_depth"]) == (
            sample.keys, sample.entries, sample.groups, sample.pending, sample.dlq_keys, sample.dlq_depth)
        assert row["url"] == f"/c/{CONN}/families/{seg(glob)}/"
    tasks = by_glob["task:*:events"]
    assert (tasks["oldest_id"], tasks["newest_id"]) == ("1700000000000-0", "1800000000000-5")
    assert by_glob["progress:*"]["rate_per_s"] == 412.5
    # a member's text that escapes a byte cannot give its key back: shown, not linked
    assert [m["url"] for m in by_glob["progress:*"]["busiest"]] == [stream_url("progress:1"), None]
    assert by_glob["orders"]["stream_url"] == stream_url("orders")

    text = page.content.decode()
    assert "As of the snapshot tick" in text and "looked at all 1000000 keys" in text
    cells = dict(re.findall(r'<tr data-family="([^"]+)">\s*<td>.*?</td>\s*<td class="num">(\d+)</td>', text, re.S))
    assert cells == {"progress:*": "987654", "task:*:events": "12345", "orders": "1"}


def test_a_partial_pass_says_looked_at_n_of_m(viewer_client: Client, db, r) -> None:
    at = timezone.now()
    _stored(at, "progress:*", keys=20_000, complete=False, looked_at=20_000, keys_total=1_000_000)
    text = viewer_client.get(f"/c/{CONN}/families/").content.decode()
    assert "looked at 20000 of 1000000 keys" in text
    body = viewer_client.get(api(f"/c/{CONN}/families/")).json()
    assert not body["complete"] and (body["looked_at"], body["keys_total"]) == (20_000, 1_000_000)


def test_before_any_snapshot_the_page_says_so_and_now_counts(viewer_client: Client, db, r) -> None:
    r.xadd("progress:1", {"step": "1"})
    r.xadd("progress:2", {"step": "1"})
    before = _counts(r)
    text = viewer_client.get(f"/c/{CONN}/families/").content.decode()
    body = viewer_client.get(api(f"/c/{CONN}/families/")).json()
    assert _counts(r).get("scan", 0) == before.get("scan", 0)
    assert "No snapshot of this connection" in text and "?now=1" in text
    assert body["source"] == "none" and body["families"] == [] and not body["complete"]

    counted = viewer_client.get(api(f"/c/{CONN}/families/"), {"now": 1}).json()
    assert counted["source"] == "pass" and counted["complete"]
    assert {row["pattern"]: row["keys"] for row in counted["families"]} == {"progress:*": 2}
    assert f"Looked at all {r.dbsize()} keys" in viewer_client.get(f"/c/{CONN}/families/?now=1").content.decode()


def test_before_the_first_rows_a_pass_under_way_is_said(viewer_client: Client, db, r, settings) -> None:
    settings.BUSCONSOLE_FAMILY_MODE_KEYS = 50_000
    FamilyPassState.objects.create(connection=CONN, cursor=4242, started_at=timezone.now(), keys_total=1_000_000,
                                   looked_at=50_000, streams=49_000)
    text = viewer_client.get(f"/c/{CONN}/families/").content.decode()
    assert "first family pass of this connection is under way" in text
    assert "looked at 50000 of 1000000 keys</span> so far (49000 streams read" in text
    body = viewer_client.get(api(f"/c/{CONN}/families/")).json()
    assert (body["source"], body["looked_at"], body["keys_total"], body["streams"]) == ("none", 50_000, 1_000_000, 49_000)
    streams = viewer_client.get(f"/c/{CONN}/streams/").content.decode()
    assert "data-family-mode" in streams and "Its first family pass is under way" in streams
