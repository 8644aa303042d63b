"""The bulk requeue across slots as the requeue-all job runs it: packed batches, one release for every
target, and the DLQ's head dropped by XTRIM.

Whatever stays behind in a batch (an entry whose target refuses the XADD, one leased to another
mover, entries older than the batch) must stay, and nothing else: the DLQ is compared with the IDs the
test expects to stay, each target with the payloads it should hold (read back with the cluster's own
client), and the job's count with what left the DLQ.
"""

from __future__ import annotations

import time

import pytest
from redis.cluster import RedisCluster

from eventbus import moves as move_steps
from streams_app.redis_ops import actions
from tests.cluster.test_actions import dead_letters, payloads
from tests.console.services.helpers import eventbus_dead_letter

pytestmark = pytest.mark.django_db

DLQ = "orders:dlq"


def fill(rc: RedisCluster, streams: list[str]) -> list[str]:
    """One dead letter per stream named, in order (payload ``order_id`` 100 + its position)."""
    pipe = rc.pipeline()
    for i, stream in enumerate(streams):
        pipe.xadd(DLQ, eventbus_dead_letter(i, f"1-{i}", stream=stream))
    return [x.decode() for x in pipe.execute()]


def requeue_all(
    conn: str, up_to: str, *, itemize: bool, after: str | None = None, batch: int = 8
) -> tuple[int, int, list[str]]:
    """requeue_range in batches to the end: (moved as counted, itemized, failed IDs)."""
    moved = listed = 0
    failed: list[str] = []
    for _ in range(100):
        step = actions.requeue_range(conn, DLQ.encode(), up_to=up_to, after=after, batch=batch, owner="job:1",
                                     itemize=itemize)  # fmt: skip
        moved += step.moved
        listed += len(step.result.requeued)
        failed += [f.dlq_id for f in step.result.failed]
        after = step.cursor
        if after is None:
            return moved, listed, failed
    raise AssertionError("requeue_range did not finish")


def data_of(rc: RedisCluster, stream: str) -> list[tuple[bytes, bytes]]:
    return sorted(payloads(rc, stream))


@pytest.mark.parametrize("itemize", [True, False])
@pytest.mark.parametrize(
    "refused", [set(), {0}, {5}, {7, 8, 15}, {19}], ids=["none", "first", "inside", "batch-edges", "last"]
)
def test_only_the_moved_dead_letters_leave_the_dlq(on_cluster, rc, refused: set[int], itemize: bool) -> None:
    rc.set("broken", "not a stream")  # XADD to it is refused: WRONGTYPE
    streams = ["broken" if i in refused else ("orders" if i % 3 else "payments") for i in range(20)]
    assert len({rc.keyslot(DLQ), rc.keyslot("orders"), rc.keyslot("payments"), rc.keyslot("broken")}) == 4
    ids = fill(rc, streams)

    moved, listed, failed = requeue_all(on_cluster, ids[-1], itemize=itemize)

    kept = [ids[i] for i in sorted(refused)]
    assert [entry_id.decode() for entry_id, _ in rc.xrange(DLQ)] == kept
    assert sorted(failed, key=ids.index) == kept
    for stream in ("orders", "payments"):
        want = [(eventbus_dead_letter(i, "")["data"].encode(), ids[i].encode()) for i, s in enumerate(streams)
                if s == stream]  # fmt: skip
        assert data_of(rc, stream) == sorted(want)
    assert moved == 20 - len(kept) and listed == (moved if itemize else 0)
    assert rc.hlen(move_steps.lease_key(DLQ.encode())) == 0
    assert rc.hlen(move_steps.record_key(DLQ.encode(), b"orders")) == 0


def test_an_entry_another_mover_holds_stays_and_the_rest_still_leave(on_cluster, rc) -> None:
    ids = dead_letters(rc, DLQ, 12)
    expiry = int(time.time() * 1000) + 60_000
    lease = move_steps.lease_key(DLQ.encode())
    rc.hset(lease, mapping={ids[0]: f"{expiry}:request:other", ids[6]: f"{expiry}:request:other"})

    moved, _, failed = requeue_all(on_cluster, ids[-1], itemize=False)

    assert sorted(failed, key=ids.index) == [ids[0], ids[6]] and moved == 10
    assert [entry_id.decode() for entry_id, _ in rc.xrange(DLQ)] == [ids[0], ids[6]]
    assert sorted(origin.decode() for _, origin in payloads(rc, "orders")) == sorted(
        set(ids) - {ids[0], ids[6]}
    )


def test_dead_letters_older_than_the_batch_are_never_trimmed(on_cluster, rc) -> None:
    ids = dead_letters(rc, DLQ, 12)
    moved, _, failed = requeue_all(on_cluster, ids[-1], itemize=False, after=ids[3])
    assert (moved, failed) == (8, [])
    assert [entry_id.decode() for entry_id, _ in rc.xrange(DLQ)] == ids[:4]
    assert sorted(origin.decode() for _, origin in payloads(rc, "orders")) == sorted(ids[4:])


def test_big_batches_leave_no_lease_or_record_behind(on_cluster, rc) -> None:
    """Batches large enough for the lease and record hashes to be built as hash tables."""
    ids = dead_letters(rc, DLQ, 700)
    moved, _, failed = requeue_all(on_cluster, ids[-1], itemize=False, batch=300)
    assert (moved, failed, rc.xlen(DLQ)) == (700, [], 0)
    assert sorted(origin.decode() for _, origin in payloads(rc, "orders")) == sorted(ids)
    assert not rc.exists(move_steps.lease_key(DLQ.encode()), move_steps.record_key(DLQ.encode(), b"orders"))
