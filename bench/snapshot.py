"""Benchmark: the metric snapshot with its database writes against its Redis-side read, at 10k and 100k
streams, on SQLite and on PostgreSQL; at 10k on SQLite also the mirror sync, retention and ``/metrics``.

Goals (docs/performance.md#goals-and-floors), each a row of ``make bench``'s table (``bench/_summary.py``):

- ``snapshot N streams, <db>``: the snapshot with database writes (``snapshot_take`` of a new tick:
  Redis reads, mirror refresh, sample rows, in one transaction) within 1.5x of its Redis-side pipelined
  read (``snapshot_reads.server_read``, run as the snapshot runs it: with the cyclic GC paused), both
  the median of ``--rounds`` rounds taken alternately in the same process (``--small-rounds`` below
  :data:`SMALL` streams, where a round lasts under a second and its jitter of a few hundredths moved
  the ratio of three rounds by 0.05);
- ``every tick recorded, N streams, <db>`` (the largest size), the goal's "at 100k streams every tick of
  the default interval recorded" as written: what records ticks is Celery beat and a worker, so after the
  rounds a real ``celery worker --concurrency 2``, as ``make run`` starts it, and a ``celery beat``
  sending the snapshot's messages (:mod:`bench._snapshot_beat`) run for ``--beat-ticks`` intervals of
  the real clock (6; 0: none). Every tick of that window must have its ``SnapshotRun`` and none a
  ``SnapshotSkip``, and the runs' mean duration must be within the interval. A single slow run is no
  miss (the catch-up of ``snapshot_take_guarded`` takes the tick that began meanwhile), and a tick the
  rounds' timing would pass can still be lost to a busy worker or an expired message: so the runs
  recorded are counted. But runs longer than the interval on average only defer a skip beyond the
  window. Each run's duration and delay after its tick, and the slowest of the rounds against the
  interval, are printed beside it;
- at 10k on SQLite: the mirror sync within its interval, a retention run within its budget and
  ``/metrics`` bounded (at most BUSCONSOLE_METRICS_MAX_SERIES per-object series, whatever the bus).

Sizes below :data:`SMALL` first run :data:`HISTORY_TICKS` more ticks (``--history-ticks N`` sets it for
every size; 0: none) before their rounds, so that the rounds write into sample tables that hold that
many ticks of history, as a console that has been up a while does (raw samples are kept 48 hours), and
the script prints their write part (the snapshot less its Redis part) every tenth tick. Fresh tables
flattered the write part when the sample tables were keyed by stream or group, then time: once a
stream's samples filled a leaf page of their own every tick wrote a page per stream and group, and at
10k streams the mean write part rose from 0.22 s over the first ten ticks to 0.96 s over ticks 141-150 on
SQLite (docs/performance.md#snapshot-ticks-on-tables-with-history). Keyed time first, as they are now, a
tick's rows go to the end of the index, and the write part stays flat. The 100k size is measured on fresh
tables: 150 ticks of it would take some twenty minutes per database.

Run from the repository root: ``.venv/bin/python bench/snapshot.py`` (about eight minutes on 2 cores, and
the 10k size's 150 history ticks some nine more per database on a machine whose Redis read takes 1.8 s;
``--quick``: 1k and 5k streams, two rounds, three beat ticks, about two minutes). It starts a private
redis-server and fills one logical database per size, once: N streams of 20 entries, each with two
groups that both have pending entries and lag (every group costs an ``XPENDING - + 1`` too: the worst
case for the snapshot). Then each database is measured in a child process of its own (Django is set up once per
process): SQLite in a throwaway file; PostgreSQL from Debian's package, started by
:class:`tests.postgres.PostgresServer` with its default, durable settings (``make system-postgres``;
without it the PostgreSQL rows are skipped and said so). Each size is a connection of its own, so the
larger size's snapshots run on a database that already holds the smaller one's rows and samples.
"""

from __future__ import annotations

