"""Claim, autoclaim and ack against a real Redis: who owns each pending entry afterwards, what was skipped.

Expected values come from Redis itself: XPENDING's extended form (owner and delivery count of every pending
entry) and what XREADGROUP delivered, never from the code under test. Idle times are set with
``XCLAIM ... IDLE`` rather than waited for, so no assertion depends on timing.
"""

from __future__ import annotations

import redis

from streams_app.redis_ops import actions
from tests.console.helpers import CONN
from tests.console.redis_ops.helpers import deliver, make_idle, pel

# ---------------------------------------------------------------- claim


def test_claim_moves_ownership_and_counts_a_delivery(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"n": str(i)}).decode() for i in range(3)]
    r.xgroup_create("s", "g", id="0")
    assert deliver(r, "s", "g", "c1") == ids

    result = actions.claim(CONN, b"s", b"g", ids=[ids[0], ids[1]], consumer=b"c2", min_idle_ms=0)

    assert result == actions.ClaimResult(claimed=(ids[0], ids[1]), skipped=(), deleted=())
    assert pel(r, "s", "g", "c2") == {ids[0]: ("c2", 2), ids[1]: ("c2", 2)}
    assert pel(r, "s", "g", "c1") == {ids[2]: ("c1", 1)}


def test_claim_skips_entries_that_became_active_or_are_not_pending(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"n": str(i)}).decode() for i in range(3)]
    r.xgroup_create("s", "g", id="0")
    deliver(r, "s", "g", "c1")
    make_idle(r, "s", "g", "c1", ids, 60_000)
    # ids[1]'s consumer touches it again (as a heartbeat would) after the operator's page loaded;
    # ids[2] was acked meanwhile.
    r.xclaim("s", "g", "c1", 0, [ids[1]], justid=True)
    r.xack("s", "g", ids[2])

    result = actions.claim(CONN, b"s", b"g", ids=ids, consumer=b"c2", min_idle_ms=30_000)

    assert result == actions.ClaimResult(claimed=(ids[0],), skipped=(ids[1], ids[2]), deleted=())
    assert pel(r, "s", "g") == {ids[0]: ("c2", 2), ids[1]: ("c1", 1)}


def test_of_two_racing_claims_one_wins(r: redis.Redis) -> None:
    entry_id = r.xadd("s", {"n": "1"}).decode()
    r.xgroup_create("s", "g", id="0")
    deliver(r, "s", "g", "c1")
    make_idle(r, "s", "g", "c1", [entry_id], 60_000)

    first = actions.claim(CONN, b"s", b"g", ids=[entry_id], consumer=b"a", min_idle_ms=30_000)
    second = actions.claim(CONN, b"s", b"g", ids=[entry_id], consumer=b"b", min_idle_ms=30_000)

    assert (first.claimed, second.skipped) == ((entry_id,), (entry_id,))
    assert pel(r, "s", "g") == {entry_id: ("a", 2)}


def test_claim_reports_pending_entries_whose_message_was_deleted(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"n": str(i)}).decode() for i in range(4)]
    r.xgroup_create("s", "g", id="0")
    deliver(r, "s", "g", "c1")
    r.xdel("s", ids[1], ids[2])

    result = actions.claim(CONN, b"s", b"g", ids=[ids[0], ids[1]], consumer=b"c2", min_idle_ms=0)
    assert result == actions.ClaimResult(claimed=(ids[0],), skipped=(), deleted=(ids[1],))
    # Redis 7 drops a deleted entry from the PEL when a claim reaches it, even a guarded one...
    guarded = actions.claim(CONN, b"s", b"g", ids=[ids[2], ids[3]], consumer=b"c2", min_idle_ms=10**9)
    assert guarded == actions.ClaimResult(claimed=(), skipped=(ids[3],), deleted=(ids[2],))
    assert pel(r, "s", "g") == {ids[0]: ("c2", 2), ids[3]: ("c1", 1)}
    # ...and what is not claimed can be acked away.
    r.xdel("s", ids[3])
    assert actions.ack(CONN, b"s", b"g", ids=[ids[3]]) == 1
    assert pel(r, "s", "g") == {ids[0]: ("c2", 2)}


# ---------------------------------------------------------------- autoclaim


def test_autoclaim_sweeps_over_a_thousand_entries_in_batches(r: redis.Redis) -> None:
    pipe = r.pipeline()
    for i in range(2500):
        pipe.xadd("s", {"n": str(i)})
    ids = [x.decode() for x in pipe.execute()]
    r.xgroup_create("s", "g", id="0")
    deliver(r, "s", "g", "c1")
    deleted = ids[100:2500:250]
    r.xdel("s", *deleted)

    partial = actions.autoclaim(CONN, b"s", b"g", consumer=b"c2", min_idle_ms=0, max_batches=1)
    assert partial.next is not None
    assert 0 < len(partial.claimed) <= 1000
    rest = actions.autoclaim(CONN, b"s", b"g", consumer=b"c2", min_idle_ms=0, start=partial.next)
    assert rest.next is None

    claimed = partial.claimed + rest.claimed
    expected = [i for i in ids if i not in deleted]
    assert sorted(claimed) == sorted(expected) and len(set(claimed)) == len(expected)
    assert sorted(partial.deleted + rest.deleted) == sorted(deleted)
    pending = pel(r, "s", "g")
    assert pending == dict.fromkeys(expected, ("c2", 2))


def test_autoclaim_takes_only_entries_idle_long_enough(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"n": str(i)}).decode() for i in range(10)]
    r.xgroup_create("s", "g", id="0")
    deliver(r, "s", "g", "c1")
    make_idle(r, "s", "g", "c1", ids[::2], 60_000)

    result = actions.autoclaim(CONN, b"s", b"g", consumer=b"c2", min_idle_ms=30_000, count=3)

    assert result == actions.ClaimResult(claimed=tuple(ids[::2]), skipped=(), deleted=(), next=None)
    assert pel(r, "s", "g", "c1") == dict.fromkeys(ids[1::2], ("c1", 1))


# ---------------------------------------------------------------- ack


def test_ack_returns_what_redis_counted(r: redis.Redis) -> None:
    ids = [r.xadd("s", {"n": str(i)}).decode() for i in range(4)]
    r.xgroup_create("s", "g", id="0")
    deliver(r, "s", "g", "c1", n=3)  # ids[3] never delivered
    r.xack("s", "g", ids[0])

    assert actions.ack(CONN, b"s", b"g", ids=ids) == 2  # ids[1], ids[2]
    assert pel(r, "s", "g") == {}
    assert actions.ack(CONN, b"s", b"g", ids=ids) == 0
