"""The read side of the access layer: scans, summaries, XINFO, entry and pending pages, consumers, errors.

Every figure is checked against what Redis itself answers to the same question (XLEN, XINFO STREAM /
GROUPS / CONSUMERS, XPENDING) or against the IDs XADD returned, so paging must visit each entry exactly
once in order; a stopped server and an unknown connection must raise the access layer's own errors.
"""

from __future__ import annotations

import pytest
import redis

from streams_app.redis_ops import client
from streams_app.redis_ops.errors import InvalidArgument, NotFound, Unreachable
from streams_app.redis_ops.reads import entries as entry_reads
from streams_app.redis_ops.reads import groups as group_reads
from streams_app.redis_ops.reads import pending as pending_reads
from streams_app.redis_ops.reads import streams as stream_reads
from tests.console.helpers import CONN


def _ids(entries) -> list[str]:
    return [e.id for e in entries]


def test_scan_finds_only_streams_and_pages_with_a_cursor(r: redis.Redis) -> None:
    expected = set()
    for i in range(130):
        key = f"s:{i}".encode()
        r.xadd(key, {"n": str(i)})
        expected.add(key)
    r.set("not-a-stream", "x")
    r.lpush("a-list", "x")

    seen: list[bytes] = []
    cursor = 0
    for _ in range(100):  # bounded
        page = stream_reads.streams_scan(CONN, cursor=cursor, count=25)
        seen += [s.key for s in page.streams]
        cursor = page.next_cursor
        if cursor == 0:
            break
    assert cursor == 0
    assert set(seen) == expected
    assert len(seen) == len(set(seen))


def test_scan_match_glob(r: redis.Redis) -> None:
    for key in ("orders", "orders:dlq", "payments", "emails"):
        r.xadd(key, {"a": "1"})
    page = stream_reads.streams_scan(CONN, match=b"orders*", count=50)
    assert page.next_cursor == 0
    assert sorted(s.key for s in page.streams) == [b"orders", b"orders:dlq"]


def test_summary_matches_xinfo(r: redis.Redis) -> None:
    first = r.xadd("s", {"a": "1"}).decode()
    for _ in range(4):
        last = r.xadd("s", {"a": "2"}).decode()
    r.xgroup_create("s", "g1", id="0")
    r.xgroup_create("s", "g2", id="0")
    r.xreadgroup("g1", "c1", {"s": ">"}, count=3)
    r.xreadgroup("g2", "c1", {"s": ">"}, count=1)

    [summary] = stream_reads.stream_summaries(CONN, [b"s"])
    assert summary.length == r.xlen("s") == 5
    assert summary.first_id == first and summary.last_id == last
    assert summary.groups == 2
    assert summary.pending == 4  # 3 + 1 read without ack


def test_vanished_keys_are_left_out(r: redis.Redis) -> None:
    r.xadd("s", {"a": "1"})
    r.set("plain", "x")
    assert [s.key for s in stream_reads.stream_summaries(CONN, [b"s", b"gone", b"plain"])] == [b"s"]


def test_stream_info_groups_lag_and_entries_read(r: redis.Redis) -> None:
    for i in range(10):
        r.xadd("s", {"i": str(i)})
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c", {"s": ">"}, count=4)
    info = stream_reads.stream_info(CONN, b"s")
    raw = r.xinfo_groups("s")[0]
    [g] = info.groups
    assert g.name == b"g"
    assert g.pending == raw["pending"] == 4
    assert g.entries_read == raw["entries-read"] == 4
    assert g.lag == raw["lag"] == 6
    assert info.entries_added == 10
    assert info.last_generated_id == r.xinfo_stream("s")["last-generated-id"].decode()


def test_lag_unknown_after_arbitrary_setid(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"i": str(i)}).decode() for i in range(5)]
    r.xgroup_create("s", "g", id="0")
    r.xdel("s", ids[2])
    r.execute_command("XGROUP", "SETID", "s", "g", ids[1])
    assert r.xinfo_groups("s")[0]["lag"] is None  # what Redis says...
    assert stream_reads.stream_info(CONN, b"s").groups[0].lag is None  # ...is what we show


def test_missing_stream_and_wrong_type(r: redis.Redis) -> None:
    r.set("plain", "x")
    with pytest.raises(NotFound):
        stream_reads.stream_info(CONN, b"missing")
    with pytest.raises(NotFound):
        stream_reads.stream_info(CONN, b"plain")
    with pytest.raises(NotFound):
        entry_reads.entries_page(CONN, b"missing", mask=None)
    with pytest.raises(NotFound):
        entry_reads.entries_page(CONN, b"plain", mask=None)


@pytest.mark.parametrize("order", ["desc", "asc"])
def test_paging_visits_every_entry_exactly_once(r: redis.Redis, order: str) -> None:
    # Several entries share a millisecond (explicit IDs) to exercise the sequence part.
    expected = []
    for ms in range(1, 40):
        for seq in range(ms % 3 + 1):
            expected.append(r.xadd("s", {"v": f"{ms}.{seq}"}, id=f"{ms}-{seq}").decode())
    if order == "desc":
        expected.reverse()

    seen: list[str] = []
    cursor = None
    for _ in range(200):
        kwargs = {"before": cursor} if order == "desc" else {"after": cursor}
        page = entry_reads.entries_page(CONN, b"s", order=order, count=7, **(kwargs if cursor else {}), mask=None)
        seen += _ids(page.entries)
        cursor = page.next
        if cursor is None:
            break
    assert seen == expected