import argparse
import collections
import contextlib
import math
import os
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterable
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
#: Sizes below this many streams are measured over ``--small-rounds`` rounds (module docstring).
SMALL = 50_000
#: Ticks of history run before the rounds of a size below :data:`SMALL` (module docstring): 25 minutes of
#: the default interval, past the 130 ticks after which a per-series index wrote a page per series.
HISTORY_TICKS = 150
#: Logical Redis databases of the sizes, in order (db 1 is the console's own Redis).
SIZE_DBS = (0, 2, 3, 4)
#: Seconds the Celery worker and beat get to start (Django and the pool imported on a loaded machine), and
#: to stop.
STARTUP_S = 90.0
STOP_GRACE_S = 20.0


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
    from bench._common import setup_django

    setup_django(
        bus_url=f"redis://127.0.0.1:{args.redis_port}/0",
        console_url=f"redis://127.0.0.1:{args.redis_port}/1",
        database_url=args.database_url,
        var_dir=args.var_dir,
    )
    from django.conf import settings
    from django.db import connection

    from streams_app.metrics import snapshots
    from streams_app.metrics.models import GroupSample, StreamSample
    from streams_app.perf.heap import gc_paused
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
        history_ticks = args.history_ticks
        if history_ticks is None:
            history_ticks = HISTORY_TICKS if n < SMALL and not args.quick else 0
        tick = history(snapshots, db, n, tick, history_ticks, interval)
        reads, full = [], []
        rounds = args.rounds if n >= SMALL else max(args.rounds, args.small_rounds)
        for _ in range(rounds):
            reads.append(timed(read)[1])
            tick += timedelta(seconds=interval)
            run, took = timed(snapshots.snapshot_take, tick=tick)
            assert (run.streams, run.groups) == (n, 2 * n)
            full.append(took)
            print(f"  [{db}]   read {reads[-1]:.2f} s, snapshot {took:.2f} s (its Redis part {run.redis_ms} ms)",
                  flush=True)
        samples = StreamSample.objects.filter(resolution="raw", stream__connection=conn).count()
        groups = GroupSample.objects.filter(resolution="raw", group__stream__connection=conn).count()
        ticks = rounds + 1 + history_ticks
        assert (samples, groups) == (n * ticks, 2 * n * ticks), (samples, groups)
        med = statistics.median
        print(f"  [{db}] {n} streams: median read {med(reads):.2f} s, median snapshot {med(full):.2f} s, "
              f"worst {max(full):.2f} s ({load()})", flush=True)
        within(f"snapshot {n // 1000}k streams, {db}", med(full), med(reads), MAX_RATIO, unit="s")
        if n == max(sizes):
            worst = max(full)
            print(
                f"  [{db}] {n} streams: slowest of the rounds {worst:.2f} s = {worst / interval:.2f}x the "
                f"{interval} s interval",
                flush=True,
            )
            if args.beat_ticks > 0:
                beat_window(
                    conn=conn,
                    url=settings.BUS_REDIS_URLS[conn],
                    n=n,
                    ticks=args.beat_ticks,
                    var_dir=args.var_dir,
                )
        tick += timedelta(hours=1)  # the next size starts without a previous tick to count rates from
        if db == "sqlite" and n == min(sizes) and not args.quick:
            extras(conn, args.redis_port, SIZE_DBS[0])
    return 0


def history(snapshots, db: str, n: int, tick: datetime, ticks: int, interval: int) -> datetime:
    """Run ``ticks`` snapshots after ``tick`` (``--history-ticks``), printing the mean write part of
    every ten; the last tick taken."""
    parts: list[float] = []
    for i in range(ticks):
        tick += timedelta(seconds=interval)
        run, took = timed(snapshots.snapshot_take, tick=tick)
        assert (run.streams, run.groups) == (n, 2 * n)
        parts.append(took - run.redis_ms / 1000)
        if (i + 1) % 10 == 0 or i + 1 == ticks:
            done = len(parts) % 10 or 10
            print(f"  [{db}]   history ticks {i + 2 - done}-{i + 1}: mean write part "
                  f"{statistics.mean(parts[-done:]):.2f} s ({load()})", flush=True)
    return tick


# ------------------------------------------------------------------------------- the beat window


class Service:
    """A Celery process of the window, leading its own process group, its output in a log file.

    Its own group keeps the terminal's Ctrl-C away from it: the bench stops it (:func:`services_stop`) as a
    worker's warm shutdown needs. ``scripts/run.py``'s supervisor does the same for ``make run`` but
    copies the output to the terminal, which would bury the figures.
    """

    def __init__(self, name: str, argv: list[str], env: dict[str, str], log_path: Path) -> None:
        self.name, self.log_path = name, log_path
        with open(log_path, "wb") as log:
            self.process = subprocess.Popen(
                argv,
                cwd=REPO,
                env=env,
                stdin=subprocess.DEVNULL,
                stdout=log,
                stderr=subprocess.STDOUT,
                process_group=0,
            )

    def alive(self) -> bool:
        """True while anything of its process group is left (a worker's pool processes, say)."""
        self.process.poll()  # reap the leader so that a zombie does not count
        try:
            os.killpg(self.process.pid, 0)
            return True
        except (ProcessLookupError, PermissionError):
            return False

    def tail(self, lines: int = 15) -> str:
        text = self.log_path.read_text(errors="replace").splitlines()[-lines:]
        return "\n".join(f"    {self.name} | {line}" for line in text)


