"""The one parser per Redis reply (``redis_ops.parsers``), the shared SCAN and lookup helpers
(``redis_ops.commands``) and the entry-ID helpers (``redis_ops.ids``), against real replies.

Expected values come from the test server through redis-py's own reply parsing (``r.xinfo_*``,
``r.xpending*``, ``r.scan``), or from plain Python. Redis 7.2's ``inactive`` field cannot come from
the test server when it is older: that reply is transcribed from the XINFO CONSUMERS page of the
Redis documentation. Raw XRANGE and XPENDING replies come through the console's own client, which
passes them on as Redis wrote them (redis-py's ``r`` parses them into dicts).
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import replace
from datetime import UTC, datetime

import pytest
import redis

from eventbus.text import id_ms
from streams_app.redis_ops import client as redis_client
from streams_app.redis_ops import snapshot_reads
from streams_app.redis_ops.commands import entries_by_id, scan_streams
from streams_app.redis_ops.errors import NotFound
from streams_app.redis_ops.ids import reply_id
from streams_app.redis_ops.parsers import (
    parse_consumer,
    parse_entry,
    parse_group,
    parse_pending_entry,
    parse_pending_summary,
    parse_stream,
)
from streams_app.redis_ops.reads import groups as group_reads
from streams_app.redis_ops.types import ConsumerInfo
from streams_app.templatetags.console import idtime

CONN = "default"

#: XINFO CONSUMERS of Redis 7.2+, as the documentation shows it: ``inactive`` after ``idle``.
REDIS_72_CONSUMERS = [
    [b"name", b"Alice", b"pending", 1, b"idle", 9104628, b"inactive", 18104698],
    [b"name", b"Bob", b"pending", 0, b"idle", 83841983, b"inactive", -1],
]


@pytest.fixture(autouse=True)
def _fresh_clients() -> Iterator[None]:
    redis_client.reset()
    yield
    redis_client.reset()


@pytest.fixture
def resp2(redis_server) -> Iterator[redis.Redis]:
    """``r``'s database in RESP2, the protocol the console's clients speak: raw replies as they receive
    them (redis-py 8 speaks RESP3 by default, where XINFO replies are maps)."""
    client = redis.Redis.from_url(redis_server.url(0), protocol=2)
    yield client
    client.close()


def _group_with_consumers(r: redis.Redis) -> None:
    for i in range(3):
        r.xadd("s", {"i": str(i)})
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "reader", {"s": ">"}, count=2)
    r.xgroup_createconsumer("s", "g", "idler")  # never read: Redis 7.2+ says inactive -1


# ---------------------------------------------------------------- XINFO CONSUMERS


def test_consumer_rows_of_the_test_server(r: redis.Redis, resp2: redis.Redis) -> None:
    _group_with_consumers(r)
    raw = resp2.execute_command("XINFO", "CONSUMERS", "s", "g")
    got = [parse_consumer(row) for row in raw]
    # Idle times move between two calls: they are checked against the same reply, read by plain Python.
    for row, consumer in zip(raw, got, strict=True):
        fields = dict(zip(row[::2], row[1::2], strict=True))
        assert (consumer.name, consumer.pending, consumer.idle_ms) == (
            fields[b"name"], fields[b"pending"], fields[b"idle"]
        )
        # Redis 7.0 has no ``inactive``; 7.2+ says -1 for a consumer that never read: both are None.
        inactive = fields.get(b"inactive")
        assert consumer.inactive_ms == (None if inactive is None or inactive < 0 else inactive)
    assert {c.name: c.pending for c in got} == {c["name"]: c["pending"] for c in r.xinfo_consumers("s", "g")}


def test_consumer_rows_of_redis_72_keep_inactive() -> None:
    alice, bob = (parse_consumer(row) for row in REDIS_72_CONSUMERS)
    assert alice == ConsumerInfo(name=b"Alice", pending=1, idle_ms=9104628, inactive_ms=18104698)
    assert bob == ConsumerInfo(name=b"Bob", pending=0, idle_ms=83841983, inactive_ms=None)


def test_consumer_rows_of_redis_70_have_no_inactive() -> None:
    row = [b"name", b"Alice", b"pending", 1, b"idle", 9104628]
    assert parse_consumer(row) == ConsumerInfo(name=b"Alice", pending=1, idle_ms=9104628, inactive_ms=None)


def test_pages_and_the_mirror_read_consumers_alike(r: redis.Redis) -> None:
    _group_with_consumers(r)
    # Times move between the two reads; whether ``inactive`` is known must not.
    page = {c.name: (c.pending, c.inactive_ms is None) for c in group_reads.consumers(CONN, b"s", b"g")}
    [stream] = snapshot_reads.server_read(CONN, consumers=True).streams
    [group] = stream.groups
    mirror = {c.name: (c.pending, c.inactive_ms is None) for c in group.consumer_list or ()}
    assert page == mirror
    assert {name: pending for name, (pending, _) in page.items()} == {
        c["name"]: c["pending"] for c in r.xinfo_consumers("s", "g")
    }


# ---------------------------------------------------------------- XINFO STREAM / GROUPS, XPENDING


def test_stream_and_groups_match_redis_py(r: redis.Redis, resp2: redis.Redis) -> None:
    _group_with_consumers(r)
    info = parse_stream(b"s", resp2.execute_command("XINFO", "STREAM", "s"),
                        resp2.execute_command("XINFO", "GROUPS", "s"))
    want = r.xinfo_stream("s")
    assert info.length == want["length"] == 3
    assert info.first_id == want["first-entry"][0].decode()
    assert info.last_id == want["last-entry"][0].decode()
    assert info.last_generated_id == want["last-generated-id"].decode()
    assert info.entries_added == want.get("entries-added")
    [group] = info.groups
    [want_group] = r.xinfo_groups("s")
    assert (group.name, group.consumers, group.pending) == (want_group["name"], 2, 2)
    assert group.last_delivered_id == want_group["last-delivered-id"].decode()
    assert group.lag == want_group.get("lag")
    assert (group.longest_idle, group.consumer_list) == (None, None)  # not read by this parser
    assert info.pending == 2


def test_empty_stream_has_no_ends(r: redis.Redis, resp2: redis.Redis) -> None:
    r.xadd("s", {"a": "1"})
    r.xtrim("s", maxlen=0)
    info = parse_stream(b"s", resp2.execute_command("XINFO", "STREAM", "s"))
    assert (info.length, info.first_id, info.last_id, info.groups) == (0, None, None, ())


def test_pending_summary_and_rows_match_redis_py(r: redis.Redis) -> None:
    _group_with_consumers(r)
    raw = redis_client.get_client(CONN)
    summary = parse_pending_summary(raw.execute_command("XPENDING", "s", "g"))
    want = r.xpending("s", "g")
    assert (summary.count, summary.min_id, summary.max_id) == (
        want["pending"], want["min"].decode(), want["max"].decode()
    )
    assert dict(summary.consumers) == {c["name"]: c["pending"] for c in want["consumers"]}
    rows = [parse_pending_entry(row) for row in raw.execute_command("XPENDING", "s", "g", "-", "+", 10)]
    want_rows = r.xpending_range("s", "g", "-", "+", 10)
    assert [(p.id, p.consumer, p.deliveries) for p in rows] == [
        (w["message_id"].decode(), w["consumer"], w["times_delivered"]) for w in want_rows
    ]
    assert all(p.exists for p in rows)


def test_group_row_parsed_once_for_pages_and_actions(r: redis.Redis, resp2: redis.Redis) -> None:
    _group_with_consumers(r)
    [raw] = resp2.execute_command("XINFO", "GROUPS", "s")
    info = group_reads.group_info(CONN, b"s", b"g")
    assert replace(info, longest_idle=None) == parse_group(raw)  # plus the pending figure (test_pending_idle)
    assert info.longest_idle is not None


def test_entry_reply(r: redis.Redis) -> None:
    entry_id = r.xadd("s", {b"a": b"1", b"\xff": b"\x00"}).decode()
    [raw] = redis_client.get_client(CONN).execute_command("XRANGE", "s", "-", "+")
    entry = parse_entry(raw)
    assert entry.id == entry_id
    assert entry.fields == ((b"a", b"1"), (b"\xff", b"\x00"))
    assert entry.time == datetime.fromtimestamp(int(entry_id.split("-")[0]) / 1000, tz=UTC)


# ---------------------------------------------------------------- the SCAN iterator


def test_scan_streams_yields_each_stream_once_and_only_streams(r: redis.Redis) -> None:
    for i in range(60):
        r.xadd(f"s:{i}", {"a": "1"})
        r.set(f"plain:{i}", "x")
    steps = list(scan_streams(CONN, count=7))
    keys = [key for step in steps for key in step.keys]
    assert steps[-1].cursor == 0
    assert sorted(keys) == sorted(r.scan_iter(count=1000, _type="stream"))
    assert len(keys) == len(set(keys)) == 60
    assert [step.scanned for step in steps] == [7 * (n + 1) for n in range(len(steps))]


def test_scan_streams_stops_at_the_budget_and_grows_its_count(r: redis.Redis) -> None:
    pipe = r.pipeline(transaction=False)
    for i in range(2000):
        pipe.set(f"plain:{i}", "x")
    pipe.execute()
    steps = list(scan_streams(CONN, match=b"nothing*", count=10, grow_to=1000, budget=210))
    # COUNT grows fourfold after calls that found nothing: 10, 40, 160 looked at; 210 reaches the budget.
    assert [step.scanned for step in steps] == [10, 50, 210]
    assert steps[-1].cursor != 0 and all(step.keys == () for step in steps)


def test_scan_streams_resumes_from_a_cursor(r: redis.Redis) -> None:
    for i in range(100):
        r.xadd(f"s:{i}", {"a": "1"})
    first = next(scan_streams(CONN, count=10))
    rest = [key for step in scan_streams(CONN, cursor=first.cursor, count=10) for key in step.keys]
    cursor, expected = first.cursor, set()
    while cursor:
        cursor, batch = r.scan(cursor, count=10, _type="stream")
        expected.update(batch)
    assert set(rest) == expected
    assert set(first.keys) | set(rest) == {f"s:{i}".encode() for i in range(100)}


# ---------------------------------------------------------------- TYPE-checked lookups by ID


def test_entries_by_id_finds_each_id_and_runs_the_rest(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"n": str(n)}).decode() for n in range(3)]
    r.xdel("s", ids[1])
    client = redis_client.get_client(CONN)
    found, [length] = entries_by_id(CONN, client, b"s", [ids[0], ids[1], "9-9"], then=[("XLEN", b"s")])
    assert [entry.id if entry else None for entry in found] == [ids[0], None, None]
    assert found[0] is not None and found[0].fields == ((b"n", b"0"),)
    assert length == r.xlen("s") == 2


def test_entries_by_id_needs_a_stream(r: redis.Redis) -> None:
    r.set("plain", "x")
    client = redis_client.get_client(CONN)
    with pytest.raises(NotFound, match="No such stream"):
        entries_by_id(CONN, client, b"gone", ["1-0"])
    with pytest.raises(NotFound, match="another type"):
        entries_by_id(CONN, client, b"plain", ["1-0"], transaction=True)


# ---------------------------------------------------------------- entry IDs


def test_reply_id_and_id_ms() -> None:
    assert reply_id([b"1700000000000-3", [b"a", b"1"]]) == "1700000000000-3"
    assert reply_id(None) is None and reply_id([]) is None
    assert id_ms("1700000000000-3") == 1700000000000
    assert id_ms("5") == 5
    for bad in (None, "", "x-1", "²-0", "-1"):
        assert id_ms(bad) is None


def test_idtime_filter_uses_the_id_parser() -> None:
    assert idtime("1700000000000-3") == datetime(2023, 11, 14, 22, 13, 20, tzinfo=UTC)
    for bad in (None, "", "nope", "²-0"):
        assert idtime(bad) is None
