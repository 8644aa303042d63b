"""Stream families over a real Redis (docs/operations.md#stream-families): the bounded pass and the members
pages against a grouping of SCAN's keys written in the test (tests/console/families_data.py), and each
family's figures against Redis's own XLEN, XINFO GROUPS, XPENDING and XRANGE summed in the test."""

from __future__ import annotations

import pytest
import redis

from busconsole.env import parse_stream_families
from streams_app.redis_ops.reads import families as family_reads
from tests.console.families_data import (
    CONFIGURED,
    ODD,
    ODD_GLOB,
    expected_figures,
    expected_grouping,
    populate,
    stream_keys,
)
from tests.console.helpers import CONN


@pytest.fixture
def keyspace(r: redis.Redis, settings) -> dict[bytes, set[bytes]]:
    settings.BUSCONSOLE_STREAM_FAMILIES = parse_stream_families(CONFIGURED)
    settings.BUSCONSOLE_FAMILY_SCAN_BUDGET = 1_000_000
    populate(r)
    return expected_grouping(r)


def test_the_pass_groups_every_stream_as_the_plain_grouping_does(r: redis.Redis, keyspace) -> None:
    found = family_reads.families_read(CONN, top=3)
    assert found.complete and found.missed == ()
    assert (found.looked_at, found.keys_total) == (r.dbsize(), r.dbsize())
    assert found.streams == len(stream_keys(r))
    got = {row.family.pattern: row.keys for row in found.families}
    assert got == {glob: len(keys) for glob, keys in keyspace.items()}
    kinds = {row.family.pattern: (row.family.kind, row.family.name) for row in found.families}
    assert kinds[b"tenant:*"] == ("configured", "tenant:*")
    assert kinds[b"audit:*"] == ("configured", "audit trail")  # "audit:5" would be detected as audit:* too
    assert kinds[b"progress:*"][0] == kinds[b"task:*:events"][0] == kinds[b"{task:*:events}:dlq"][0] == "detected"
    assert kinds[b"orders"] == ("key", "orders") and kinds[b"{orders}:dlq"] == ("key", "{orders}:dlq")
    assert kinds[b"progress:a:b"][0] == "key"  # progress:* matches it as a glob; its shape is another family
    # every family's glob, sent to Redis's own SCAN MATCH, selects its keys (the odd key's escapes too)
    for glob, keys in keyspace.items():
        assert keys <= set(r.scan_iter(match=glob, count=10_000, _type="stream")), glob


def test_each_row_sums_what_redis_says_of_its_members(r: redis.Redis, keyspace) -> None:
    want = expected_figures(r, keyspace)
    found = family_reads.families_read(CONN, top=3)
    got = {
        row.family.pattern: (row.keys, row.entries, row.groups, row.pending, row.dlq_depth, row.oldest_id,
                             row.newest_id)
        for row in found.families
    }
    assert got == {
        glob: (f.keys, f.entries, f.groups, f.pending, f.dlq_depth, f.oldest, f.newest) for glob, f in want.items()
    }
    rows = {row.family.pattern: row for row in found.families}
    assert rows[b"task:*:events"].pending > 0 and rows[b"task:*:events"].dlq_depth == 60
    # the busiest members: the longest three, longest first, ties by key
    for glob, keys in keyspace.items():
        lengths = sorted((-r.xlen(k), k) for k in keys)[:3]
        assert rows[glob].busiest == tuple((k, -n) for n, k in lengths), glob
    entries = [row.entries for row in found.families]
    assert entries == sorted(entries, reverse=True)


def test_a_pass_over_its_budget_says_how_far_it_got(r: redis.Redis, keyspace, settings) -> None:
    settings.BUSCONSOLE_FAMILY_SCAN_BUDGET = 1000
    found = family_reads.families_read(CONN)
    assert not found.complete
    assert found.keys_total == r.dbsize()
    assert 1000 <= found.looked_at < found.keys_total
    assert 0 < found.streams <= found.looked_at
    assert sum(row.keys for row in found.families) == found.streams


@pytest.mark.parametrize("glob", [b"progress:*", b"tenant:*", b"orders", ODD_GLOB, b"bin\xff:*"])
def test_the_members_pages_list_exactly_the_family(r: redis.Redis, keyspace, glob: bytes) -> None:
    seen: list[bytes] = []
    cursor, pages = 0, 0
    while True:
        page = family_reads.family_members(CONN, glob, cursor=cursor, count=200, budget=5000)
        seen += [s.key for s in page.streams]
        pages += 1
        assert all(s.length == r.xlen(s.key) for s in page.streams)
        if not page.next_cursor:
            break
        cursor = page.next_cursor
    assert len(seen) == len(set(seen))
    assert set(seen) == keyspace[glob]
    if glob == b"progress:*":
        assert b"progress:a:b" not in seen and pages > 1
    if glob.startswith(b"we"):
        assert seen == [ODD]