def services_stop(services: list[Service]) -> None:
    """SIGTERM to each leader (a worker's warm shutdown stops its own pool, and breaks if the pool is
    signalled too), up to STOP_GRACE_S for the groups to go, then SIGKILL to whatever is left of them."""
    for service in services:
        if service.process.poll() is None:
            service.process.terminate()
    deadline = time.monotonic() + STOP_GRACE_S
    while any(s.alive() for s in services) and time.monotonic() < deadline:
        time.sleep(0.1)
    for service in services:
        if service.alive():
            print(f"  {service.name} did not stop within {STOP_GRACE_S:g} s: killed", flush=True)
            with contextlib.suppress(ProcessLookupError, PermissionError):
                os.killpg(service.process.pid, signal.SIGKILL)
        service.process.wait()


def beat_window(*, conn: str, url: str, n: int, ticks: int, var_dir: str) -> None:
    """The goal ``every tick recorded``: a real Celery beat and worker, as ``make run`` starts them, for
    ``ticks`` intervals of the real clock; then the ticks of the window against the runs and skips recorded.

    The window is ``ticks`` ticks from the first that got a run (the beat sends its first message one
    interval after it started). The worker and beat get the child's environment (database, Redis, var
    dir: :func:`_common.setup_django`) with this size's connection as the only monitored one; the beat
    sends the snapshot's messages only (:mod:`bench._snapshot_beat` says why). The window's ticks are those
    of the real clock, months after the rounds' fake ones (from T0): the first real run records that gap
    as a skip ending the interval before the window, and counts no rate against a tick that old.
    """
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from busconsole.locks import console_redis
    from streams_app import tasks
    from streams_app.metrics.models import SnapshotRun, SnapshotSkip
    from streams_app.metrics.snapshots import snapshot_tick_for

    db = connection.vendor
    name = f"every tick recorded, {n // 1000}k streams, {db}"
    interval = settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S
    step = timedelta(seconds=interval)
    start = snapshot_tick_for(now=timezone.now())
    newest_fake = SnapshotRun.objects.order_by("-tick").values_list("tick", flat=True).first()
    assert newest_fake is None or newest_fake < start, (newest_fake, start)
    # The console's own Redis (the broker, the locks) as a fresh install finds it: no message or lock left
    # by the rounds or by another database's window.
    console_redis().flushdb()
    connection.close()  # the window's polls open a fresh one; nothing of the rounds stays open
    env = dict(os.environ, BUS_REDIS_URLS=f"{conn}={url}")
    celery = [sys.executable, "-m", "celery", "-A", "busconsole"]
    beat_app = [sys.executable, "-m", "celery", "-A", "bench._snapshot_beat"]  # the snapshot schedule only
    services: list[Service] = []
    previous_term = signal.signal(signal.SIGTERM, lambda signum, frame: sys.exit(128 + signum))
    try:
        services.append(
            Service(
                "worker",
                [*celery, "worker", "-l", "info", "--concurrency", "2"],
                env,
                Path(var_dir, "worker.log"),
            )
        )
        services.append(
            Service(
                "beat",
                [*beat_app, "beat", "-l", "info", "-s", str(Path(var_dir, "celerybeat-schedule"))],
                env,
                Path(var_dir, "beat.log"),
            )
        )
        print(
            f"  [{db}] {n} streams: Celery worker (concurrency 2) and beat started, a window of {ticks} "
            f"ticks of {interval} s ({load()})",
            flush=True,
        )

        def wait_run(after: datetime, timeout_s: float) -> datetime | None:
            """The tick of the first run recorded after ``after`` (None: none within the timeout)."""
            deadline = time.monotonic() + timeout_s
            while True:
                found = (
                    SnapshotRun.objects.filter(tick__gt=after).order_by("tick").values_list("tick", flat=True)
                )
                if found.first() is not None or time.monotonic() > deadline:
                    return found.first()
                for service in services:
                    if service.process.poll() is not None:
                        raise RuntimeError(f"{service.name} exited with code {service.process.returncode}")
                time.sleep(0.5)

        first = wait_run(start - step, STARTUP_S + 2 * interval)
        if first is None:
            raise RuntimeError(f"no snapshot recorded within {STARTUP_S + 2 * interval:g} s of the start")
        last = first + (ticks - 1) * step
        # Every run of a window tick starts within its interval (the beat message expires then, a catch-up
        # takes only the current tick) and the runs follow each other under the lock: once a later tick is
        # recorded, so is every window tick that will be, and a run never outlives its task's time limit.
        until_s = (last + 2 * step - timezone.now()).total_seconds() + tasks.snapshot_tick.time_limit
        wait_run(last, until_s)
    except RuntimeError as exc:
        print(f"  [{db}] {exc}", flush=True)
        for service in services:
            print(service.tail(), flush=True)
        check(name, f"no window: {exc}", "all", False)
        return
    finally:
        services_stop(services)
        signal.signal(signal.SIGTERM, previous_term)

    runs = list(SnapshotRun.objects.filter(tick__gte=first, tick__lte=last).order_by("tick"))
    complete = [r for r in runs if r.finished_at and (r.streams, r.groups) == (n, 2 * n) and not r.errors]
    skips = SnapshotSkip.objects.values_list("tick", "ticks", "interval_s")
    skipped = ticks_skipped(skips, first=first, last=last)
    durations = [r.duration_ms / 1000 for r in runs]
    for run in runs:
        late = (run.started_at - run.tick).total_seconds()
        print(
            f"  [{db}]   tick {run.tick:%H:%M:%S}: started {late:+.2f} s after it, took "
            f"{run.duration_ms / 1000:.2f} s (Redis {run.redis_ms / 1000:.2f} s), {run.streams} streams"
            f"{', errors' if run.errors else ''}",
            flush=True,
        )
    if durations:
        print(
            f"  [{db}] window runs: slowest {max(durations):.2f} s, mean {statistics.mean(durations):.2f} s, "
            f"{skipped} tick(s) skipped in the window ({load()})",
            flush=True,
        )
    print(f"  [{db}] tasks the worker ran: {worker_tasks(services[0].log_path)}", flush=True)
    # A window of a few ticks can record them all while every run is longer than the interval: the
    # catch-up absorbs the difference until the runs start a whole interval late, and a tick goes. So
    # the runs must also keep up on average, or the ticks are recorded only for now.
    mean = statistics.mean(durations) if durations else math.inf
    figure = (f"{len(complete)} of {ticks} ticks recorded" + (f", {skipped} skipped" if skipped else "")
              + f"; runs' mean {mean:.2f} s")
    check(name, figure, f"all; mean < {interval} s", len(complete) == ticks and skipped == 0 and mean < interval)


