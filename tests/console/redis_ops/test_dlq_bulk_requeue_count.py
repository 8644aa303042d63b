"""The requeue-all job's way of calling ``requeue_range``: counted, not itemized, and the moved head of
the DLQ dropped by XTRIM rather than XDEL.

What must hold whatever the removal: exactly the moved dead letters leave the DLQ, the ones a target
refused stay (older than the batch, inside it, or after it), each moved one has one copy, and the
count the job adds up equals what left the DLQ. Expected values come from Redis (raw XRANGE) and a
plain-Python account of which targets refuse.
"""

from __future__ import annotations

from collections import Counter

import pytest
import redis

from streams_app.redis_ops import actions
from tests.console.helpers import CONN
from tests.console.redis_ops.helpers import EVENTBUS_FIELDS, raw_xrange, stream_fields

UP_TO = "18446744073709551615-0"


def _fill(r: redis.Redis, targets: list[bytes]) -> list[str]:
    """One eventbus dead letter per target, in order; returns their DLQ IDs."""
    pipe = r.pipeline()
    for i, target in enumerate(targets):
        pipe.xadd("orders:dlq", {**EVENTBUS_FIELDS, b"dlq_original_stream": target, b"n": str(i).encode()})
    return [x.decode() for x in pipe.execute()]


def _run(*, batch: int, itemize: bool) -> tuple[int, int, list[str]]:
    """requeue_range to the end: (moved as counted, itemized requeued, failed DLQ IDs)."""
    moved = listed = 0
    failed: list[str] = []
    after = None
    for _ in range(1000):
        step = actions.requeue_range(
            CONN, b"orders:dlq", up_to=UP_TO, after=after, batch=batch, itemize=itemize
        )
        moved += step.moved
        listed += len(step.result.requeued)
        failed += [f.dlq_id for f in step.result.failed]
        assert step.result.missing == ()
        after = step.cursor
        if after is None:
            return moved, listed, failed
    raise AssertionError("requeue_range did not finish")


@pytest.mark.parametrize("itemize", [True, False])
@pytest.mark.parametrize(
    "refused",
    [
        pytest.param(set(), id="none"),
        pytest.param({0}, id="first"),
        pytest.param({5}, id="inside-a-batch"),
        pytest.param({7, 8, 15}, id="batch-edges"),
        pytest.param({19}, id="last"),
    ],
)
def test_exactly_the_moved_dead_letters_leave_the_dlq(
    r: redis.Redis, refused: set[int], itemize: bool
) -> None:
    r.set("broken", "not a stream")  # XADD to it is refused: WRONGTYPE
    targets = [b"broken" if i in refused else b"orders" for i in range(20)]
    ids = _fill(r, targets)

    moved, listed, failed = _run(batch=8, itemize=itemize)

    kept = [ids[i] for i in sorted(refused)]
    assert [entry_id.decode() for entry_id, _ in raw_xrange(r, "orders:dlq")] == kept
    assert sorted(failed, key=ids.index) == kept
    origins = Counter(dict(fields)[b"_requeued_from"].decode() for fields in stream_fields(r, "orders"))
    assert sorted(origins) == sorted(set(ids) - set(kept)) and set(origins.values()) <= {1}
    assert moved == len(ids) - len(kept)
    assert listed == (moved if itemize else 0)


def test_a_batch_after_older_dead_letters_leaves_them(r: redis.Redis) -> None:
    """Entries older than the batch (refused before, or outside the range asked for) are never trimmed."""
    r.set("broken", "not a stream")
    ids = _fill(r, [b"broken", b"orders", b"orders", b"orders", b"orders"])
    step = actions.requeue_range(CONN, b"orders:dlq", up_to=UP_TO, after=ids[1], batch=10, itemize=False)
    assert step.moved == 3 and step.cursor is None
    assert [entry_id.decode() for entry_id, _ in raw_xrange(r, "orders:dlq")] == ids[:2]


def test_the_count_matches_the_itemized_run(r: redis.Redis) -> None:
    ids = _fill(r, [b"orders", b"payments"] * 30)
    moved, listed, failed = _run(batch=7, itemize=False)
    assert (moved, listed, failed) == (60, 0, [])
    assert r.xlen("orders:dlq") == 0
    assert r.xlen("orders") + r.xlen("payments") == len(ids)
