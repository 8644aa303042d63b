"""``python -m eventbus requeue`` on a real 3-primary Redis Cluster: every dead letter back to its stream,
whatever node that stream lives on, each exactly once.

What a target should hold is computed here from the dead letters as written (their fields without the
DLQ's bookkeeping and the retry counter, plus ``_requeued_from``); what it holds is read back with the
raw cluster client (XLEN, XRANGE), and which slot and node each key is in is asked of the cluster. The
kill of a run between its steps is a real SIGKILL of a real ``python -m eventbus`` process, sent by
itself at the moment it would delete the dead letters it has just copied.
"""

from __future__ import annotations

import json
import os
import signal
import subprocess
import sys

import pytest
from redis.cluster import RedisCluster

from eventbus.__main__ import main
from tests.console.redis_ops.helpers import EVENTBUS_FIELDS
from tests.servers import REPO

BUSY = "Another requeue is moving this entry right now"


def run(capsys: pytest.CaptureFixture[str], url: str, *argv: str) -> tuple[int, dict]:
    status = main(["requeue", "--url", url, "--json", *argv])
    return status, json.loads(capsys.readouterr().out)


def cli(url: str, *argv: str, kill_at_release: bool = False) -> subprocess.CompletedProcess[str]:
    """``python -m eventbus requeue`` in its own process; ``kill_at_release`` makes it SIGKILL itself
    right after adding its copies, before deleting the dead letters (the moment a crash costs most):
    when it builds the release of its first batch (``--all``, pipelined) or makes it (``--ids``)."""
    prelude = "import os, signal, sys\n"
    if kill_at_release:
        prelude += (
            "import eventbus.moves\n"
            "eventbus.moves.release = lambda *a, **k: os.kill(os.getpid(), signal.SIGKILL)\n"
            "eventbus.moves.queue_release = eventbus.moves.release\n"
        )
    code = prelude + "from eventbus.__main__ import main\nsys.exit(main(sys.argv[1:]))\n"
    return subprocess.run(
        [sys.executable, "-c", code, "requeue", "--url", url, "--json", *argv],
        cwd=REPO, env={**os.environ, "PYTHONPATH": str(REPO)}, capture_output=True, text=True, timeout=120,
    )  # fmt: skip


def elsewhere(rc: RedisCluster, dlq: str, count: int) -> list[str]:
    """``count`` stream names in other slots than ``dlq``, on other nodes than it where the cluster allows."""
    home = rc.get_node_from_key(dlq).name
    names = [f"target-{n}" for n in range(200)]
    far = [n for n in names if rc.get_node_from_key(n).name != home]
    assert len(far) >= count and all(rc.keyslot(n) != rc.keyslot(dlq) for n in far)
    return far[:count]


def dead_letters(
    rc: RedisCluster, dlq: str, targets: list[str], n: int, *, first: int = 0
) -> dict[str, tuple]:
    """``n`` eventbus dead letters in ``dlq``, bound round-robin for ``targets``; DLQ ID -> (target, the
    entry its target should get back, as a sorted tuple of field pairs)."""
    pipe = rc.pipeline()
    written = []
    for i in range(first, first + n):
        fields = {
            **EVENTBUS_FIELDS,
            b"data": b'{"order_id": %d}' % i,
            b"dlq_original_stream": targets[i % len(targets)].encode(),
        }
        pipe.xadd(dlq, fields)
        written.append(fields)
    out = {}
    for raw_id, fields in zip(pipe.execute(), written, strict=True):
        kept = {k: v for k, v in fields.items() if not k.startswith(b"dlq_") and k != b"_retries"}
        kept[b"_requeued_from"] = raw_id
        out[raw_id.decode()] = (fields[b"dlq_original_stream"].decode(), tuple(sorted(kept.items())))
    return out


def contents(rc: RedisCluster, key: str) -> list[tuple]:
    """Every entry of ``key`` as a sorted tuple of field pairs, read in pages."""
    out, start = [], "-"
    while True:
        page = rc.xrange(key, start, "+", count=500)
        out += [tuple(sorted(fields.items())) for _, fields in page]
        if len(page) < 500:
            return out
        start = "(" + page[-1][0].decode()


def assert_moved_once(rc: RedisCluster, expected: dict[str, tuple]) -> None:
    """Each target holds exactly its dead letters' entries, each once (XLEN and XRANGE agree)."""
    by_target: dict[str, list[tuple]] = {}
    for target, entry in expected.values():
        by_target.setdefault(target, []).append(entry)
    for target, entries in by_target.items():
        assert rc.xlen(target) == len(entries), target
        assert sorted(contents(rc, target)) == sorted(entries), target


def console_keys(rc: RedisCluster) -> list[bytes]:
    """Leases and records left on any primary (the names the move protocol gives them)."""
    return list(rc.scan_iter(match="*busconsole:requeue*"))