def ticks_skipped(skips: Iterable[tuple[datetime, int, int]], *, first: datetime, last: datetime) -> int:
    """The ticks from ``first`` to ``last`` that skip records (first tick missed, how many, interval) cover.

    A record's missed ticks are ``tick + k * interval`` for ``k < ticks``; the gap between the rounds' fake
    ticks and the window's first real one ends the interval before ``first``, so it counts for nothing.
    """
    skipped = 0
    for tick, count, step in skips:
        lo = max(0, math.ceil((first - tick).total_seconds() / step))
        hi = min(count - 1, math.floor((last - tick).total_seconds() / step))
        skipped += max(0, hi - lo + 1)
    return skipped


def worker_tasks(log_path: Path) -> str:
    """What the worker's log says it ran while Celery was up: per task, its runs, the longest, and the
    messages it dropped unrun (a beat message expires after its interval: the tasks' ``expires``)."""
    text = log_path.read_text(errors="replace")
    took: dict[str, list[float]] = {}
    for match in re.finditer(r"Task streams_app\.tasks\.(\w+)\[[^\]]*\] succeeded in ([\d.]+)s", text):
        took.setdefault(match[1], []).append(float(match[2]))
    dropped = collections.Counter(re.findall(r"Discarding revoked task: streams_app\.tasks\.(\w+)", text))
    return "; ".join(
        f"{task} {len(took.get(task, []))} run(s), longest {max(took.get(task, [0.0])):.1f} s"
        + (f", {dropped[task]} dropped" if dropped[task] else "")
        for task in sorted(took.keys() | dropped.keys())
    )


