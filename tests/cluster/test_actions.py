"""Requeue and replay on a real Redis Cluster: within one slot and across slots, every entry exactly once.

A DLQ named the old way (``orders:dlq``) hashes to another slot (and here another node) than its
stream; the event bus's new name (``{orders}:dlq``) shares the stream's slot. Each test checks with
the cluster's own ``CLUSTER KEYSLOT`` (``rc.keyslot``) which case it is in, then reads the target
back with ``rc`` and compares the set of payloads with the one it wrote: every dead letter once,
none lost, none doubled, the DLQ empty. The kill of a mover between its steps is played by making
its release step fail (an exception, as a dying process would stop there); the real worker kills
are in ``test_jobs.py``.
"""

from __future__ import annotations

import json
import threading

import pytest
from redis.cluster import RedisCluster

from eventbus import moves as move_steps
from eventbus.conventions import dlq_candidates
from eventbus.moves import BUSY, lease_key, record_key
from streams_app import services
from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.redis_ops import actions, conventions
from tests.console.services.helpers import eventbus_dead_letter
from tests.polling import wait_for

pytestmark = pytest.mark.django_db


def dead_letters(rc: RedisCluster, dlq: str, n: int, *, stream: str = "orders") -> list[str]:
    pipe = rc.pipeline()
    for i in range(n):
        pipe.xadd(dlq, eventbus_dead_letter(i, f"1-{i}", stream=stream))
    return [x.decode() for x in pipe.execute()]


def payloads(rc: RedisCluster, key: str) -> list[tuple[bytes, bytes]]:
    """(data, _requeued_from) of every entry of ``key``, read in pages."""
    out, start = [], "-"
    while True:
        page = rc.xrange(key, start, "+", count=500)
        out += [(fields[b"data"], fields.get(b"_requeued_from")) for _, fields in page]
        if len(page) < 500:
            return out
        start = "(" + page[-1][0].decode()


def expected(ids: list[str]) -> set[tuple[bytes, bytes]]:
    return {(json.dumps({"order_id": 100 + i}).encode(), entry_id.encode()) for i, entry_id in enumerate(ids)}


def run_job(job: Job) -> Job:
    """Run a queued job in this process, as a worker would (the test has no worker)."""
    jobs.job_run(job.pk)
    job.refresh_from_db()
    return job


CASES = {"same slot": "{orders}:dlq", "across slots": "orders:dlq"}


@pytest.mark.parametrize("dlq", CASES.values(), ids=CASES.keys())
def test_requeue_selected_moves_each_entry_once(on_cluster, rc, operator, dlq):
    assert (rc.keyslot(dlq) == rc.keyslot("orders")) == dlq.startswith("{")
    ids = dead_letters(rc, dlq, 40)
    chosen = ids[::3]
    result = services.dlq_requeue(user=operator, conn=on_cluster, key=dlq.encode(), ids=chosen)
    assert sorted(r.dlq_id for r in result.requeued) == sorted(chosen)
    assert {r.stream for r in result.requeued} == {b"orders"}
    rows = payloads(rc, "orders")
    assert len(rows) == len(chosen) and set(rows) == {p for p in expected(ids) if p[1].decode() in chosen}
    assert rc.xlen(dlq) == 40 - len(chosen)
    # pressed again (a second operator on a stale page): nothing more
    again = services.dlq_requeue(user=operator, conn=on_cluster, key=dlq.encode(), ids=chosen)
    assert (again.requeued, sorted(again.missing)) == ((), sorted(chosen))
    assert rc.xlen("orders") == len(chosen)
    row = AuditEvent.objects.filter(action="dlq.requeue").order_by("pk").first()
    assert (row.outcome, row.affected) == ("ok", len(chosen))


@pytest.mark.parametrize("dlq", CASES.values(), ids=CASES.keys())
def test_requeue_all_moves_each_entry_once(on_cluster, rc, operator, dlq):
    ids = dead_letters(rc, dlq, 250)
    job = services.dlq_requeue_all(user=operator, conn=on_cluster, key=dlq.encode(), up_to=ids[-1], batch=64)
    late = dead_letters(rc, dlq, 1)  # after the operator looked: never touched
    done = run_job(job)
    assert (done.state, done.done, done.total) == ("done", 250, 250), done.error
    assert set(payloads(rc, "orders")) == expected(ids) and rc.xlen("orders") == 250
    assert [e[0].decode() for e in rc.xrange(dlq)] == late
    # nothing of the console's own is left behind: no lease, no record
    assert not rc.exists(lease_key(dlq.encode()), record_key(dlq.encode(), b"orders"))


