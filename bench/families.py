"""Benchmark: stream families (docs/performance.md#stream-families) over many short-lived progress streams.

The seed's progress-stream pattern (one stream per task, ``progress:<task>``, a few ``start``/``delta``/
``done`` events, MAXLEN and a TTL once done) reaches a great many keys quickly. This fills a private
redis-server, server-side in bounded Lua batches (:mod:`bench._families_bus`), with ``--streams`` of them
(1,000,000 by default, the goal's size) beside one ``task:<n>:events`` stream
per 50 progress streams, a group with pending entries on every tenth of those and the bus's DLQ
``{task:<n>:events}:dlq`` on every twentieth; and, in another logical database, ``--small`` streams of
the same shape (10,000), the size the pages are compared with. Then:

1. **The pass against its floor**, on the keyspace holding still (medians of ``--pass-reps`` interleaved
   rounds): the floor is the Redis side of the same facts with nothing else, raw redis-py (``SCAN ...
   TYPE stream`` to the end and, per 1,000 keys, one pipeline of ``XINFO STREAM`` and ``XINFO GROUPS``);
   the family pass (:func:`streams_app.redis_ops.reads.families.families_read`, the families page's
   ``now=1``) with its budget above the key count, so it is complete: within 2x of the floor. Redis's
   own CPU per pass is printed.
2. **The pages at the small size**: ``--small`` streams snapshotted by three ticks in process, then the
   overview, the streams page and the families page as a signed-in viewer (median of ``--reps`` after a
   warm-up), with that connection alone configured.
3. **The live bus at the large size**: nine progress streams in ten get a TTL spread over four times the
   window, a feeder creates new ones as fast as they expire (``--feed`` a second; each expiring in turn),
   and a real Celery worker (concurrency 2) and beat, as ``make run`` starts them (the whole schedule: in family mode the mirror
   sync writes the members only), run ``--ticks`` ticks of the default interval, and on until the first
   family rows are written (in family mode when the rolling pass completes, about keys /
   ``BUSCONSOLE_FAMILY_TICK_KEYS`` ticks in; bounded). Every tick must have its ``SnapshotRun`` and none a
   ``SnapshotSkip``; each run's duration, streams sampled and Redis's own CPU during the run (``INFO
   cpu`` sampled four times a second, the feeder's and expiry's share included: the CPU per second
   outside the runs is printed beside it) are printed.
4. **The pages at the large size**, the same three with that connection alone, against the small size's:
   the overview and the streams page within 2x of their small-size time and under 300 KB; the families
   page under 300 KB; ``/metrics`` (an API token) under 2,100 series.

Family mode (above ``BUSCONSOLE_FAMILY_MODE_KEYS``, 50,000 by default; ``--mode-keys`` sets it for the
worker and the pages) is what keeps a tick's cost with the families and the members that matter. Run
from the repository root: ``.venv/bin/python bench/families.py [--streams 20000 --small 2000
--mode-keys 5000 --ticks 3]`` for a quick run (the default, 1M, takes about ten minutes). It starts its
own redis-server on a free port and a throwaway SQLite database; nothing else is touched. The load average is printed: on a shared machine the
figures mean little without it.
"""

from __future__ import annotations

import argparse
import os
import statistics
import sys
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import django_bench  # noqa: E402
from bench._families_bus import CpuSampler, Feeder, expire_spread, fill  # noqa: E402
from bench._summary import check, within  # noqa: E402
from tests.servers import RedisServer  # noqa: E402

RATIO = 2.0
PAGE_RATIO = 2.0
PAGE_LIMIT = 300 * 1024
MAX_SERIES = 2100
SMALL_DB = 2  # the small size's logical database (db 1 is the console's own Redis)
T0 = datetime(2026, 1, 1, tzinfo=UTC)  # the small size's ticks: months before the window's real ones
PAGES = {"overview": "/", "streams page": "/c/{conn}/streams/", "families page": "/c/{conn}/families/"}


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def floor_read(raw) -> int:
    """The floor (module docstring): every stream's XINFO STREAM and XINFO GROUPS, unparsed."""
    read = 0
    keys: list[bytes] = []

    def flush() -> None:
        nonlocal read
        pipe = raw.pipeline(transaction=False)
        for key in keys:
            pipe.execute_command("XINFO", "STREAM", key)
            pipe.execute_command("XINFO", "GROUPS", key)
        read += len(pipe.execute(raise_on_error=False)) // 2
        keys.clear()

    cursor = None
    while cursor != 0:
        cursor, batch = raw.scan(cursor or 0, count=1000, _type="stream")
        keys += batch
        if len(keys) >= 1000:
            flush()
    if keys:
        flush()
    return read


