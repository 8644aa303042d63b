"""Benchmark: the metric snapshot with its database writes against its Redis-side read, at 10k and 100k
streams, on SQLite and on PostgreSQL; at 10k on SQLite also the mirror sync, retention and ``/metrics``.

Goals (SPEC section 8), each a row of ``make bench``'s table (``bench/_summary.py``):

- ``snapshot N streams, <db>``: the snapshot with database writes (``snapshot_take`` of a new tick:
  Redis reads, mirror refresh, sample rows, in one transaction) within 1.5x of its Redis-side pipelined
  read (``snapshot_reads.server_read``, run as the snapshot runs it: with the cyclic GC paused), both
  the median of ``--rounds`` rounds taken alternately in the same process;
- ``every tick recorded, N streams, <db>`` (the largest size): the slowest snapshot of the rounds
  finishes within the default beat interval (``BUSCONSOLE_SNAPSHOT_INTERVAL_S``), so no tick is skipped;
- at 10k on SQLite: the mirror sync within its interval, a retention run within its budget and
  ``/metrics`` bounded (at most BUSCONSOLE_METRICS_MAX_SERIES per-object series, whatever the bus).

Run from the repository root: ``.venv/bin/python bench/snapshot.py`` (about five minutes on 2 cores;
``--quick``: 1k and 5k streams, two rounds, under a minute). It starts a private redis-server and fills
one logical database per size, once: N streams of 20 entries, each with two groups that both have
pending entries and lag (every group costs an ``XPENDING - + 1`` too: the worst case for the
snapshot). Then each database is measured in a child process of its own (Django is set up once per
process): SQLite in a throwaway file; PostgreSQL from Debian's package, started by
:class:`tests.postgres.PostgresServer` with its default, durable settings (``make system-postgres``;
without it the PostgreSQL rows are skipped and said so). Each size is a connection of its own, so the
larger size's snapshots run on a database that already holds the smaller one's rows and samples.
"""

from __future__ import annotations

import argparse
import os
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._summary import check, within  # noqa: E402
from tests.servers import RedisServer  # noqa: E402

ENTRIES = 20
BATCH = 500
T0 = datetime(2026, 1, 1, tzinfo=UTC)
MAX_RATIO = 1.5
#: Logical Redis databases of the sizes, in order (db 1 is the console's own Redis).
SIZE_DBS = (0, 2, 3, 4)


def fill(client, n_streams: int) -> None:
    """Streams bench:stream:<i>: ENTRIES entries, groups g1 (3 pending) and g2 (1 pending), pipelined."""
    fields = {"type": "order.created", "data": '{"order_id":1,"amount":1250}'}
    for first in range(0, n_streams, BATCH):
        pipe = client.pipeline(transaction=False)
        keys = [f"bench:stream:{i}" for i in range(first, min(first + BATCH, n_streams))]
        for key in keys:
            for _ in range(ENTRIES):
                pipe.xadd(key, fields)
            pipe.xgroup_create(key, "g1", id="0")
            pipe.xgroup_create(key, "g2", id="0")
        pipe.execute()
        pipe = client.pipeline(transaction=False)
        for key in keys:
            pipe.xreadgroup("g1", "worker-a", {key: ">"}, count=3)
            pipe.xreadgroup("g2", "worker-b", {key: ">"}, count=1)
        pipe.execute()


def timed(fn, *args, **kwargs):
    t = time.perf_counter()
    out = fn(*args, **kwargs)
    return out, time.perf_counter() - t


def load() -> str:
    return "load " + " ".join(f"{x:.2f}" for x in os.getloadavg())


# ------------------------------------------------------------------------------------ child


