"""The requeue-all job across slots, its steps pipelined: SIGKILLed at any step, then resumed, every dead
letter ends in its stream exactly once and leaves the DLQ.

The DLQ ``{orders}:dlq`` holds dead letters for ``orders`` (its own slot: moved inside the batch script)
and for two streams in other slots on the two other nodes (leased, added there, released, forgotten).
A real process runs the job as a worker does (``jobs.job_run``) and SIGKILLs itself at the k-th call it
makes to the cluster, just before sending it or just after its reply came back: every state between two
steps is reached that way, whatever the steps are. Several rounds are killed at random calls, each
resuming the job the last one left, then a last round finishes it. What each stream holds is read back
with the cluster's own client and compared with the IDs the test wrote; the job's count with the number
written.
"""

from __future__ import annotations

import os
import random
import signal
import subprocess
import sys
from collections import Counter

import pytest
from redis.cluster import ClusterPipeline, RedisCluster

from eventbus import moves as move_steps
from eventbus.scripts import source as bus_source
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from streams_app.redis_ops import actions
from streams_app.redis_ops.actions._common import _source
from tests.cluster.test_jobs import field_values
from tests.console.celery_procs import celery_env
from tests.console.services.helpers import eventbus_dead_letter
from tests.servers import REPO

pytestmark = pytest.mark.django_db(transaction=True)

DLQ = "{orders}:dlq"

# A worker's job run, in a process of its own, killed by itself at call ``sys.argv[2]`` (0: never) to the
# cluster ("before" sending it or "after" its reply). A killed run's job lock lasts a second: wait it out.
WORKER = """
import os, signal, sys, time
import django
django.setup()
kill_at, side = int(sys.argv[2]), sys.argv[3]
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
from streams_app.jobs import runner
for _ in range(200):
    try:
        runner.job_run(int(sys.argv[1]))
        break
    except runner.JobBusy:
        time.sleep(0.05)
"""


def targets(rc: RedisCluster) -> list[str]:
    """``orders`` (the DLQ's slot) and a stream on each of the two other nodes."""
    home = rc.get_node_from_key(DLQ).name
    nodes = {home: "orders"}
    for n in range(200):
        name = f"target-{n}"
        nodes.setdefault(rc.get_node_from_key(name).name, name)
    assert rc.keyslot("orders") == rc.keyslot(DLQ) and len(nodes) == 3
    return list(nodes.values())


def fill(rc: RedisCluster, streams: list[str], n: int) -> dict[str, list[str]]:
    """``n`` dead letters bound round-robin for ``streams``; stream -> the DLQ IDs it should get back."""
    pipe = rc.pipeline()
    for i in range(n):
        pipe.xadd(DLQ, eventbus_dead_letter(i, f"1-{i}", stream=streams[i % len(streams)]))
    want: dict[str, list[str]] = {s: [] for s in streams}
    for i, raw in enumerate(pipe.execute()):
        want[streams[i % len(streams)]].append(raw.decode())
    return want


def new_job(conn: str, up_to: str, batch: int) -> Job:
    parameters = {"key": DLQ.encode().hex(), "key_text": DLQ, "up_to": up_to, "batch": batch}
    return Job.objects.create(kind=jobs.KIND_REQUEUE_ALL, connection=conn, parameters=parameters)


def work(cluster, job: Job, *, kill_at: int = 0, side: str = "") -> int:
    env = celery_env(BUSCONSOLE_JOB_LOCK_S="1", BUS_REDIS_URLS=f"default={cluster.url()}", PYTHONPATH=str(REPO))
    done = subprocess.run([sys.executable, "-c", WORKER, str(job.pk), str(kill_at), side], cwd=REPO, env=env,
                          capture_output=True, text=True, timeout=120)  # fmt: skip
    assert done.returncode in (0, -signal.SIGKILL), done.stderr[-3000:]
    return done.returncode


def assert_each_once(rc: RedisCluster, want: dict[str, list[str]]) -> None:
    assert rc.xlen(DLQ) == 0
    for stream, ids in want.items():
        markers = Counter(m.decode() for m in field_values(rc, stream, b"_requeued_from"))
        assert sorted(markers) == sorted(ids), stream  # every dead letter of the stream, none of another
        assert set(markers.values()) == {1}, [m for m, c in markers.items() if c > 1]


def test_a_worker_killed_at_random_steps_then_resumed_moves_each_dead_letter_once(on_cluster, rc, cluster) -> None:
    want = fill(rc, targets(rc), 2000)
    ids = sorted((i for group in want.values() for i in group), key=lambda i: tuple(map(int, i.split("-"))))
    job = new_job(on_cluster, ids[-1], batch=20)  # 100 batches: five rounds of at most 16 calls cannot finish
    rng = random.Random(os.environ.get("PYTEST_XDIST_WORKER", "") + "kills")
    kills = [(rng.randint(5, 16), side) for side in ("before", "after", "before", "after", "after")]
    for kill_at, side in kills:
        assert work(cluster, job, kill_at=kill_at, side=side) == -signal.SIGKILL, (kill_at, side)
    left = rc.xlen(DLQ)
    assert 0 < left < len(ids), f"the kills {kills} must fall in the middle of the job"

    assert work(cluster, job) == 0
    job.refresh_from_db()
    assert job.state == Job.State.DONE, job.error
    assert_each_once(rc, want)
    assert (job.done, job.total) == (len(ids), len(ids)), kills


