"""``python -m eventbus list|inspect|groups|pending|dlq|stats``: the console's screens on the command line.

Each command runs in-process through ``main(argv)`` (``--json``) and its output is compared with what
Redis itself reports, read here with redis-py (XLEN, XINFO, XPENDING, XRANGE). DLQs are written as their
producers write them (ours, the seed ``streams`` module, OmniDaemon; see tests/console/redis_ops/helpers).
"""

from __future__ import annotations

import json
from typing import Any

import pytest
import redis

from eventbus.__main__ import main
from tests.console.redis_ops.helpers import EVENTBUS_FIELDS, OMNI_DATA, OMNI_KEY


def run(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, Any]:
    status = main([argv[0], "--url", url, "--json", *argv[1:]])
    out = capsys.readouterr().out
    return status, json.loads(out) if out.strip() else None


@pytest.fixture
def bus_keys(r: redis.Redis) -> None:
    """An application stream with two groups (one with pending entries), and three DLQs."""
    for i in range(5):
        r.xadd("orders", {"type": "order.created", "data": json.dumps({"order_id": i, "note": f"n{i}"})})
    r.xadd("orders", {"type": "order.paid", "data": "card declined"})
    r.xgroup_create("orders", "billing", id="0")
    r.xgroup_create("orders", "audit", id="$")
    r.xreadgroup("billing", "worker-1", {"orders": ">"}, count=4)
    r.xadd("{orders}:dlq", EVENTBUS_FIELDS)
    r.xadd("payments:dlq", {"amount": "7", "_retries": "3"})  # the seed module's
    r.xadd(OMNI_KEY, {"data": OMNI_DATA})


def test_list_reports_what_xinfo_reports(capsys, url: str, r: redis.Redis, bus_keys: None) -> None:
    r.set("not-a-stream", "x")
    status, doc = run(capsys, url, "list")
    assert status == 0 and doc["truncated"] is False
    rows = {row["key"]: row for row in doc["streams"]}
    expected = {key.decode() for key in r.scan_iter(_type="stream")}
    assert set(rows) == expected
    for key in expected:
        groups = r.xinfo_groups(key)
        assert rows[key]["length"] == r.xlen(key)
        assert rows[key]["groups"] == len(groups)
        assert rows[key]["pending"] == sum(g["pending"] for g in groups)
    assert rows["orders"]["pending"] == 4 and rows["orders"]["dlq"] is None
    assert rows["{orders}:dlq"]["dlq"] == "eventbus-or-streams"
    assert rows["payments:dlq"]["dlq"] == "eventbus-or-streams"
    assert rows[OMNI_KEY.decode()]["dlq"] == "omnidaemon"


def test_list_stops_at_max_keys(capsys, url: str, r: redis.Redis) -> None:
    for i in range(5):
        r.xadd(f"s{i}", {"a": "1"})
    status, doc = run(capsys, url, "list", "--max-keys", "3")
    assert status == 0 and doc["truncated"] is True and len(doc["streams"]) == 3


def test_inspect_pages_like_xrange(capsys, url: str, r: redis.Redis, bus_keys: None) -> None:
    ids = [entry_id.decode() for entry_id, _ in r.xrange("orders")]
    status, doc = run(capsys, url, "inspect", "orders", "--from", ids[1], "--limit", "2")
    assert status == 0
    assert [e["id"] for e in doc["entries"]] == ids[1:3]
    assert doc["next"] == "(" + ids[2]
    first = doc["entries"][0]["fields"]
    assert first[0] == {"name": "type", "kind": "text", "text": "order.created"}
    assert first[1]["kind"] == "json" and first[1]["json"] == {"order_id": 1, "note": "n1"}
    _, more = run(capsys, url, "inspect", "orders", "--from", doc["next"], "--limit", "100")
    assert [e["id"] for e in more["entries"]] == ids[3:] and more["next"] is None
    _, newest = run(capsys, url, "inspect", "orders", "--reverse", "--limit", "1")
    assert [e["id"] for e in newest["entries"]] == ids[-1:]