def child(args: argparse.Namespace) -> int:
    """Measure one database at every size (each size a connection of its own)."""
    from _common import setup_django

    setup_django(
        bus_url=f"redis://127.0.0.1:{args.redis_port}/0",
        console_url=f"redis://127.0.0.1:{args.redis_port}/1",
        database_url=args.database_url,
        var_dir=args.var_dir,
    )
    from django.conf import settings
    from django.db import connection

    from streams_app.metrics import snapshots
    from streams_app.metrics.bulk import gc_paused
    from streams_app.metrics.models import GroupSample, StreamSample
    from streams_app.redis_ops import client as redis_client
    from streams_app.redis_ops import snapshot_reads

    db = connection.vendor
    interval = settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S
    sizes = [int(s) for s in args.sizes.split(",")]
    tick = T0
    for n, redis_db in zip(sizes, SIZE_DBS, strict=False):
        conn = f"bench{n}"
        settings.BUS_REDIS_URLS = {conn: f"redis://127.0.0.1:{args.redis_port}/{redis_db}"}
        redis_client.reset()

        def read(conn: str = conn) -> snapshot_reads.ServerFacts:
            with gc_paused():  # as snapshot_take runs it
                return snapshot_reads.server_read(conn)

        facts = read()  # warm-up, and the work is what we think
        assert len(facts.streams) == n and all(len(s.groups) == 2 for s in facts.streams)
        cold, cold_s = timed(snapshots.snapshot_take, tick=tick)
        assert (cold.streams, cold.groups) == (n, 2 * n), (cold.streams, cold.groups)
        print(f"  [{db}] {n} streams, {load()}; first snapshot (creates the mirror rows) {cold_s:.2f} s", flush=True)
        reads, full = [], []
        for _ in range(args.rounds):
            reads.append(timed(read)[1])
            tick += timedelta(seconds=interval)
            run, took = timed(snapshots.snapshot_take, tick=tick)
            assert (run.streams, run.groups) == (n, 2 * n)
            full.append(took)
            print(f"  [{db}]   read {reads[-1]:.2f} s, snapshot {took:.2f} s (its Redis part {run.redis_ms} ms)",
                  flush=True)
        samples = StreamSample.objects.filter(resolution="raw", stream__connection=conn).count()
        groups = GroupSample.objects.filter(resolution="raw", group__stream__connection=conn).count()
        assert (samples, groups) == (n * (args.rounds + 1), 2 * n * (args.rounds + 1)), (samples, groups)
        med = statistics.median
        print(f"  [{db}] {n} streams: median read {med(reads):.2f} s, median snapshot {med(full):.2f} s, "
              f"worst {max(full):.2f} s ({load()})", flush=True)
        within(f"snapshot {n // 1000}k streams, {db}", med(full), med(reads), MAX_RATIO, unit="s")
        if n == max(sizes):
            worst = max(full)
            check(f"every tick recorded, {n // 1000}k streams, {db}", f"{worst:.2f} s (slowest)",
                  f"< {interval} s interval", worst < interval, floor=f"{interval} s", ratio=f"{worst / interval:.2f}x")
        tick += timedelta(hours=1)  # the next size starts without a previous tick to count rates from
        if db == "sqlite" and n == min(sizes) and not args.quick:
            extras(conn, args.redis_port, SIZE_DBS[0])
    return 0


