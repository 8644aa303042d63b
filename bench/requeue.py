"""Benchmark: bulk DLQ requeue (docs/performance.md#goals-and-floors: >= 0.8x a bare Lua batch and >= 20x a per-entry loop, same
run; cross-slot on a cluster >= 0.8x same-slot).

Run ``.venv/bin/python bench/requeue.py [--entries 40000] [--batch 1000] [--cluster yes|no|only]``.
It starts a private redis-server, fills a DLQ with eventbus-convention dead letters (pipelined) and
moves them back to their stream, refilling the DLQ before each way, in the same run:

1. the job machinery (the figure): a ``dlq.requeue_all`` Job row run synchronously by
   ``streams_app.jobs.runner.job_run``, which calls ``actions.requeue_range`` per batch and also saves
   progress to the database, renews its lock and broadcasts after every batch (what a Celery worker does);
   ``requeue_range`` alone in a loop is printed beside it (the access layer without the job);
2. the bare Lua batch (the floor it must stay near): one inline script per batch that reads the batch,
   drops the DLQ's fields, adds ``_requeued_from``, XADDs to the one known target and XDELs, with no
   convention, no target per entry, no crash safety beyond its own atomicity: the least a batch can cost;
3. the per-entry loop (the floor it must beat): pages of 1,000 read by XRANGE, then per entry one XADD
   and one XDEL, a round trip each, with the fields already in hand planned by the same Python
   (``conventions.requeue_plan``); run on a quarter of the entries (a rate does not depend on how many).
   It re-reads nothing: a loop that checked each entry again (XRANGE id id) before moving it would be
   slower and flatter the ratio.

Then, when ``redis-server`` and ``redis-cli`` are on the PATH and ``--cluster no`` is not given, a private
3-primary Redis Cluster (made as tests/cluster makes it, removed at the end): the same dead letters
requeued by the job to ``orders`` from ``{orders}:dlq`` (the event bus's naming: the same slot, one Lua
call per batch) and from ``orders:dlq`` (the pre-cluster naming: another slot on another node, moved in
steps by :mod:`eventbus.moves`, the steps of consecutive batches pipelined by
``streams_app.redis_ops.actions.requeue_run``: one round trip per batch, both nodes at work in it),
alternated ``--cluster-repeat`` times (5, of 40,000 each); the goal is on the ratio of the medians.

Beside each rate, the Redis side of it (``INFO commandstats`` since the way began: the calls' own
time, scripts including the commands they run) tells how much of the time Redis spent, and the CPU of
this process and of each busy server (``INFO cpu``) which of them bounds the rate: across slots a
batch's round trip lasts the DLQ's node's script plus the client's work on the replies.

After every run the end state is checked (the DLQ empty, one new entry per dead letter, each
``_requeued_from`` once, no DLQ field left), so a fast wrong answer cannot pass. Each goal is one row of
``bench/_summary.py``; the exit status is 1 when any is missed.
"""

from __future__ import annotations

import argparse
import shutil
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import django_bench  # noqa: E402 - needs the repo root on sys.path
from bench._summary import at_least  # noqa: E402

DLQ = b"orders:dlq"
SAME_SLOT_DLQ = b"{orders}:dlq"
TARGET = b"orders"
BARE_RATIO = 0.8
LOOP_RATIO = 20.0
CLUSTER_RATIO = 0.8

BARE_LUA = """
local entries = redis.call('XRANGE', KEYS[1], ARGV[1], ARGV[2], 'COUNT', ARGV[3])
local ids = {}
for _, entry in ipairs(entries) do
  local fields, out = entry[2], {}
  for i = 1, #fields, 2 do
    local name = fields[i]
    if string.sub(name, 1, 4) ~= 'dlq_' and name ~= '_retries' then
      out[#out + 1] = name
      out[#out + 1] = fields[i + 1]
    end
  end
  out[#out + 1] = '_requeued_from'
  out[#out + 1] = entry[1]
  redis.call('XADD', KEYS[2], '*', unpack(out))
  ids[#ids + 1] = entry[1]
end
if #ids > 0 then redis.call('XDEL', KEYS[1], unpack(ids)) end
return {#entries, entries[#entries] and entries[#entries][1] or false}
"""
"""The floor: what one batch must do at least, in one script, knowing the target in advance."""