def test_entries_bound_for_several_streams_each_go_to_their_own(on_cluster, rc, operator):
    """One DLQ whose entries name streams in its slot and in others: each is moved its own way."""
    dlq = "{orders}:dlq"
    home = dead_letters(rc, dlq, 5, stream="orders")
    away = dead_letters(rc, dlq, 5, stream="payments")
    assert rc.keyslot("payments") != rc.keyslot(dlq)
    job = services.dlq_requeue_all(user=operator, conn=on_cluster, key=dlq.encode(), up_to=away[-1])
    assert run_job(job).done == 10
    assert {p[1].decode() for p in payloads(rc, "orders")} == set(home)
    assert {p[1].decode() for p in payloads(rc, "payments")} == set(away)
    assert rc.xlen(dlq) == 0


def die(*args, **kwargs):
    """The release step of a mover that is killed right after adding its copies."""
    raise SystemExit("killed between adding and releasing")


def test_a_mover_killed_after_adding_is_finished_by_its_resume_with_nothing_doubled(
    on_cluster, rc, monkeypatch
):
    ids = dead_letters(rc, "orders:dlq", 30)
    monkeypatch.setattr(move_steps, "release", die)
    with pytest.raises(SystemExit):
        actions.requeue_range(on_cluster, b"orders:dlq", up_to=ids[-1], batch=100, owner="job:7")
    monkeypatch.undo()
    # the copies exist, the dead letters too: the state a kill leaves
    assert rc.xlen("orders") == 30 and rc.xlen("orders:dlq") == 30
    # another mover may not take them while the lease holds
    busy = actions.requeue(on_cluster, b"orders:dlq", ids=ids[:3], owner="request:x")
    assert [f.reason for f in busy.failed] == [BUSY] * 3 and rc.xlen("orders") == 30
    # the job resumed (same owner) finishes them, adding nothing
    step = actions.requeue_range(on_cluster, b"orders:dlq", up_to=ids[-1], batch=100, owner="job:7")
    assert len(step.result.requeued) == 30 and step.cursor is None
    assert rc.xlen("orders:dlq") == 0
    assert set(payloads(rc, "orders")) == expected(ids) and rc.xlen("orders") == 30


def test_a_request_killed_after_adding_is_finished_once_its_lease_expires(on_cluster, rc, monkeypatch):
    ids = dead_letters(rc, "orders:dlq", 4)
    real = move_steps.release
    monkeypatch.setattr(move_steps, "LEASE_MS", 300)
    monkeypatch.setattr(move_steps, "release", die)
    with pytest.raises(SystemExit):
        actions.requeue(on_cluster, b"orders:dlq", ids=ids)
    monkeypatch.setattr(move_steps, "release", real)
    assert rc.xlen("orders") == 4 and rc.xlen("orders:dlq") == 4

    def retried():
        result = actions.requeue(on_cluster, b"orders:dlq", ids=ids)
        return result if result.requeued else None

    result = wait_for(retried, timeout=10, what="the dead mover's lease to expire", step=0.1)
    assert sorted(r.dlq_id for r in result.requeued) == sorted(ids)
    assert set(payloads(rc, "orders")) == expected(ids) and rc.xlen("orders") == 4
    assert rc.xlen("orders:dlq") == 0


def test_two_operators_requeueing_the_same_entries_across_slots_make_one_copy_each(on_cluster, rc):
    ids = dead_letters(rc, "orders:dlq", 200)
    results, errors = [], []

    def press() -> None:
        try:
            results.append(actions.requeue(on_cluster, b"orders:dlq", ids=ids))
        except Exception as exc:  # noqa: BLE001 - reported below
            errors.append(exc)

    threads = [threading.Thread(target=press) for _ in range(3)]
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join(30)
    assert not errors
    assert set(payloads(rc, "orders")) == expected(ids) and rc.xlen("orders") == 200
    moved = [r.dlq_id for result in results for r in result.requeued]
    assert sorted(moved) == sorted(ids)  # each reported moved by exactly one of them
    # the others saw each entry gone or being moved: never an error, never a second copy
    for result in results:
        assert {f.reason for f in result.failed} <= {BUSY}
    assert rc.xlen("orders:dlq") == 0