def test_inspect_search_is_plain_text_over_names_and_values(
    capsys, url: str, r: redis.Redis, bus_keys: None
) -> None:
    expected = [
        entry_id.decode()
        for entry_id, fields in r.xrange("orders")
        if any(b"declined" in (k + b" " + v).lower() for k, v in fields.items())
    ]
    status, doc = run(capsys, url, "inspect", "orders", "--search", "DECLINED")
    assert status == 0 and [e["id"] for e in doc["entries"]] == expected == [
        r.xrange("orders")[-1][0].decode()
    ]
    assert doc["scanned"] == r.xlen("orders")
    status, doc = run(capsys, url, "inspect", "orders", "--search", "nowhere")
    assert status == 1 and doc["entries"] == []


def test_inspect_refuses_a_missing_stream_and_a_bad_id(capsys, url: str, r: redis.Redis) -> None:
    assert main(["inspect", "--url", url, "nothing"]) == 1
    assert "no stream 'nothing'" in capsys.readouterr().err
    r.xadd("orders", {"a": "1"})
    assert main(["inspect", "--url", url, "orders", "--from", "yesterday"]) == 2
    assert "not a stream ID" in capsys.readouterr().err


def test_groups_and_pending_match_xinfo_and_xpending(
    capsys, url: str, r: redis.Redis, bus_keys: None
) -> None:
    status, doc = run(capsys, url, "groups", "orders")
    assert status == 0
    info = {g["name"].decode(): g for g in r.xinfo_groups("orders")}
    assert {g["name"] for g in doc["groups"]} == set(info) == {"billing", "audit"}
    for group in doc["groups"]:
        raw = info[group["name"]]
        assert group["pending"] == raw["pending"]
        assert group["last_delivered_id"] == raw["last-delivered-id"].decode()
        assert group["lag"] == raw["lag"]
        assert [c["name"] for c in group["consumers"]] == [
            c["name"].decode() for c in r.xinfo_consumers("orders", group["name"])
        ]
    # make two entries long idle (XCLAIM's IDLE sets it: no waiting)
    pel = r.xpending_range("orders", "billing", "-", "+", 10)
    old = [row["message_id"] for row in pel[:2]]
    r.xclaim("orders", "billing", "worker-2", 0, old, idle=600_000)
    status, doc = run(capsys, url, "pending", "orders", "billing", "--min-idle", "500000")
    assert status == 0 and doc["total"] == 4
    assert [(e["id"], e["consumer"]) for e in doc["entries"]] == [(i.decode(), "worker-2") for i in old]
    _, doc = run(capsys, url, "pending", "orders", "billing", "--consumer", "worker-1")
    expected = r.xpending_range("orders", "billing", "-", "+", 100, consumername="worker-1")
    assert [e["id"] for e in doc["entries"]] == [row["message_id"].decode() for row in expected]
    assert main(["pending", "--url", url, "orders", "nogroup"]) == 1


def test_dlq_lists_every_convention_and_parses_entries(
    capsys, url: str, r: redis.Redis, bus_keys: None
) -> None:
    status, doc = run(capsys, url, "dlq")
    assert status == 0
    rows = {row["key"]: row for row in doc["dlqs"]}
    assert set(rows) == {"{orders}:dlq", "payments:dlq", OMNI_KEY.decode()}
    assert rows["{orders}:dlq"]["convention"] == "eventbus"
    assert rows["{orders}:dlq"]["source_streams"] == ["orders"]
    assert rows["payments:dlq"]["convention"] == "streams"
    assert rows[OMNI_KEY.decode()]["convention"] == "omnidaemon"
    assert rows[OMNI_KEY.decode()]["source_streams"] == ["omni-stream:file.uploaded"]
    assert all(row["length"] == r.xlen(key) for key, row in rows.items())

    _, doc = run(capsys, url, "dlq", "{orders}:dlq")
    [entry] = doc["entries"]
    assert entry["original_stream"] == "orders" and entry["group"] == "billing" and entry["retries"] == 5
    assert entry["error"] == EVENTBUS_FIELDS[b"dlq_error"].decode()
    _, doc = run(capsys, url, "dlq", OMNI_KEY.decode())
    assert doc["entries"][0]["error"] == "Max retries (3) exceeded"
    _, doc = run(capsys, url, "dlq", "orders")  # a stream: its DLQs
    assert [row["key"] for row in doc["dlqs"]] == ["{orders}:dlq"]