def _fill(r, n: int, dlq: bytes) -> str:
    """``n`` dead letters as eventbus files them; returns the newest DLQ ID (the operator's up_to)."""
    last = b""
    for start in range(0, n, 10_000):
        pipe = r.pipeline(transaction=False)
        for i in range(start, min(n, start + 10_000)):
            pipe.xadd(
                dlq,
                {
                    b"type": b"order.created",
                    b"data": b'{"order_id": %d, "amount": "12.50", "currency": "EUR"}' % i,
                    b"id": b"evt-%d" % i,
                    b"ts": b"1700000000000",
                    b"_retries": b"5",
                    b"dlq_original_stream": TARGET,
                    b"dlq_original_id": b"1700000000000-%d" % i,
                    b"dlq_group": b"billing",
                    b"dlq_error": b"ValueError: card declined",
                    b"dlq_traceback": b'Traceback (most recent call last):\n  File "app.py", line 7\n' * 3,
                    b"dlq_retries": b"5",
                    b"dlq_failed_at": b"1700000000100",
                },
            )
        last = pipe.execute()[-1]
    return last.decode()


def _verify(r, n: int, dlq: bytes) -> None:
    """The DLQ is empty and the target holds one copy of each dead letter (checked in pages)."""
    assert r.xlen(dlq) == 0, f"{r.xlen(dlq)} entries left in the DLQ"
    origins: set[bytes] = set()
    count = 0
    start = "-"
    while True:
        page = r.xrange(TARGET, start, "+", count=10_000)
        for _entry_id, fields in page:
            origins.add(fields[b"_requeued_from"])
            assert b"dlq_error" not in fields and b"_retries" not in fields
            count += 1
        if len(page) < 10_000:
            break
        start = "(" + page[-1][0].decode()
    assert count == n and len(origins) == n, (
        f"{count} new entries, {len(origins)} distinct origins, {n} expected"
    )


def _timed(label: str, run: Callable[[str], None], r, n: int, dlq: bytes) -> float:
    """Entries per second of ``run(up_to)`` over ``n`` fresh dead letters in ``dlq``, checked after."""
    r.delete(TARGET)
    up_to = _fill(r, n, dlq)
    _reset_stats(r)
    node_cpu = _nodes_cpu(r)
    started, client_cpu = time.perf_counter(), time.process_time()
    run(up_to)
    elapsed, client_cpu = time.perf_counter() - started, time.process_time() - client_cpu
    node_cpu = [after - before for before, after in zip(node_cpu, _nodes_cpu(r), strict=True)]
    busy = _redis_ms(r)
    _verify(r, n, dlq)
    rate = n / elapsed
    # CPU of this process and of each server (only the busy ones): which of them bounds the rate.
    servers = "/".join(f"{ms:,.0f}" for ms in node_cpu if ms >= 5) or "0"
    print(
        f"  {label:<52} {n:>7} entries in {elapsed:6.2f} s = {rate:>9,.0f} entries/s"
        f"  (Redis busy {busy:,.0f} ms; CPU ms: client {client_cpu * 1000:,.0f}, servers {servers})",
        flush=True,
    )
    return rate


def _nodes_cpu(r) -> list[float]:
    """Each primary's CPU so far (``INFO cpu``, user + system), in ms."""
    return [1000 * (info["used_cpu_user"] + info["used_cpu_sys"]) for info in (n.info("cpu") for n in _nodes(r))]


_TOP_LEVEL = ("evalsha", "eval", "xadd", "xdel", "xrange", "hdel", "xinfo|stream", "type")
"""Commands a way sends itself: their time is Redis's share. A script's own XADDs count in its EVALSHA
(``INFO commandstats`` counts them under XADD too), so XADD and XDEL are added only when no script ran."""


def _reset_stats(r) -> None:
    for node in _nodes(r):
        node.config_resetstat()