def test_each_batch_across_slots_costs_one_round_trip(on_cluster, rc, monkeypatch) -> None:
    """The release, forget and add of consecutive batches travel together: one pipeline (one write to
    each node) per batch read, where the steps one after another take four calls. (The rule scripts go
    ahead on a connection of their own, not through these calls.)"""
    want = fill(rc, targets(rc), 400)
    last = max((i for group in want.values() for i in group), key=lambda i: tuple(map(int, i.split("-"))))
    monkeypatch.setattr(jobs, "SAVE_EVERY_S", 1e12)  # only the first and last saves: no drain in between
    calls = Counter[str]()
    real_command, real_execute = RedisCluster.execute_command, ClusterPipeline.execute

    def moving(names: list[object]) -> bool:
        return any(str(name).upper() in ("EVALSHA", "HDEL", "XDEL", "XTRIM") for name in names)

    def command(self, *args, **kwargs):
        calls["move"] += moving([args[0]])
        return real_command(self, *args, **kwargs)

    def execute(self, *args, **kwargs):  # the reads' TYPE-guarded pipelines (XINFO) are no step of a move
        calls["move"] += moving([c.args[0] for c in self._execution_strategy.command_queue])
        return real_execute(self, *args, **kwargs)

    primaries = [rc.get_redis_connection(node) for node in rc.get_primaries()]
    for node in primaries:  # the scripts known (no NOSCRIPT reload counted, whichever test ran first)
        node.script_load(_source("requeue_rule"))
        node.script_load(bus_source("move_add"))
        node.config_resetstat()
    monkeypatch.setattr(RedisCluster, "execute_command", command)
    monkeypatch.setattr(ClusterPipeline, "execute", execute)
    job = jobs.job_run(new_job(on_cluster, last, batch=20).pk)
    monkeypatch.undo()
    # redis-py finds a script's node by asking the server (COMMAND GETKEYS, a round trip before the
    # pipeline is written) unless told: none of those, by Redis's own count
    assert sum(node.info("commandstats").get("cmdstat_command|getkeys", {}).get("calls", 0)
               for node in primaries) == 0  # fmt: skip

    assert job is not None and job.state == Job.State.DONE and job.done == 400, job and job.error
    assert_each_once(rc, want)
    assert not rc.exists(move_steps.lease_key(DLQ.encode()))  # nothing killed: every lease released
    reads = 400 // 20 + 1  # the last one reads nothing
    assert calls["move"] <= reads + 3, calls  # and the batches in flight at the end: release, forget


def order(entry_id: str) -> tuple[int, ...]:
    return tuple(map(int, entry_id.split("-")))


def newest(want: dict[str, list[str]]) -> str:
    return max((i for group in want.values() for i in group), key=order)


def test_a_drained_run_leaves_no_lease_and_no_early_copy(on_cluster, rc) -> None:
    """What a job saves after: every entry up to the cursor moved once, every later one still in the DLQ."""
    want = fill(rc, targets(rc), 200)
    run = actions.RequeueRun(on_cluster, DLQ.encode(), up_to=newest(want), batch=10, owner="job:drain")
    moved = sum(run.step().moved for _ in range(5))
    moved += run.drain().moved
    assert not rc.exists(move_steps.lease_key(DLQ.encode()))
    left = {entry_id.decode() for entry_id, _ in rc.xrange(DLQ)}
    copied = {m.decode() for stream in want for m in field_values(rc, stream, b"_requeued_from")}
    # six batches read (the five steps' and the one sent ahead of the fifth), all settled
    assert run.cursor is not None and moved == len(copied) == 60
    assert copied == {i for group in want.values() for i in group} - left
    cursor = order(run.cursor)
    assert all(order(i) <= cursor for i in copied) and all(order(i) > cursor for i in left)


def test_servers_that_lost_their_scripts_load_them_again_mid_run(on_cluster, rc) -> None:
    want = fill(rc, targets(rc), 100)
    run = actions.RequeueRun(on_cluster, DLQ.encode(), up_to=newest(want), batch=10, owner="job:flushed")
    moved = run.step().moved + run.step().moved  # a batch added, the next leased
    for node in rc.get_primaries():
        rc.get_redis_connection(node).script_flush()
    while True:
        step = run.step()
        moved += step.moved
        if step.cursor is None:
            break
    assert_each_once(rc, want)
    assert moved == 100