def test_paging_back_the_other_way(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"i": str(i)}).decode() for i in range(25)]
    newest = entry_reads.entries_page(CONN, b"s", count=10, mask=None)
    assert _ids(newest.entries) == ids[::-1][:10] and newest.prev is None
    older = entry_reads.entries_page(CONN, b"s", before=newest.next, count=10, mask=None)
    assert _ids(older.entries) == ids[::-1][10:20]
    # "Newer" from the second page leads back to exactly the first page.
    back = entry_reads.entries_page(CONN, b"s", after=older.prev, count=10, mask=None)
    assert _ids(back.entries) == _ids(newest.entries)
    # ...and its "older" link leads to the second page again.
    assert _ids(entry_reads.entries_page(CONN, b"s", before=back.next, count=10, mask=None).entries) == _ids(older.entries)


def test_jump_to_id_and_time(r: redis.Redis) -> None:
    for ms in (1000, 2000, 2000, 3000):
        r.xadd("s", {"x": "1"}, id=f"{ms}-*")
    page = entry_reads.entries_page(CONN, b"s", at="2000-1", count=10, mask=None)
    assert _ids(page.entries) == ["2000-1", "2000-0", "1000-0"]
    # A time means the whole millisecond: newest first starts at its last entry.
    page = entry_reads.entries_page(CONN, b"s", at="1970-01-01T00:00:02Z", count=10, mask=None)
    assert _ids(page.entries) == ["2000-1", "2000-0", "1000-0"]
    page = entry_reads.entries_page(CONN, b"s", at="1970-01-01T00:00:02+00:00", order="asc", count=10, mask=None)
    assert _ids(page.entries) == ["2000-0", "2000-1", "3000-0"]


@pytest.mark.parametrize("bad", ["abc", "1-2-3", "-5", "99999999999999999999999-0", "1-x"])
def test_malformed_ids_are_refused(r: redis.Redis, bad: str) -> None:
    r.xadd("s", {"a": "1"})
    with pytest.raises(InvalidArgument):
        entry_reads.entries_page(CONN, b"s", before=bad, mask=None)


def test_binary_and_unicode_keys_and_fields(r: redis.Redis) -> None:
    key = b"bin\x00\xff/%2F\xe2\x98\x83 \xf0\x9f\x9a\x80"
    eid = r.xadd(key, {b"\xfe\x00field": b"\x00\x01\x02", "ünï": "çødé"}).decode()
    page = entry_reads.entries_page(CONN, key, mask=None)
    assert _ids(page.entries) == [eid]
    assert page.entries[0].fields == ((b"\xfe\x00field", b"\x00\x01\x02"), ("ünï".encode(), "çødé".encode()))
    assert [s.key for s in stream_reads.streams_scan(CONN).streams] == [key]


def test_pending_summary_extended_form_and_deleted_marks(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"i": str(i)}).decode() for i in range(6)]
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "alice", {"s": ">"}, count=4)
    r.xreadgroup("g", "bob", {"s": ">"}, count=2)
    r.xdel("s", ids[1])

    page = pending_reads.pending_page(CONN, b"s", b"g", count=10)
    raw = r.xpending("s", "g")
    assert page.summary.count == raw["pending"] == 6
    assert dict(page.summary.consumers) == {b"alice": 4, b"bob": 2}
    assert [p.id for p in page.entries] == ids
    assert [p.exists for p in page.entries] == [True, False, True, True, True, True]
    assert all(p.deliveries == 1 for p in page.entries)

    only_bob = pending_reads.pending_page(CONN, b"s", b"g", consumer=b"bob")
    assert [p.id for p in only_bob.entries] == ids[4:]


def test_pending_paging_and_idle_filter(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"i": str(i)}).decode() for i in range(9)]
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c", {"s": ">"})
    seen: list[str] = []
    after = None
    for _ in range(10):
        page = pending_reads.pending_page(CONN, b"s", b"g", after=after, count=4)
        seen += [p.id for p in page.entries]
        after = page.next
        if after is None:
            break
    assert seen == ids
    # Nothing has been idle for an hour; Redis's IDLE filter decides.
    assert pending_reads.pending_page(CONN, b"s", b"g", min_idle_ms=3_600_000).entries == ()


def test_consumers_match_xinfo(r: redis.Redis) -> None:
    r.xadd("s", {"a": "1"})
    r.xgroup_create("s", "g", id="0")
    r.xreadgroup("g", "c1", {"s": ">"})
    r.xgroup_createconsumer("s", "g", "c2")
    got = {c.name: c.pending for c in group_reads.consumers(CONN, b"s", b"g")}
    assert got == {c["name"]: c["pending"] for c in r.xinfo_consumers("s", "g")}


def test_unknown_group_is_not_found(r: redis.Redis) -> None:
    r.xadd("s", {"a": "1"})
    with pytest.raises(NotFound):
        pending_reads.pending_page(CONN, b"s", b"nope")
    with pytest.raises(NotFound):
        group_reads.group_info(CONN, b"s", b"nope")


def test_unreachable_server_raises_one_error_type(settings, spare_redis) -> None:
    settings.BUS_REDIS_URLS = {"spare": spare_redis.url(0)}
    client.reset()
    redis.Redis.from_url(spare_redis.url(0)).xadd("s", {"a": "1"})
    assert stream_reads.stream_info("spare", b"s").length == 1
    spare_redis.stop()
    with pytest.raises(Unreachable):
        stream_reads.stream_info("spare", b"s")
    assert client.health("spare", fresh=True).ok is False


def test_unknown_connection(settings) -> None:
    with pytest.raises(NotFound):
        stream_reads.stream_info("nope", b"s")