def test_the_new_dlq_naming_is_recognised_and_feeds_back_into_its_stream():
    assert conventions.detect_dlq(b"{orders}:dlq").source_hint == b"orders"
    assert conventions.detect_dlq(b"orders:dlq").source_hint == b"orders"
    assert conventions.detect_dlq(b"{orders}.v2:dlq").source_hint == b"{orders}.v2"
    assert dlq_candidates(b"orders") == [b"{orders}:dlq", b"orders:dlq"]
    assert dlq_candidates(b"{orders}.v2") == [b"{orders}.v2:dlq"]
    entry = conventions.parse_dlq_entry(b"{orders}:dlq", "1-0", {b"type": b"x", b"_retries": b"3"})
    assert (entry.convention, entry.original_stream) == ("streams", b"orders")


# ------------------------------------------------------------------------------------- replay


REPLAYS = {"same slot": ("{clicks}", "{clicks}:copy"), "across slots": ("clicks", "clicks-copy")}


@pytest.mark.parametrize("source,target", REPLAYS.values(), ids=REPLAYS.keys())
def test_replay_copies_each_entry_once_in_order(on_cluster, rc, operator, source, target):
    assert (rc.keyslot(source) == rc.keyslot(target)) == source.startswith("{")
    pipe = rc.pipeline()
    for i in range(700):
        pipe.xadd(source, {"page": f"/p/{i % 3}", "n": str(i)})
    ids = [x.decode() for x in pipe.execute()]
    want = [ids[i] for i in range(700) if i % 3 == 1]
    job = services.stream_replay(user=operator, conn=on_cluster, key=source.encode(), start="-", end="+",
                                 target=target.encode(), match={b"page": b"/p/1"}, batch=50)
    done = run_job(job)
    assert (done.state, done.done, done.total) == ("done", len(want), len(want)), done.error
    assert [f[b"_replayed_from"].decode() for _, f in rc.xrange(target)] == want
    assert AuditEvent.objects.get(action="replay.finished").affected == len(want)


def test_a_replay_across_slots_resumed_from_an_older_cursor_copies_nothing_twice(on_cluster, rc):
    assert rc.keyslot("clicks") != rc.keyslot("clicks-copy")
    pipe = rc.pipeline()
    for i in range(300):
        pipe.xadd("clicks", {"n": str(i)})
    ids = [x.decode() for x in pipe.execute()]
    job_key = b"busconsole:replay-cursor:test"
    first = actions.replay_range(on_cluster, b"clicks", start=ids[0], end=ids[-1], target=b"clicks-copy",
                                 batch=100, job_key=job_key)
    assert (first.copied, first.counted, first.cursor) == (100, 100, ids[99])
    # the job lost its saved progress (killed before saving): it starts again from nothing
    cursor, counted = None, 0
    for _ in range(10):
        step = actions.replay_range(on_cluster, b"clicks", start=ids[0], end=ids[-1], target=b"clicks-copy",
                                    after=cursor, batch=100, job_key=job_key)
        cursor, counted = step.cursor, step.counted
        if cursor is None:
            break
    assert cursor is None and counted == 300
    assert [f[b"_replayed_from"].decode() for _, f in rc.xrange("clicks-copy")] == ids
    assert actions.replay_copied(on_cluster, job_key, target=b"clicks-copy") == 300
    assert actions.replay_cursor(on_cluster, job_key, target=b"clicks-copy") == ids[-1]
    # the cursor lives in the target's slot, where the script that adds the copies can move it
    placed = actions.replay.cursor_key(on_cluster, job_key, target=b"clicks-copy")
    assert rc.keyslot(placed) == rc.keyslot("clicks-copy") and rc.get(placed) == ids[-1].encode()