def test_configured_patterns_from_the_option_and_the_environment(
    capsys, url: str, r: redis.Redis, monkeypatch: pytest.MonkeyPatch
) -> None:
    r.xadd("jobs:resize:dead", {"job": "7", "reason": "too big", "attempts": "2"})
    pattern = [{"name": "jobs-dead", "match": "jobs:*:dead", "target": "strip_suffix::dead",
                "error_field": "reason", "retries_field": "attempts"}]  # fmt: skip
    _, doc = run(capsys, url, "dlq")
    assert doc["dlqs"] == []
    monkeypatch.setenv("EVENTBUS_DLQ_PATTERNS", json.dumps(pattern))
    _, doc = run(capsys, url, "dlq", "jobs:resize:dead")
    [entry] = doc["entries"]
    assert (entry["convention"], entry["original_stream"], entry["error"], entry["retries"]) == (
        "jobs-dead", "jobs:resize", "too big", 2,
    )  # fmt: skip
    monkeypatch.delenv("EVENTBUS_DLQ_PATTERNS")
    _, doc = run(capsys, url, "dlq", "--dlq-patterns", json.dumps(pattern))
    assert [(row["key"], row["convention"]) for row in doc["dlqs"]] == [("jobs:resize:dead", "jobs-dead")]
    assert main(["dlq", "--url", url, "--dlq-patterns", '[{"name": "x"}]']) == 2
    assert "--dlq-patterns[0]: 'match' is required" in capsys.readouterr().err


def test_stats_sum_the_metric_events_of_the_window(capsys, url: str, r: redis.Redis, bus_keys: None) -> None:
    metric = {"stream": "orders", "group": "billing", "type": "order.created", "duration_ms": "1.000",
              "max_ms": "1.000", "consumer": "w", "ts": "0"}  # fmt: skip
    # long before the window: left out
    r.xadd("{orders}:metrics", {**metric, "event": "processed", "count": "1000"}, id="1-0")
    r.xadd("{orders}:metrics", {**metric, "event": "processed", "count": "40"})
    r.xadd("{orders}:metrics", {**metric, "event": "processed", "count": "20"})
    r.xadd("{orders}:metrics", {**metric, "event": "failed", "count": "1", "error": "boom"})
    r.xadd("eventbus:metrics", {**metric, "event": "processed", "count": "6"})  # the old shared stream
    r.xadd("eventbus:metrics", {**metric, "stream": "other", "event": "processed", "count": "100"})
    status, doc = run(capsys, url, "stats", "--window", "3600")
    assert status == 0
    rows = {row["key"]: row for row in doc["streams"]}
    assert (
        "{orders}:dlq" not in rows and "{orders}:metrics" not in rows
    )  # DLQs and metrics are not streams here
    orders = rows["orders"]
    assert (orders["processed"], orders["failed"], orders["dead_lettered"]) == (66, 1, 0)
    assert orders["processed_per_s"] == round(66 / 3600, 3)
    assert orders["dlq_depth"] == r.xlen("{orders}:dlq")
    assert orders["pending"] == 4 and orders["length"] == r.xlen("orders")
    assert orders["lag"] == max(g["lag"] for g in r.xinfo_groups("orders"))  # the largest, as the console shows


def test_tables_for_humans(capsys, url: str, r: redis.Redis, bus_keys: None) -> None:
    assert main(["list", "--url", url]) == 0
    lines = capsys.readouterr().out.splitlines()
    assert lines[0].split() == ["STREAM", "LENGTH", "GROUPS", "PENDING", "LAG", "DLQ"]
    assert any(line.split()[:4] == ["orders", "6", "2", "4"] for line in lines)
