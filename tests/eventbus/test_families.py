"""The bus's family rule (``eventbus.families``), Django-free: shapes by hand-picked cases, every family's
glob checked against Redis's own ``SCAN MATCH`` (it must select its key), and the tally's sums and
busiest members against plain Python over the same facts."""

from __future__ import annotations

import random

import pytest
import redis

from eventbus.families import (
    FamilyError,
    FamilyTally,
    Grouping,
    KeyFacts,
    check_delimiter,
    parse_families,
    shape_of,
)


@pytest.mark.parametrize(
    ("key", "pattern", "varied"),
    [
        (b"progress:123", b"progress:*", True),
        (b"task:9:events", b"task:*:events", True),
        (b"{progress:123}:dlq", b"{progress:*}:dlq", True),
        (b"{task:9}:events", b"{task:*}:events", True),
        (b"job:550e8400-e29b-41d4-a716-446655440000", b"job:*", True),
        (b"obj:5f2b8c9e1a2b3c4d5e6f7a8b", b"obj:*", True),  # a 24-hex object ID
        (b"run:01ARZ3NDEKTSV4RRFFQ69G5FAV", b"run:*", True),  # a ULID
        (b"entry:1700000000000-3", b"entry:*", True),
        (b"orders", b"orders", False),
        (b"orders:created", b"orders:created", False),
        (b"{orders}:dlq", b"{orders}:dlq", False),
        (b"word:deadbeefcafebabe", b"word:deadbeefcafebabe", False),  # hex letters only: a word
        (b"a::1", b"a::*", True),
        (b"x[1]*?:7", b"x\\[1\\]\\*\\?:*", True),
    ],
)
def test_shapes(key: bytes, pattern: bytes, varied: bool) -> None:
    assert shape_of(key) == (pattern, varied)


def test_another_delimiter() -> None:
    assert shape_of(b"tenant/42/events", check_delimiter("/")) == (b"tenant/*/events", True)
    assert shape_of(b"tenant:42:events", b"/") == (b"tenant:42:events", False)


def test_configured_families_come_first_in_order() -> None:
    rule = Grouping(parse_families('["task:1*", {"name": "tasks", "match": "task:*"}, "task:*:events"]'))
    assert rule.family_of(b"task:17:events").pattern == b"task:1*"
    assert rule.family_of(b"task:27:events").name == "tasks"  # before the third, which also matches
    assert rule.family_of(b"other:5").kind == "detected"
    assert rule.family_of(b"other").kind == "key"


def test_every_family_glob_selects_its_key_in_redis(r: redis.Redis) -> None:
    rng = random.Random(32)
    alphabet = b"ab:*?[]\\{}-0123456789\xff"
    keys = {bytes(rng.choice(alphabet) for _ in range(rng.randint(1, 12))) for _ in range(400)}
    keys |= {b"p:%d" % n for n in range(20)} | {b"{t:%d}:dlq" % n for n in range(5)}
    pipe = r.pipeline(transaction=False)
    for key in keys:
        pipe.xadd(key, {"n": "1"})
    pipe.execute()
    rule = Grouping()
    for key in sorted(keys):
        family = rule.family_of(key)
        matched = set(r.scan_iter(match=family.pattern, count=10_000, _type="stream"))
        assert key in matched, (key, family.pattern)
        if family.kind == "key":
            assert matched == {key}, (key, family.pattern)  # a key's own glob is that key only


def test_the_tally_sums_as_plain_python_does() -> None:
    rng = random.Random(7)
    facts = [
        KeyFacts(key=f"{prefix}:{n}".encode(), length=rng.randint(0, 50), groups=n % 3, pending=n % 5,
                 first_id=f"{1000 + n}-{n % 4}", last_id=f"{9000 + rng.randint(0, 99)}-0")
        for n in range(300) for prefix in ("p", "q")
    ]
    facts.append(KeyFacts(key=b"{p:3}:dlq", length=4, groups=0, pending=0, first_id=None, last_id=None))
    tally = FamilyTally(Grouping(), dlq_origin=lambda k: k[1:-5] if k.endswith(b"}:dlq") else None, top=4)
    tally.add(facts[:250])
    tally.add(facts[250:])
    rows = {row.family.pattern: row for row in tally.rows()}
    for prefix in (b"p", b"q"):
        mine = [f for f in facts if f.key.startswith(prefix + b":")]
        row = rows[prefix + b":*"]
        assert (row.keys, row.entries, row.groups, row.pending) == (
            len(mine), sum(f.length for f in mine), sum(f.groups for f in mine), sum(f.pending for f in mine))
        assert row.oldest_id == min((f.first_id for f in mine), key=lambda i: tuple(map(int, i.split("-"))))
        assert row.newest_id == max((f.last_id for f in mine), key=lambda i: tuple(map(int, i.split("-"))))
        longest = sorted(mine, key=lambda f: (-f.length, f.key))[:4]
        assert row.busiest == tuple((f.key, f.length) for f in longest)
    assert (rows[b"p:*"].dlq_depth, rows[b"p:*"].dlq_keys, rows[b"q:*"].dlq_depth) == (4, 1, 0)
    assert rows[b"{p:*}:dlq"].entries == 4


TOO_MANY = "[" + ",".join(f'"x{i}"' for i in range(201)) + "]"


@pytest.mark.parametrize("raw", ["nope", "{}", "[[]]", '[{"match": 5}]', '["a", "a"]', TOO_MANY])
def test_bad_settings_raise_family_error(raw: str) -> None:
    with pytest.raises(FamilyError, match=r"families"):
        parse_families(raw, "families")
