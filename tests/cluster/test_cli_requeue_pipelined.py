"""``python -m eventbus requeue --all`` across slots, its batches' steps pipelined (eventbus/requeue_run.py):
one call to the cluster per batch read, and every dead letter in its stream exactly once whatever call a
SIGKILL interrupts.

A real ``python -m eventbus`` process SIGKILLs itself at the k-th call it makes to the cluster, just
before sending it or just after its reply came back; the leases a killed run leaves hold for a minute,
so the test drops the lease hash as their expiry would before the next run. What each stream holds is
read back with the cluster's own client and compared with the IDs the test wrote.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import Counter

from redis.cluster import ClusterPipeline, RedisCluster

from eventbus import moves
from eventbus.__main__ import main
from eventbus.scripts import source
from tests.cluster.test_cli_requeue import console_keys, dead_letters, elsewhere
from tests.cluster.test_jobs import field_values
from tests.servers import REPO

DLQ = "orders:dlq"  # the pre-cluster naming: ``orders`` is in another slot

# The command line in a process of its own, killed by itself at call ``sys.argv[1]`` (0: never) to the
# cluster, "before" sending it or "after" its reply (``sys.argv[2]``).
CLI = """
import os, signal, sys
kill_at, side = int(sys.argv[1]), sys.argv[2]
if kill_at:
    from redis.cluster import ClusterPipeline, RedisCluster
    calls = [0]
    def counted(real):
        def call(self, *args, **kwargs):
            calls[0] += 1
            if calls[0] == kill_at and side == "before":
                os.kill(os.getpid(), signal.SIGKILL)
            reply = real(self, *args, **kwargs)
            if calls[0] == kill_at:
                os.kill(os.getpid(), signal.SIGKILL)
            return reply
        return call
    RedisCluster.execute_command = counted(RedisCluster.execute_command)
    ClusterPipeline.execute = counted(ClusterPipeline.execute)
from eventbus.__main__ import main
sys.exit(main(sys.argv[3:]))
"""


def order(entry_id: str) -> tuple[int, ...]:
    return tuple(map(int, entry_id.split("-")))


def assert_each_once(rc: RedisCluster, written: dict[str, tuple]) -> None:
    """The DLQ is empty and each stream holds one copy of each of its dead letters, no other."""
    assert rc.xlen(DLQ) == 0
    for stream in {target for target, _ in written.values()}:
        markers = Counter(m.decode() for m in field_values(rc, stream, b"_requeued_from"))
        assert sorted(markers) == sorted(i for i, (t, _) in written.items() if t == stream), stream
        assert set(markers.values()) == {1}, [m for m, c in markers.items() if c > 1]


def test_each_batch_read_costs_one_call_to_the_cluster(capsys, cluster, rc: RedisCluster, monkeypatch) -> None:
    """Reading a batch, leasing, adding, releasing and forgetting the batches before it travel together,
    where one batch after another took a call per step and target (and one to read)."""
    written = dead_letters(rc, DLQ, ["orders", *elsewhere(rc, DLQ, 2)], 300)
    for name in ("requeue", "move_lease", "move_add"):  # known to every primary: no NOSCRIPT reload to count
        rc.script_load(source(name))
    calls = Counter[str]()
    real_command, real_execute = RedisCluster.execute_command, ClusterPipeline.execute

    def command(self, *args, **kwargs):
        calls["calls"] += 1
        return real_command(self, *args, **kwargs)

    def execute(self, *args, **kwargs):
        calls["calls"] += 1
        return real_execute(self, *args, **kwargs)

    monkeypatch.setattr(RedisCluster, "execute_command", command)
    monkeypatch.setattr(ClusterPipeline, "execute", execute)
    status = main(["requeue", "--url", cluster.url(), DLQ, "--all", "--up-to", max(written, key=order),
                   "--batch", "20"])  # fmt: skip
    monkeypatch.undo()

    assert status == 0, capsys.readouterr()
    assert_each_once(rc, written)
    assert console_keys(rc) == []
    reads = 300 // 20 + 1  # the last one reads nothing
    # and the batches in flight after the last read (lease, add, release, forget), and the command's own
    # checks before it starts (the key's type)
    assert calls["calls"] <= reads + 4 + 2, calls


def test_a_run_killed_at_random_calls_then_run_again_moves_each_dead_letter_once(cluster, rc: RedisCluster) -> None:
    written = dead_letters(rc, DLQ, ["orders", *elsewhere(rc, DLQ, 2)], 600)
    argv = ["requeue", "--url", cluster.url(), DLQ, "--all", "--up-to", max(written, key=order), "--batch", "20"]
    rng = random.Random(os.environ.get("PYTEST_XDIST_WORKER", "") + "cli-kills")
    kills = [(rng.randint(2, 12), side) for side in ("before", "after", "after", "before", "after")]
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    for kill_at, side in kills:
        done = subprocess.run([sys.executable, "-c", CLI, str(kill_at), side, *argv], cwd=REPO, env=env,
                              capture_output=True, text=True, timeout=120)  # fmt: skip
        assert done.returncode == -signal.SIGKILL, (kill_at, side, done.stderr[-2000:])
        rc.delete(moves.lease_key(DLQ.encode()))  # what the leases' expiry does a minute later
    assert 0 < rc.xlen(DLQ) < len(written), f"the kills {kills} must fall in the middle of the run"

    done = subprocess.run([sys.executable, "-c", CLI, "0", "", *argv], cwd=REPO, env=env, capture_output=True,
                          text=True, timeout=120)  # fmt: skip
    assert done.returncode == 0, done.stdout[-2000:] + done.stderr[-2000:]
    assert_each_once(rc, written)
    assert console_keys(rc) == [] or all(b"requeued:" in k for k in console_keys(rc))  # records expire