def redis_cpu_s(raw) -> float:
    cpu = raw.info("cpu")
    return float(cpu["used_cpu_user"]) + float(cpu["used_cpu_sys"])


def pass_against_floor(raw, reps: int) -> None:
    from django.test import override_settings

    from streams_app.redis_ops.reads import families as family_reads

    keys = raw.dbsize()
    times: dict[str, list[float]] = {"floor": [], "pass": []}
    cpu: list[float] = []
    with override_settings(BUSCONSOLE_FAMILY_SCAN_BUDGET=keys * 2 + 10_000):
        for _ in range(reps):
            t = time.perf_counter()
            read = floor_read(raw)
            times["floor"].append(time.perf_counter() - t)
            before = redis_cpu_s(raw)
            t = time.perf_counter()
            found = family_reads.families_read("default")
            times["pass"].append(time.perf_counter() - t)
            cpu.append(redis_cpu_s(raw) - before)
            assert found.complete and found.streams == read, (found.complete, found.streams, read)
    m = {name: statistics.median(values) for name, values in times.items()}
    progress = next(row for row in found.families if row.family.pattern == b"progress:*")
    print(f"  {found.streams:,} streams in {len(found.families)} families; progress:* {progress.keys:,} keys,"
          f" {progress.entries:,} entries; {found.round_trips} round trips a pass", flush=True)
    print(f"  floor (SCAN + XINFO pipelines, unparsed) {m['floor']:.2f} s; family pass {m['pass']:.2f} s;"
          f" Redis CPU per pass {statistics.median(cpu):.2f} s; {load()}", flush=True)
    within(f"family pass, {found.streams:,} streams", m["pass"], m["floor"], RATIO, unit="s")


def only(conn: str, url: str) -> None:
    """The pages and the snapshot see ``conn`` alone (the overview lists every configured connection)."""
    from django.conf import settings

    from streams_app.redis_ops import client as redis_client

    settings.BUS_REDIS_URLS = {conn: url}
    redis_client.reset()


def pages(web, conn: str, reps: int, label: str) -> dict[str, tuple[float, int]]:
    """Median seconds and bytes of each page, after one warm-up request."""
    out = {}
    for name, path in PAGES.items():
        url = path.format(conn=conn)
        assert web.get(url).status_code == 200, url
        times = []
        for _ in range(reps):
            t = time.perf_counter()
            reply = web.get(url)
            times.append(time.perf_counter() - t)
        out[name] = (statistics.median(times), len(reply.content))
        family_mode = b"data-family-mode" in reply.content
        print(f"  {label}: {name} {out[name][0] * 1000:,.0f} ms, {out[name][1] / 1024:,.0f} KB"
              f"{' (family mode)' if family_mode else ''}", flush=True)
    return out


def small_size(server: RedisServer, streams: int, reps: int, web) -> dict[str, tuple[float, int]]:
    import redis

    from streams_app.metrics import snapshots

    url = server.url(SMALL_DB)
    raw = redis.Redis.from_url(url)
    fill(raw, 0, streams)
    only("small", url)
    for n in range(3):
        run = snapshots.snapshot_take(tick=T0 + timedelta(seconds=10 * n))
        print(f"  small size: {raw.dbsize():,} keys, snapshot {run.duration_ms / 1000:.2f} s, {run.streams:,}"
              f" streams sampled", flush=True)
    return pages(web, "small", reps, f"{streams:,} streams")