def test_ids_bound_for_other_slots_are_requeued_once(capsys, cluster, rc: RedisCluster) -> None:
    dlq = "{orders}:dlq"
    targets = ["orders", *elsewhere(rc, dlq, 2)]  # one in the DLQ's slot, two on other nodes
    assert rc.keyslot("orders") == rc.keyslot(dlq)
    written = dead_letters(rc, dlq, targets, 30)
    chosen = list(written)[::2]
    status, doc = run(capsys, cluster.url(), dlq, "--ids", *chosen, "--batch", "4")
    assert status == 0 and doc["missing"] == [] and doc["failed"] == []
    assert [r["dlq_id"] for r in doc["requeued"]] == chosen  # in the DLQ's order
    assert {r["dlq_id"]: r["stream"] for r in doc["requeued"]} == {i: written[i][0] for i in chosen}
    for row in doc["requeued"]:  # the reported new ID is the copy's
        [(new_id, fields)] = rc.xrange(row["stream"], row["new_id"], row["new_id"])
        assert tuple(sorted(fields.items())) == written[row["dlq_id"]][1]
    assert_moved_once(rc, {i: written[i] for i in chosen})
    left = [i.decode() for i, _ in rc.xrange(dlq)]
    assert left == [i for i in written if i not in chosen] and rc.xlen(dlq) == 15
    assert console_keys(rc) == []
    # a second run finds nothing to do, and adds nothing
    status, doc = run(capsys, cluster.url(), dlq, "--ids", *chosen)
    assert status == 1 and doc["requeued"] == [] and doc["failed"] == [] and doc["missing"] == chosen
    assert_moved_once(rc, {i: written[i] for i in chosen})


def test_all_up_to_from_the_pre_cluster_naming_moves_every_dead_letter_once(capsys, cluster, rc) -> None:
    dlq = "orders:dlq"  # the pre-cluster name: not in the slot of ``orders``
    assert rc.keyslot(dlq) != rc.keyslot("orders")
    targets = ["orders", *elsewhere(rc, dlq, 2)]
    written = dead_letters(rc, dlq, targets, 250)
    up_to = list(written)[-1]
    late = dead_letters(rc, dlq, targets, 3, first=250)  # after the operator looked: never touched
    status, doc = run(capsys, cluster.url(), dlq, "--all", "--up-to", up_to, "--batch", "64")
    assert status == 0 and doc["missing"] == [] and doc["failed"] == []
    assert [r["dlq_id"] for r in doc["requeued"]] == list(written)
    assert_moved_once(rc, written)
    assert [i.decode() for i, _ in rc.xrange(dlq)] == list(late) and rc.xlen(dlq) == 3
    assert console_keys(rc) == []
    status, doc = run(capsys, cluster.url(), dlq, "--all", "--up-to", up_to)
    assert status == 1 and doc == {"requeued": [], "missing": [], "failed": []}
    assert_moved_once(rc, written)


def test_a_run_killed_between_adding_and_deleting_is_finished_by_the_next_with_nothing_doubled(
    cluster, rc: RedisCluster
) -> None:
    dlq = "orders:dlq"
    first, second = elsewhere(rc, dlq, 2)
    written = dead_letters(rc, dlq, [first, second], 40)
    up_to = list(written)[-1]
    bound = {t: [i for i, (target, _) in written.items() if target == t] for t in (first, second)}
    killed = cli(cluster.url(), dlq, "--all", "--up-to", up_to, kill_at_release=True)
    assert killed.returncode == -signal.SIGKILL, killed.stderr
    # what the kill left: both targets' copies made (one pipeline added to both), every dead letter
    # still in the DLQ, leased
    assert (rc.xlen(first), rc.xlen(second), rc.xlen(dlq)) == (20, 20, 40)
    [lease] = [k for k in console_keys(rc) if b"requeue-lease" in k]
    assert sorted(i.decode() for i in rc.hkeys(lease)) == sorted(written)
    # while the dead run's leases hold, another run leaves those entries alone and adds nothing for them
    busy = cli(cluster.url(), dlq, "--ids", *bound[first], *bound[second][:5])
    doc = json.loads(busy.stdout)
    held = sorted(bound[first] + bound[second][:5])
    assert busy.returncode == 1 and sorted(f["dlq_id"] for f in doc["failed"]) == held
    assert all(f["reason"].startswith(BUSY) for f in doc["failed"]) and doc["requeued"] == []
    busy = cli(cluster.url(), dlq, "--all", "--up-to", up_to)
    doc = json.loads(busy.stdout)
    assert busy.returncode == 1 and [f["dlq_id"] for f in doc["failed"]] == list(written)
    assert (rc.xlen(first), rc.xlen(second)) == (20, 20)
    # the leases expire (Redis drops the hash two lease lengths after its last write): the next run
    # finishes the dead one's work and finds its copies already made
    rc.delete(lease)
    resumed = cli(cluster.url(), dlq, "--all", "--up-to", up_to)
    doc = json.loads(resumed.stdout)
    assert resumed.returncode == 0 and [r["dlq_id"] for r in doc["requeued"]] == list(written)
    assert_moved_once(rc, written)
    assert rc.xlen(dlq) == 0 and console_keys(rc) == []


def test_two_concurrent_runs_across_slots_make_one_copy_each(cluster, rc: RedisCluster) -> None:
    dlq = "orders:dlq"
    written = dead_letters(rc, dlq, ["orders", *elsewhere(rc, dlq, 1)], 200)
    args = [sys.executable, "-m", "eventbus", "requeue", "--url", cluster.url(), "--json", dlq,
            "--batch", "7", "--ids", *written]  # fmt: skip
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    procs = [subprocess.Popen(args, cwd=REPO, env=env, stdout=subprocess.PIPE, text=True) for _ in range(2)]
    docs = [json.loads(p.communicate(timeout=120)[0]) for p in procs]
    assert_moved_once(rc, written)
    assert rc.xlen(dlq) == 0
    moved = [r["dlq_id"] for doc in docs for r in doc["requeued"]]
    assert sorted(moved) == sorted(written)  # each reported moved by exactly one of them
    for doc in docs:
        assert all(f["reason"].startswith(BUSY) for f in doc["failed"])