def _redis_ms(r) -> float:
    """Milliseconds Redis spent in the calls made since :func:`_reset_stats` (all primaries, on a cluster)."""
    total = 0.0
    for node in _nodes(r):
        stats = {
            name.removeprefix("cmdstat_"): row["usec"] for name, row in node.info("commandstats").items()
        }
        scripted = stats.get("evalsha", 0) + stats.get("eval", 0)
        for name in _TOP_LEVEL:
            if not (scripted and name in ("xadd", "xdel")):
                total += stats.get(name, 0)
    return total / 1000


def _nodes(r) -> list:
    """The client of each primary (``r`` itself on one server)."""
    if not hasattr(r, "get_primaries"):
        return [r]
    return [r.get_redis_connection(node) for node in r.get_primaries()]


def _job(conn: str, dlq: bytes, n: int, batch: int) -> Callable[[str], None]:
    """The requeue-all job, run in this process as a worker runs it."""
    from streams_app.jobs import runner as jobs
    from streams_app.jobs.models import Job

    def run(up_to: str) -> None:
        parameters = {"key": dlq.hex(), "key_text": dlq.decode(), "up_to": up_to, "batch": batch}
        row = Job.objects.create(kind=jobs.KIND_REQUEUE_ALL, connection=conn, parameters=parameters)
        jobs.job_run(row.pk)
        row.refresh_from_db()
        assert row.state == Job.State.DONE and row.done == n, (row.state, row.done, row.error)

    return run


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=40_000)
    parser.add_argument("--batch", type=int, default=1000, help="entries per Lua call")
    # 40,000 a run on the cluster: at 20,000 a run lasted 0.12-0.17 s and the same-slot floor of three
    # consecutive runs moved between 117k/s and 173k/s, so the verdict followed the timer's noise.
    parser.add_argument("--cluster-entries", type=int, default=40_000)
    parser.add_argument("--repeat", type=int, default=3, help="runs of each compared case, alternated")
    parser.add_argument("--cluster-repeat", type=int, default=5,
                        help="runs of each case on the cluster, alternated (its runs are the shortest)")
    parser.add_argument(
        "--cluster", choices=("yes", "no", "only"), nargs="?", const="only", default="yes",
        help="the Redis Cluster comparison: yes (default, when redis-server and redis-cli are on the PATH), "
        "no (skip it), only (it alone; also what a bare --cluster means)",
    )  # fmt: skip
    args = parser.parse_args()
    with django_bench() as server:
        ok = True
        if args.cluster != "only":
            ok = _standalone(server, args.entries, args.batch, args.repeat)
        if args.cluster == "no":
            print("cluster comparison skipped (--cluster no)")
        elif not (shutil.which("redis-server") and shutil.which("redis-cli")):
            print("cluster comparison skipped: redis-server or redis-cli is not on the PATH")
            ok = ok and args.cluster != "only"
        else:
            ok = _cluster(args.cluster_entries, args.batch, args.cluster_repeat) and ok
    return 0 if ok else 1