def extras(conn: str, redis_port: int, redis_db: int) -> None:
    """The other metrics goals, at the smallest size on SQLite: mirror sync, retention, ``/metrics``."""
    import redis
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.test import Client
    from django.urls import resolve

    from streams_app.accounts.tokens import token_create
    from streams_app.metrics import mirror, pruning, snapshots
    from streams_app.metrics.models import StreamSample
    from streams_app.metrics.rollups import samples_downsample

    resolve("/metrics")  # load the URLconf now, not in the middle of the figures
    raw = redis.Redis(port=redis_port, db=redis_db)
    n_streams = raw.dbsize()
    mirror_s = float(settings.BUSCONSOLE_MIRROR_INTERVAL_S)
    first_sync, first_sync_s = timed(mirror.mirror_sync, conn=conn, full=True)
    warm_sync, warm_sync_s = timed(mirror.mirror_sync, conn=conn, full=True)
    touched = max(1, n_streams // 100)
    pipe = raw.pipeline(transaction=False)
    for i in range(0, n_streams, n_streams // touched):
        pipe.xadd(f"bench:stream:{i}", {"type": "late"})
    pipe.execute()
    inc, inc_s = timed(mirror.mirror_sync, conn=conn, full=False)
    assert inc.streams_written == touched, (inc.streams_written, touched)
    print(f"  mirror sync: first full pass {first_sync_s:.2f} s ({first_sync.consumers} consumers), warm full "
          f"pass {warm_sync_s:.2f} s, incremental (1% moved) {inc_s:.2f} s", flush=True)
    check(f"mirror sync incremental, {n_streams // 1000}k streams", f"{inc_s:.2f} s", f"< {mirror_s:g} s interval",
          inc_s < mirror_s, floor=f"{mirror_s:g} s", ratio=f"{inc_s / mirror_s:.2f}x")

    # Retention: the clock put past the raw retention of this size's samples (ticks from T0 on).
    later = T0 + timedelta(hours=settings.BUSCONSOLE_RETENTION_RAW_H + 2)
    rollups, rollup_s = timed(samples_downsample, now=later, budget_s=90)
    deleted, prune_s = timed(pruning.samples_prune, now=later, budget_s=90)
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
                "--var-dir", var_dir, "--sizes", args.sizes, "--rounds", str(args.rounds),
                "--small-rounds", str(args.small_rounds)]
        if args.history_ticks is not None:
            argv += ["--history-ticks", str(args.history_ticks)]
        argv += ["--beat-ticks", str(args.beat_ticks)]
        if args.quick:
            argv.append("--quick")
        process = subprocess.Popen(argv, cwd=REPO)
        try:
            code = process.wait()
        except KeyboardInterrupt:
            # The child got the Ctrl-C too, and stops the Celery processes it started: let it.
            try:
                process.wait(timeout=STOP_GRACE_S + 10)
            except subprocess.TimeoutExpired:
                process.kill()
                process.wait()
            raise
        if code != 0:
            check(f"snapshot, {database}", f"the run failed (exit {code})", "a run", False)
    finally:
        if postgres is not None:
            postgres.cleanup()
        shutil.rmtree(var_dir, ignore_errors=True)


def main(argv: list[str] | None = None) -> int:
    # The stream-by-stream tick is what this measures: above BUSCONSOLE_FAMILY_MODE_KEYS (50,000) a server is
    # snapshotted by family (docs/operations.md#stream-families), so the threshold is raised past the sizes
    # (the child processes inherit it).
    os.environ.setdefault("BUSCONSOLE_FAMILY_MODE_KEYS", "100000000")
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--sizes", default="10000,100000", help="comma-separated stream counts (at most 4)")
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--small-rounds", type=int, default=9, help="rounds of a size below 50,000 streams")
    parser.add_argument("--databases", default="sqlite,postgres")
    parser.add_argument(
        "--quick", action="store_true", help="1k and 5k streams, 2 rounds, 3 ticks, no extras"
    )
    parser.add_argument("--beat-ticks", type=int, help="intervals of real Celery beat at the largest size: 6")
    parser.add_argument("--history-ticks", type=int,
                        help=f"ticks run before each size's rounds, so that they write into tables with history "
                        f"(default {HISTORY_TICKS} below {SMALL:,} streams, else 0)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    parser.add_argument("--redis-port", type=int, help=argparse.SUPPRESS)
    parser.add_argument("--database-url", help=argparse.SUPPRESS)
    parser.add_argument("--var-dir", help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    if args.beat_ticks is None:
        args.beat_ticks = 3 if args.quick else 6
    if args.quick:
        args.sizes, args.rounds, args.small_rounds = "1000,5000", 2, 2
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