def extras(conn: str, redis_port: int, redis_db: int) -> None:
    """The other metrics goals, at the smallest size on SQLite: mirror sync, retention, ``/metrics``."""
    import redis
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.test import Client
    from django.urls import resolve

    from streams_app.accounts.tokens import token_create
    from streams_app.metrics import snapshots
    from streams_app.metrics.models import StreamSample

    resolve("/metrics")  # load the URLconf now, not in the middle of the figures
    raw = redis.Redis(port=redis_port, db=redis_db)
    n_streams = raw.dbsize()
    mirror_s = float(settings.BUSCONSOLE_MIRROR_INTERVAL_S)
    first_sync, first_sync_s = timed(snapshots.mirror_sync, conn=conn, full=True)
    warm_sync, warm_sync_s = timed(snapshots.mirror_sync, conn=conn, full=True)
    touched = max(1, n_streams // 100)
    pipe = raw.pipeline(transaction=False)
    for i in range(0, n_streams, n_streams // touched):
        pipe.xadd(f"bench:stream:{i}", {"type": "late"})
    pipe.execute()
    inc, inc_s = timed(snapshots.mirror_sync, conn=conn, full=False)
    assert inc.streams_written == touched, (inc.streams_written, touched)
    print(f"  mirror sync: first full pass {first_sync_s:.2f} s ({first_sync.consumers} consumers), warm full "
          f"pass {warm_sync_s:.2f} s, incremental (1% moved) {inc_s:.2f} s", flush=True)
    check(f"mirror sync incremental, {n_streams // 1000}k streams", f"{inc_s:.2f} s", f"< {mirror_s:g} s interval",
          inc_s < mirror_s, floor=f"{mirror_s:g} s", ratio=f"{inc_s / mirror_s:.2f}x")

    # Retention: the clock put past the raw retention of this size's samples (ticks from T0 on).
    later = T0 + timedelta(hours=settings.BUSCONSOLE_RETENTION_RAW_H + 2)
    rollups, rollup_s = timed(snapshots.samples_downsample, now=later, budget_s=90)
    deleted, prune_s = timed(snapshots.samples_prune, now=later, budget_s=90)
    left = StreamSample.objects.filter(resolution="raw").count()
    print(f"  retention: rollups {rollup_s:.2f} s ({rollups}), deletions {prune_s:.2f} s "
          f"({sum(deleted.values())} rows; {left} raw stream samples left)", flush=True)
    check("retention run within its budget", f"{rollup_s + prune_s:.1f} s", "< 180 s budget", rollup_s + prune_s < 180)

    user = User.objects.create_user("bench", password="x")
    user.groups.set([Group.objects.get_or_create(name="viewer")[0]])
    token = token_create(user=user, name="bench")[1]
    snapshots.snapshot_take(tick=later)  # /metrics shows the newest snapshot
    response, metrics_s = timed(Client(HTTP_HOST="localhost").get, "/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert response.status_code == 200, response.status_code
    body = response.content.decode()
    series = sum(1 for line in body.splitlines() if line and not line.startswith("#"))
    limit = settings.BUSCONSOLE_METRICS_MAX_SERIES + 100  # the per-connection aggregates come on top
    print(f"  /metrics {metrics_s * 1000:.0f} ms, {len(response.content)} bytes, {series} series", flush=True)
    check(f"/metrics bounded, {n_streams // 1000}k streams", f"{series} series", f"<= {limit}", series <= limit)


# ----------------------------------------------------------------------------------------- parent


def measure(database: str, server: RedisServer, args: argparse.Namespace) -> None:
    """Run :func:`child` for one database in its own process."""
    var_dir = tempfile.mkdtemp(prefix=f"busconsole-snapshot-{database}-")
    postgres = None
    try:
        if database == "sqlite":
            url = f"sqlite:///{var_dir}/bench.sqlite3"
        else:
            from tests.postgres import PostgresServer, pg_bindir

            try:
                pg_bindir()
            except RuntimeError as exc:
                check("snapshot, postgresql", f"skipped: {exc}", "PostgreSQL installed", False)
                return
            postgres = PostgresServer(durable=True).start()
            url = postgres.url()
        argv = [sys.executable, __file__, "--child", "--redis-port", str(server.port), "--database-url", url,
                "--var-dir", var_dir, "--sizes", args.sizes, "--rounds", str(args.rounds)]
        if args.quick:
            argv.append("--quick")
        done = subprocess.run(argv, cwd=REPO)
        if done.returncode != 0:
            check(f"snapshot, {database}", f"the run failed (exit {done.returncode})", "a run", False)
    finally:
        if postgres is not None:
            postgres.cleanup()
        shutil.rmtree(var_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated stream counts (at most 4)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument("--quick", action="store_true", help="1k and 5k streams, 2 rounds, no extras")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--redis-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help=argparse.SUPPRESS)
    parser.add_argument("--var-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    if args.quick:
        args.sizes, args.rounds = "1000,5000", 2
    started = time.perf_counter()
    server = RedisServer()
    try:
        server.start()
        import redis

        for n, redis_db in zip([int(s) for s in args.sizes.split(",")], SIZE_DBS, strict=False):
            _, fill_s = timed(fill, redis.Redis.from_url(server.url(redis_db)), n)
            print(f"filled {n} streams x {ENTRIES} entries, 2 groups each with pending entries ({fill_s:.1f} s)",
                  flush=True)
        for database in args.databases.split(","):
            print(f"{database}: {load()}", flush=True)
            measure(database, server, args)
    finally:
        server.cleanup()
    print(f"(benchmark ran {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