def _standalone(server, n: int, batch: int, repeat: int) -> bool:
    import redis

    from streams_app.redis_ops import actions
    from streams_app.redis_ops.conventions import requeue_plan

    conn = "default"
    r = redis.Redis.from_url(server.url(0))
    print(
        f"bulk DLQ requeue, {n} eventbus dead letters, batches of {batch}, "
        f"redis-server {r.info()['redis_version']}"
    )
    call_ms: list[float] = []

    def loop(up_to: str) -> None:
        call_ms.clear()
        cursor = None
        while True:
            started = time.perf_counter()
            cursor = actions.requeue_range(conn, DLQ, up_to=up_to, after=cursor, batch=batch).cursor
            call_ms.append((time.perf_counter() - started) * 1000)
            if cursor is None:
                return

    bare_script = r.register_script(BARE_LUA)

    def bare(up_to: str) -> None:
        start = "-"
        while True:
            read, last = bare_script(keys=[DLQ, TARGET], args=[start, up_to, batch])
            if int(read) < batch or not last:
                return
            start = "(" + last.decode()

    raw = redis.Redis.from_url(server.url(0))
    raw.set_response_callback("XRANGE", lambda response, **options: response)

    def per_entry(up_to: str) -> None:
        start = "-"
        while True:
            page = raw.xrange(DLQ, start, up_to, count=1000)
            for entry_id, flat in page:
                target, fields = requeue_plan(
                    DLQ, entry_id.decode(), list(zip(flat[::2], flat[1::2], strict=True))
                )
                raw.execute_command("XADD", target, "*", *[x for pair in fields for x in pair])
                raw.xdel(DLQ, entry_id)
            if len(page) < 1000:
                return
            start = "(" + page[-1][0].decode()

    # The bare batch and the job alternate, ``repeat`` times each: the goal is on the medians, so one
    # run slowed by a neighbour on the machine moves it least.
    floors: list[float] = []
    jobs: list[float] = []
    for _ in range(repeat):
        floors.append(_timed("bare Lua batch (one inline script per batch)", bare, r, n, DLQ))
        jobs.append(_timed("job_run (dlq.requeue_all)", _job(conn, DLQ, n, batch), r, n, DLQ))
    _timed("requeue_range loop (the access layer alone)", loop, r, n, DLQ)
    call_ms.sort()
    print(
        f"    time per requeue_range call, client side (bounds how long Redis is busy with one batch): "
        f"median {call_ms[len(call_ms) // 2]:.1f} ms, max {call_ms[-1]:.1f} ms"
    )
    slow = _timed("per-entry loop: XADD + XDEL per entry", per_entry, r, max(1, n // 4), DLQ)
    floor, job = statistics.median(floors), statistics.median(jobs)
    # Not a goal, a bound: no batch that reads and rewrites entries in Lua, as the job must, beats this.
    print(
        f"    bare Lua batch vs the per-entry loop: {floor / slow:.1f}x (what the job's ratio to the loop can reach)"
    )
    r.close()
    raw.close()
    met = at_least("bulk DLQ requeue (job) vs a bare Lua batch, medians", job, floor, BARE_RATIO)
    return at_least("bulk DLQ requeue (job) vs a per-entry loop", job, slow, LOOP_RATIO) and met


def _cluster(n: int, batch: int, repeat: int) -> bool:
    """Requeue throughput on a 3-primary cluster: DLQ and stream in one slot vs in two slots on two nodes."""
    from django.conf import settings
    from redis.cluster import RedisCluster

    from streams_app.redis_ops import client as redis_client
    from tests.servers import RedisClusterServers

    cluster = RedisClusterServers()
    try:
        cluster.start()
        settings.BUS_REDIS_URLS = {**settings.BUS_REDIS_URLS, "cluster": cluster.url()}
        redis_client.reset()
        rc = RedisCluster.from_url(cluster.url())
        assert rc.keyslot(SAME_SLOT_DLQ) == rc.keyslot(TARGET) != rc.keyslot(DLQ)
        assert rc.get_node_from_key(DLQ).name != rc.get_node_from_key(TARGET).name
        print(f"bulk DLQ requeue on a 3-primary Redis Cluster, {n} eventbus dead letters, batches of {batch}")
        # Alternated and repeated: on a busy machine one run of each says little. The verdict takes the
        # ratio of the medians (one lucky or unlucky run moves it least).
        rates: dict[bytes, list[float]] = {SAME_SLOT_DLQ: [], DLQ: []}
        cases = (
            ("same slot    ({orders}:dlq -> orders)", SAME_SLOT_DLQ),
            ("across slots (orders:dlq -> orders)", DLQ),
        )
        for _ in range(repeat):
            for label, dlq in cases:
                rates[dlq].append(_timed(f"job_run, {label}", _job("cluster", dlq, n, batch), rc, n, dlq))
        rc.close()
        return at_least(
            "cluster: cross-slot requeue (job) vs same-slot, medians",
            statistics.median(rates[DLQ]),
            statistics.median(rates[SAME_SLOT_DLQ]),
            CLUSTER_RATIO,
        )
    finally:
        redis_client.reset()
        cluster.cleanup()


if __name__ == "__main__":
    sys.exit(main())