def live_window(server: RedisServer, args, var_dir: str) -> None:
    """Part 3 of the module docstring: the TTLs, the feeder, the real worker and beat, each tick printed."""
    import redis
    from django.conf import settings
    from django.db import connection
    from django.utils import timezone

    from bench.snapshot import STARTUP_S, Service, services_stop, ticks_skipped, worker_tasks
    from busconsole.locks import console_redis
    from streams_app import tasks
    from streams_app.metrics.models import SnapshotRun, SnapshotSkip
    from streams_app.metrics.snapshots import snapshot_tick_for

    interval = settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S
    step = timedelta(seconds=interval)
    url = server.url(0)
    raw = redis.Redis.from_url(url)
    # The window's length, the first family pass included; the TTLs spread over four times that, so about a
    # fifth of the keys expire during the window, and the feeder replaces them at the rate they expire (each
    # new stream expiring in turn), so the keyspace stays near --streams as a steady progress bus does.
    per_tick = getattr(settings, "BUSCONSOLE_FAMILY_TICK_KEYS", 50_000)
    window_s = (args.ticks + args.streams // per_tick + 3) * interval
    spread_s = 4 * window_s
    feed = args.feed if args.feed is not None else max(10, round(0.9 * args.streams / spread_s))
    expiring = expire_spread(raw, args.streams, base_s=interval, spread_s=spread_s)
    feeder = Feeder(url, first=args.streams, per_s=feed, ttl_s=spread_s // 2)
    cpu = CpuSampler(url)
    cpu.sample()
    only("default", url)
    console_redis().flushdb()  # the broker as a fresh install finds it
    connection.close()
    env = dict(os.environ, BUS_REDIS_URLS=f"default={url}", BUSCONSOLE_FAMILY_MODE_KEYS=str(args.mode_keys))
    print(f"  large size: {raw.dbsize():,} keys, {expiring:,} progress streams expiring within"
          f" {interval}-{interval + spread_s} s, a feeder adding {feed:,}/s; {load()}", flush=True)
    start = snapshot_tick_for(now=timezone.now())
    services: list[Service] = []
    feeder.start()
    cpu.start()
    try:
        services.append(Service("worker", [sys.executable, "-m", "celery", "-A", "busconsole", "worker", "-l",
                                           "info", "--concurrency", "2"], env, Path(var_dir, "worker.log")))
        services.append(Service("beat", [sys.executable, "-m", "celery", "-A", "busconsole", "beat",
                                         "-l", "info", "-s", str(Path(var_dir, "celerybeat-schedule"))],
                                env, Path(var_dir, "beat.log")))

        def wait_run(after: datetime, timeout_s: float) -> datetime | None:
            deadline = time.monotonic() + timeout_s
            while True:
                found = SnapshotRun.objects.filter(tick__gt=after, finished_at__isnull=False).order_by("tick")
                tick = found.values_list("tick", flat=True).first()
                if tick is not None or time.monotonic() > deadline:
                    return tick
                for service in services:
                    if service.process.poll() is not None:
                        raise RuntimeError(f"{service.name} exited with code {service.process.returncode}")
                time.sleep(0.5)

        first = wait_run(start - step, STARTUP_S + 2 * interval)
        if first is None:
            raise RuntimeError(f"no snapshot recorded within {STARTUP_S + 2 * interval:g} s of the start")
        last = first + (args.ticks - 1) * step
        wait_run(last, (last + 2 * step - timezone.now()).total_seconds() + tasks.snapshot_tick.time_limit)
        last = first_family_rows(services, last, interval=interval, keys=raw.dbsize(),
                                 limit_s=tasks.snapshot_tick.time_limit)
    except RuntimeError as exc:
        print(f"  {exc}", flush=True)
        for service in services:
            print(service.tail(), flush=True)
        check(f"every tick recorded, {args.streams:,} streams", f"no window: {exc}", "all", False)
        return
    finally:
        services_stop(services)
        feeder.stop()
        cpu.stop()
    name = f"{args.streams:,} streams"
    runs = list(SnapshotRun.objects.filter(tick__gte=first, tick__lte=last).order_by("tick"))
    skipped = ticks_skipped(SnapshotSkip.objects.values_list("tick", "ticks", "interval_s"), first=first, last=last)
    in_runs = 0.0
    for run in runs:
        took = cpu.between(run.started_at.timestamp(), run.finished_at.timestamp()) if run.finished_at else 0.0
        in_runs += took
        print(f"  tick {run.tick:%H:%M:%S}: took {run.duration_ms / 1000:.2f} s (Redis reads {run.redis_ms / 1000:.2f}"
              f" s), {run.streams:,} streams sampled{', errors' if run.errors else ''}; Redis CPU during the run"
              f" {took:.2f} s", flush=True)
    span = cpu.times[-1] - cpu.times[0]
    busy = sum(r.duration_ms / 1000 for r in runs)
    outside = (cpu.cpu[-1] - cpu.cpu[0] - in_runs) / max(span - busy, 1e-9)
    print(f"  Redis CPU outside the runs (feeder, expiry, the worker's other reads) {outside:.3f} s per s;"
          f" {feeder.created:,} streams fed, {raw.dbsize():,} keys now; {load()}", flush=True)
    print(f"  tasks the worker ran: {worker_tasks(Path(var_dir, 'worker.log'))}", flush=True)
    recorded = [r for r in runs if r.finished_at and not r.errors]
    mean = statistics.mean(r.duration_ms / 1000 for r in runs) if runs else float("inf")
    ticks = round((last - first) / step) + 1
    check(f"every tick recorded, {name}",
          f"{len(recorded)} of {ticks} ticks recorded" + (f", {skipped} skipped" if skipped else "")
          + f"; runs' mean {mean:.2f} s", f"all; mean < {interval} s",
          len(recorded) == ticks and skipped == 0 and mean < interval)


def first_family_rows(services, last: datetime, *, interval: int, keys: int, limit_s: float) -> datetime:
    """In family mode the first family rows are written when the rolling pass completes, about keys /
    ``BUSCONSOLE_FAMILY_TICK_KEYS`` ticks in: the window goes on until then (bounded), so the pages are
    measured as they are in use; returns the window's last tick (every tick up to it is checked)."""
    from django.conf import settings

    from streams_app.metrics.models import FamilySample, SnapshotRun

    if FamilySample.objects.filter(connection="default").exists():
        return last
    per_tick = getattr(settings, "BUSCONSOLE_FAMILY_TICK_KEYS", 50_000)
    deadline = time.monotonic() + (keys // per_tick + 3) * interval + limit_s
    while not FamilySample.objects.filter(connection="default").exists() and time.monotonic() < deadline:
        for service in services:
            if service.process.poll() is not None:
                raise RuntimeError(f"{service.name} exited with code {service.process.returncode}")
        time.sleep(1)
    at = FamilySample.objects.filter(connection="default").order_by("at").values_list("at", flat=True).first()
    print(f"  first family rows: {'at tick ' + format(at, '%H:%M:%S') if at else 'none within the bound'}"
          f" (a pass of about {keys:,} keys at {per_tick:,} a tick)", flush=True)
    newest = SnapshotRun.objects.filter(finished_at__isnull=False).order_by("-tick").values_list("tick", flat=True)
    return max(last, newest.first() or last)


def run(server: RedisServer, args, var_dir: str) -> None:
    import redis
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from streams_app.accounts.tokens import token_create

    raw = redis.Redis.from_url(server.url(0))
    started = time.perf_counter()
    fill(raw, 0, args.streams)
    keys = raw.dbsize()
    print(f"busconsole families benchmark: {args.streams:,} progress streams, {keys:,} keys, filled in"
          f" {time.perf_counter() - started:.1f} s; family mode above {args.mode_keys:,} keys; {load()}", flush=True)
    user = User.objects.create_user("bench")
    user.groups.add(Group.objects.get(name="viewer"))
    web = Client(HTTP_HOST="localhost")
    web.force_login(user)
    token = token_create(user=user, name="bench")[1]
    only("default", server.url(0))
    pass_against_floor(raw, args.pass_reps)
    small = small_size(server, args.small, args.reps, web)
    live_window(server, args, var_dir)
    only("default", server.url(0))
    large = pages(web, "default", args.reps, f"{args.streams:,} streams")
    for name in ("overview", "streams page"):
        within(f"{name} time, {args.streams:,} against {args.small:,} streams", large[name][0] * 1000,
               small[name][0] * 1000, PAGE_RATIO, unit="ms")
    for name in PAGES:
        size = large[name][1]
        check(f"{name} size, {args.streams:,} streams", f"{size / 1024:,.0f} KB", "< 300 KB", size < PAGE_LIMIT)
    metrics = Client(HTTP_HOST="localhost").get("/metrics", HTTP_AUTHORIZATION=f"Bearer {token}")
    assert metrics.status_code == 200, metrics.status_code
    series = sum(1 for line in metrics.content.splitlines() if line and not line.startswith(b"#"))
    check(f"/metrics series, {args.streams:,} streams", f"{series:,}", f"< {MAX_SERIES:,}", series < MAX_SERIES)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=1_000_000)
    parser.add_argument("--small", type=int, default=10_000, help="the size the pages are compared with")
    parser.add_argument("--reps", type=int, default=5, help="requests per page (after a warm-up)")
    parser.add_argument("--pass-reps", type=int, help="rounds of pass and floor (default: 3, 1 from 500k streams)")
    parser.add_argument("--ticks", type=int, default=6, help="ticks of the real worker and beat")
    parser.add_argument("--feed", type=int, help="new progress streams a second (default: the expiry rate)")
    parser.add_argument("--mode-keys", type=int, help="BUSCONSOLE_FAMILY_MODE_KEYS (default: the setting's)")
    args = parser.parse_args()
    if args.pass_reps is None:  # a round at 1M is minutes long: one is its own median
        args.pass_reps = 1 if args.streams >= 500_000 else 3
    if args.mode_keys is not None:
        os.environ["BUSCONSOLE_FAMILY_MODE_KEYS"] = str(args.mode_keys)
    with django_bench(read_only=True) as server:
        from django.conf import settings

        args.mode_keys = settings.BUSCONSOLE_FAMILY_MODE_KEYS
        run(server, args, os.environ["BUSCONSOLE_VAR_DIR"])


if __name__ == "__main__":
    main()
