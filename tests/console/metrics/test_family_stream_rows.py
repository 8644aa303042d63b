"""A stream-by-stream tick's family rows, made by builtins over each family's list
(``family_ticks.stream_rows``), equal the rows of the tally they stand in for, and a plain-Python
computation, on streams with ties in length, missing IDs, DLQs feeding other families and families fed
by DLQs alone."""

from __future__ import annotations

import random

from eventbus.families import Family, FamilyTally, KeyFacts
from eventbus.text import id_order
from streams_app.metrics import family_ticks
from streams_app.redis_ops.reads.families import grouping
from streams_app.redis_ops.types import GroupInfo, StreamInfo


def _group(pending: int) -> GroupInfo:
    return GroupInfo(name=b"g", consumers=1, pending=pending, last_delivered_id="0-0", entries_read=None, lag=None)


def _streams() -> list[StreamInfo]:
    rng = random.Random(7)
    keys = [f"job:{i}".encode() for i in range(40)] + [f"task:{i}:events".encode() for i in range(12)]
    keys += [b"orders", b"orders:dlq", b"job:3:dlq", b"refunds:dlq", b"lonely"]
    out = []
    for key in keys:
        length = rng.choice([0, 3, 3, 7, 7, 7, 12])  # ties in length decide the busiest by key
        first = None if length == 0 else f"{rng.randrange(1, 50)}-{rng.randrange(0, 12)}"
        last = None if length == 0 else f"{rng.randrange(50, 99)}-{rng.randrange(0, 12)}"
        groups = tuple(_group(rng.randrange(0, 5)) for _ in range(rng.randrange(0, 3)))
        out.append(StreamInfo(key=key, length=length, first_id=first, last_id=last, last_generated_id=last,
                              entries_added=None if rng.random() < 0.2 else length + rng.randrange(0, 9),
                              max_deleted_entry_id=None, radix_tree_keys=None, groups=groups))
    rng.shuffle(out)
    return out


def test_stream_rows_equal_the_tally_and_a_plain_python_sum(db) -> None:
    streams = _streams()
    got = family_ticks.stream_rows(streams)

    rule = family_ticks._remembered()
    tally = FamilyTally(rule, dlq_origin=rule.dlq_origin, top=family_ticks.TOP)
    tally.add(KeyFacts(key=s.key, length=s.length, groups=len(s.groups), pending=s.pending, first_id=s.first_id,
                       last_id=s.last_id, entries_added=s.entries_added) for s in streams)
    assert got == tally.rows()

    # plain Python, per family the rule names (the rule itself is tested against SCAN in tests/eventbus)
    for row in got:
        members = [s for s in streams if rule.family_of(s.key) == row.family]
        assert row.keys == len(members)
        assert row.entries == sum(s.length for s in members)
        assert row.pending == sum(g.pending for s in members for g in s.groups)
        assert row.entries_added == sum(s.entries_added or 0 for s in members)
        firsts = sorted((id_order(s.first_id), s.first_id) for s in members if s.first_id)
        assert row.oldest_id == (firsts[0][1] if firsts else None)
        by_length = sorted(members, key=lambda s: (-s.length, s.key))[: family_ticks.TOP]
        assert list(row.busiest) == [(s.key, s.length) for s in by_length]
    fed = {row.family.pattern: row for row in got if row.dlq_keys}
    assert fed and any(row.keys == 0 for row in fed.values())  # refunds:dlq feeds a family with no stream


def test_the_memo_hands_out_one_family_object_per_family(db) -> None:
    """``stream_rows`` puts streams in their families by the family object's identity: the remembered
    facts of two keys of one family must share one object, or every stream is a family of its own until
    the rows are merged by value (the same rows, at several times the cost)."""
    rule = family_ticks._remembered()
    keys = [f"job:{i}".encode() for i in range(5)] + [f"job:{i}:dlq".encode() for i in range(3)]
    families = {family_ticks._key_facts(rule, key)[0] for key in keys}
    assert len(families) == len({rule.family_of(key) for key in keys}) == 2
    assert len({id(family_ticks._key_facts(rule, key)[0]) for key in keys}) == 2


def test_the_memo_follows_the_family_settings(db, settings) -> None:
    """What the process remembers of a key is keyed by the settings it was worked out under."""
    streams = _streams()
    family_ticks.stream_rows(streams)  # remembered under the default settings
    settings.BUSCONSOLE_STREAM_FAMILIES = [Family(pattern=b"job:*", name="jobs", kind="configured")]
    settings.BUSCONSOLE_FAMILY_DELIMITER = b"."
    rule = grouping()
    got = {row.family: row.keys for row in family_ticks.stream_rows(streams) if row.keys}  # not DLQ-fed only
    want: dict[Family, int] = {}
    for s in streams:
        want[rule.family_of(s.key)] = want.get(rule.family_of(s.key), 0) + 1
    assert got == want and got[Family(pattern=b"job:*", name="jobs", kind="configured")] == sum(
        s.key.startswith(b"job:") for s in streams)
