"""Benchmark: the console at 100k streams, on SQLite and on PostgreSQL (docs/performance.md#goals-and-floors).

Run from the repository root: ``make bench-scale`` or ``.venv/bin/python bench/scale.py`` (about 15-25
minutes on 2 cores; ``--streams 20000`` for a quick look). It starts a private redis-server on a free
port and fills it once, server-side in bounded Lua batches:

- ``--streams`` stream keys (100,000), 3 entries each, one in a hundred of them an eventbus DLQ
  (``{scale:<i>}:dlq``);
- ``--groups`` consumer groups in all (10,000): ``scale:wide`` has ``--wide-groups`` of them (1,000,
  each with one consumer and one pending entry), ``scale:crowd`` one group ``crowd`` with
  ``--consumers`` consumers (10,000, one pending entry each), the rest one per plain stream;

then, for each database in turn (SQLite in a throwaway file; PostgreSQL from Debian's package, started
by :class:`tests.postgres.PostgresServer` with its default, durable settings), a child process with its
own Django settings measures against that same Redis:

- the beat tasks, called by their names in :mod:`streams_app.tasks` so that whatever they do when this
  runs is measured: ``mirror_sync_all`` (cold: the first full pass, called tick after tick until it is
  complete, since it is done in parts of ``BUSCONSOLE_MIRROR_PASS_KEYS`` streams, the longest part against
  the interval; after 100 streams changed; idle), ``snapshot_tick``
  (``--snapshots`` calls, each started just after a tick boundary the way beat would; the table shows the
  longest run of each call, from its SnapshotRun row, and how many ticks it recorded, catch-ups
  included) and
  ``samples_retention`` on a backlog of ``--retention-ticks`` raw ticks copied to two days ago (one
  minute's raw samples at the default 10 s interval: the rollup and the pruning a retention run does every
  minute in the steady state), then once more (the bench's own recent ticks, rolled up once their minute
  is past the grace); each against its interval from the settings
  (``BUSCONSOLE_SNAPSHOT_INTERVAL_S``, ``BUSCONSOLE_MIRROR_INTERVAL_S``, the retention's beat schedule);
- pages through Django's test client as a logged-in viewer: the streams list (default sort and
  ``?sort=length``), the stream with 1,000 groups, the group with 10,000 consumers, the overview; with
  an API token alone, the API's streams list by length and ``/metrics``. Median time of ``--reps``
  requests after one warm-up, bytes, and for ``/metrics`` the number of series and the process's
  resident memory before and after it.

The load average is printed before each phase: on a shared machine the figures mean little without it.
``--cluster`` then runs the cluster figures (tail p99 over keys in different slots, requeue across vs
within a slot) through ``bench/tail.py --cluster only`` and ``bench/requeue.py --cluster``, each with its
own servers; ``--databases none`` runs those alone. See :func:`cluster_figures`.
"""

from __future__ import annotations

import argparse
import json
import os
import resource
import shutil
import statistics
import subprocess
import sys
import tempfile
import time
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.servers import RedisServer  # noqa: E402

CONN = "default"
WIDE = b"scale:wide"
CROWD = b"scale:crowd"
CROWD_GROUP = b"crowd"
BATCH = 1000  # streams per Lua call: one call blocks Redis for a few ms, never long

# Plain streams scale:<i>, first..first+n-1: 3 entries; a DLQ beside every hundredth; one group 'workers'
# with one consumer and one pending entry on the first `grouped` ones.
FILL_LUA = """
local first, n, grouped = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local made = 0
for i = first, first + n - 1 do
  local key = 'scale:' .. i
  for j = 1, 3 do
    redis.call('XADD', key, '*', 'type', 'order.created', 'data', '{"order_id":' .. (i * 10 + j) .. '}')
  end
  made = made + 1
  if i % 100 == 0 then
    redis.call('XADD', '{' .. key .. '}:dlq', '*', 'type', 'order.created', 'data', '{}', 'error', 'boom')
    made = made + 1
  end
  if i < grouped then
    redis.call('XGROUP', 'CREATE', key, 'workers', '0')
    redis.call('XREADGROUP', 'GROUP', 'workers', 'c1', 'COUNT', 1, 'STREAMS', key, '>')
  end
end
return made
"""

# KEYS[1]: a stream; ARGV: first group or consumer index, how many, mode ('groups' or 'consumers'), group.
WIDE_CROWD_LUA = """
local key, first, n, mode = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), ARGV[3]
for i = first, first + n - 1 do
  if mode == 'groups' then
    local group = 'g' .. i
    redis.call('XGROUP', 'CREATE', key, group, '0')
    redis.call('XREADGROUP', 'GROUP', group, 'c1', 'COUNT', 1, 'STREAMS', key, '>')
  else
    redis.call('XREADGROUP', 'GROUP', ARGV[4], 'consumer-' .. i, 'COUNT', 1, 'STREAMS', key, '>')
  end
end
return n
"""


def load() -> str:
    one, five, fifteen = os.getloadavg()
    return f"load average {one:.2f} {five:.2f} {fifteen:.2f} on {os.cpu_count()} cores"


def fill(server: RedisServer, *, streams: int, groups: int, wide_groups: int, consumers: int) -> dict[str, int]:
    """Fill db 0 of ``server``; returns what Redis itself then counts (keys, groups on the big streams)."""
    import redis

    raw = redis.Redis.from_url(server.url(0))
    plain = streams - 2
    # Every hundredth plain stream brings a DLQ: solve plain + ceil(plain / 100) = streams - 2.
    while plain + (plain + 99) // 100 > streams - 2:
        plain -= 1
    grouped = max(0, groups - wide_groups - 1)
    script = raw.register_script(FILL_LUA)
    for first in range(0, plain, BATCH):
        script(args=[first, min(BATCH, plain - first), grouped])
    pipe = raw.pipeline(transaction=False)
    for key, n in ((WIDE, 3 * wide_groups), (CROWD, consumers)):
        for first in range(0, n, BATCH):  # bounded pipelines
            for j in range(first, min(n, first + BATCH)):
                pipe.xadd(key, {"type": "order.created", "data": f'{{"n":{j}}}'})
            pipe.execute()
    groups_script = raw.register_script(WIDE_CROWD_LUA)
    for first in range(0, wide_groups, BATCH):
        groups_script(keys=[WIDE], args=[first, min(BATCH, wide_groups - first), "groups"])
    raw.xgroup_create(CROWD, CROWD_GROUP, id="0")
    for first in range(0, consumers, BATCH):
        groups_script(keys=[CROWD], args=[first, min(BATCH, consumers - first), "consumers", CROWD_GROUP])
    counted = {
        "keys": raw.dbsize(),
        "wide_groups": len(raw.xinfo_groups(WIDE)),
        "crowd_consumers": raw.xinfo_groups(CROWD)[0]["consumers"],
        "grouped_plain": grouped,
    }
    raw.close()
    return counted


# ------------------------------------------------------------------------------------ child process


def _timed(fn) -> tuple[float, Any]:
    t = time.perf_counter()
    result = fn()
    return time.perf_counter() - t, result


def _wait_for_next_tick(interval_s: int) -> None:
    """Sleep until just after the next multiple of the interval (what ``snapshot_tick_for`` rounds to)."""
    now = time.time()
    time.sleep((interval_s - now % interval_s) + 0.05)


def _backdate_samples(ticks: int, interval_s: int, raw_h: int) -> tuple[datetime, int]:
    """Copy the newest raw tick's samples to ``ticks`` ticks starting on an hour two days back.

    Plain SQL ``INSERT ... SELECT`` (both databases), so the backlog costs seconds to make; returns the
    first backdated tick and the rows made.
    """
    from django.db import connection, transaction

    from streams_app.metrics.models import DlqSample, GroupSample, SnapshotRun, StreamSample

    newest = SnapshotRun.objects.order_by("-tick").values_list("tick", flat=True).first()
    start = (datetime.now(UTC) - timedelta(hours=raw_h + 2)).replace(minute=0, second=0, microsecond=0)
    made = 0
    q = connection.ops.quote_name
    with transaction.atomic(), connection.cursor() as cursor:
        for model in (StreamSample, GroupSample, DlqSample):
            table = q(model._meta.db_table)
            columns = [f.column for f in model._meta.concrete_fields if not f.primary_key]
            names = ", ".join(q(c) for c in columns)
            select = ", ".join("%s" if c == "at" else q(c) for c in columns)
            for i in range(ticks):
                at = connection.ops.adapt_datetimefield_value(start + timedelta(seconds=i * interval_s))
                cursor.execute(
                    f"INSERT INTO {table} ({names}) SELECT {select} FROM {table} WHERE {q('resolution')} = %s"
                    f" AND {q('at')} = %s",
                    [at, "raw", connection.ops.adapt_datetimefield_value(newest)],
                )
                made += cursor.rowcount
    return start, made


def rss_mb() -> float:
    """The process's resident memory now (the peak, ``ru_maxrss``, was set by the snapshots long before)."""
    for line in Path("/proc/self/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) / 1024
    return 0.0


def _page(web, url: str, reps: int, **headers: str) -> dict[str, Any]:
    response = web.get(url, **headers)  # warm-up: caches, the key cache, compiled templates
    times = []
    for _ in range(reps):
        seconds, response = _timed(lambda: web.get(url, **headers))
        times.append(seconds)
    body = response.content
    out = {"status": response.status_code, "ms": statistics.median(times) * 1000, "bytes": len(body)}
    if url == "/metrics":
        out["series"] = sum(1 for line in body.splitlines() if line and not line.startswith(b"#"))
    return out


def child(args: argparse.Namespace) -> int:
    """Measure one database; write the figures as JSON to ``args.out``."""
    from bench._common import setup_django

    setup_django(
        bus_url=f"redis://127.0.0.1:{args.redis_port}/0",
        console_url=f"redis://127.0.0.1:{args.redis_port}/1",
        database_url=args.database_url,
        var_dir=args.var_dir,
    )
    import redis
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.test import Client

    from streams_app import tasks
    from streams_app.accounts.tokens import token_create
    from streams_app.metrics.models import GroupSample, MirrorState, SnapshotRun, StreamSample
    from streams_app.views.links import group_url, stream_url

    redis.Redis.from_url(settings.REDIS_URL).flushdb()  # locks and caches of the previous database's run
    figures: dict[str, Any] = {"database": connection.vendor, "load": {}}
    snap_s = settings.BUSCONSOLE_SNAPSHOT_INTERVAL_S
    mirror_s = settings.BUSCONSOLE_MIRROR_INTERVAL_S
    retention_s = float(settings.CELERY_BEAT_SCHEDULE["metrics-retention"]["schedule"])
    figures["intervals"] = {"snapshot": snap_s, "mirror": mirror_s, "retention": retention_s}
    say = lambda text: print(f"  [{connection.vendor}] {text}", flush=True)  # noqa: E731

    figures["load"]["start"] = load()
    say(figures["load"]["start"])
    runs = []
    parts: list[float] = []  # the first full pass, one part per tick (BUSCONSOLE_MIRROR_PASS_KEYS streams each)
    while not parts or MirrorState.objects.filter(pass_cursor__isnull=False).exists():
        seconds, result = _timed(tasks.mirror_sync_all)
        parts.append(seconds)
        say(f"mirror sync cold, part {len(parts)}: {seconds:.1f} s: {result}")
        if len(parts) >= 1000:
            break
    runs.append({"what": f"cold (first pass, longest of {len(parts)} ticks)", "s": max(parts), "parts_s": parts})
    say(f"mirror sync cold: {len(parts)} part(s), {sum(parts):.1f} s in all, the longest {max(parts):.1f} s")

    ticks = []
    for i in range(args.snapshots):
        _wait_for_next_tick(snap_s)
        known = set(SnapshotRun.objects.values_list("pk", flat=True))
        seconds, run_id = _timed(tasks.snapshot_tick)
        # The task may take more than one tick (a catch-up when its run outlasted the interval): each run's
        # own duration is what has to fit in the interval.
        recorded = list(SnapshotRun.objects.exclude(pk__in=known).order_by("tick").values_list("duration_ms", flat=True))
        ticks.append({"s": seconds, "recorded": run_id is not None, "runs_s": [ms / 1000 for ms in recorded]})
        say(f"snapshot_tick {i + 1}/{args.snapshots}: {seconds:.1f} s, {len(recorded)} tick(s) recorded, "
            f"runs {[ms / 1000 for ms in recorded]} s")
    figures["snapshots"] = ticks

    bus = redis.Redis.from_url(os.environ["BUS_REDIS_URL"])
    pipe = bus.pipeline(transaction=False)
    for i in range(100):  # 100 streams change between two syncs (--streams >= 1000: they exist)
        pipe.xadd(f"scale:{i}", {"type": "order.updated", "data": "{}"})
    pipe.execute()
    seconds, result = _timed(tasks.mirror_sync_all)
    runs.append({"what": "after 100 streams changed", "s": seconds, "result": result})
    say(f"mirror sync after 100 changes {seconds:.1f} s")
    seconds, result = _timed(tasks.mirror_sync_all)
    runs.append({"what": "idle (nothing changed)", "s": seconds, "result": result})
    say(f"mirror sync idle {seconds:.1f} s")
    figures["mirror"] = runs

    figures["load"]["pages"] = load()
    user = User.objects.create_user(username="scale-viewer", password="scale-bench-password-1")
    user.groups.set([Group.objects.get_or_create(name="viewer")[0]])
    web = Client(HTTP_HOST="localhost")
    web.force_login(user)
    token = token_create(user=user, name="scale")[1]
    pages = {
        "streams list": f"/c/{CONN}/streams/",
        "streams list ?sort=length": f"/c/{CONN}/streams/?sort=length",
        f"stream, {args.wide_groups} groups": stream_url(CONN, WIDE),
        f"group, {args.consumers} consumers": group_url(CONN, CROWD, CROWD_GROUP),
        "overview": "/",
    }
    figures["pages"] = {}
    for name, url in pages.items():
        figures["pages"][name] = _page(web, url, args.reps)
        say(f"{name}: {figures['pages'][name]}")
    anonymous = Client(HTTP_HOST="localhost")  # the API and /metrics with the token alone
    bearer = {"HTTP_AUTHORIZATION": f"Bearer {token}"}
    figures["pages"]["API streams ?sort=length"] = _page(anonymous, f"/api/v1/c/{CONN}/streams/?sort=length",
                                                         args.reps, **bearer)
    say(f"API streams ?sort=length: {figures['pages']['API streams ?sort=length']}")
    rss_before = rss_mb()
    figures["pages"]["/metrics"] = _page(anonymous, "/metrics", args.reps, **bearer)
    figures["metrics_rss_mb"] = (rss_before, rss_mb())
    say(f"/metrics: {figures['pages']['/metrics']}, RSS MB before, after: {figures['metrics_rss_mb']}")

    figures["load"]["retention"] = load()
    first, made = _backdate_samples(args.retention_ticks, snap_s, settings.BUSCONSOLE_RETENTION_RAW_H)
    say(f"backdated {made} raw sample rows to {args.retention_ticks} ticks from {first:%Y-%m-%d %H:%M}")
    before = StreamSample.objects.count() + GroupSample.objects.count()
    retention = []
    for what in (f"backlog of {args.retention_ticks} ticks ({made} rows)", "second run"):
        seconds, result = _timed(tasks.samples_retention)
        retention.append({"what": what, "s": seconds, "result": result})
        say(f"retention, {what}: {seconds:.1f} s {result}")
    after = StreamSample.objects.count() + GroupSample.objects.count()
    figures["retention"] = retention
    figures["retention_rows"] = {"backdated": made, "stream+group rows before": before, "after": after}
    figures["max_rss_mb"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
    Path(args.out).write_text(json.dumps(figures, default=str))
    return 0


# ----------------------------------------------------------------------------------------- parent


def measure(database: str, server: RedisServer, args: argparse.Namespace) -> dict[str, Any] | str:
    """Run :func:`child` for one database in its own process; its figures, or why there are none."""
    var_dir = tempfile.mkdtemp(prefix=f"busconsole-scale-{database}-")
    postgres = None
    try:
        if database == "sqlite":
            url = f"sqlite:///{var_dir}/scale.sqlite3"
        else:
            from tests.postgres import PostgresServer, pg_bindir

            try:
                pg_bindir()
            except RuntimeError as exc:  # `make bench` runs this too, on machines without PostgreSQL
                return f"skipped: {exc}"
            postgres = PostgresServer(durable=True).start()
            url = postgres.url()
        out = Path(var_dir, "figures.json")
        argv = [sys.executable, __file__, "--child", "--redis-port", str(server.port), "--database-url", url,
                "--var-dir", var_dir, "--out", str(out), "--snapshots", str(args.snapshots),
                "--retention-ticks", str(args.retention_ticks), "--reps", str(args.reps),
                "--wide-groups", str(args.wide_groups), "--consumers", str(args.consumers)]
        done = subprocess.run(argv, cwd=REPO)
        if done.returncode != 0 or not out.exists():
            return f"the {database} run failed (exit {done.returncode})"
        return json.loads(out.read_text())
    finally:
        if postgres is not None:
            postgres.cleanup()
        shutil.rmtree(var_dir, ignore_errors=True)


def verdict(seconds: float, interval: float) -> str:
    return f"{seconds:7.2f} s / {interval:g} s {'ok' if seconds < interval else 'OVER'}"


def report(results: dict[str, dict[str, Any] | str]) -> None:
    print()
    databases = list(results)
    width = 40
    print(f"{'':{width}}" + "".join(f"{db:>32}" for db in databases))

    def row(label: str, cell) -> None:
        cells = []
        for db in databases:
            figures = results[db]
            if isinstance(figures, str):
                cells.append("-")
                continue
            try:
                cells.append(cell(figures))
            except (KeyError, IndexError, TypeError):
                cells.append("?")
        print(f"{label:{width}}" + "".join(f"{c:>32}" for c in cells))

    def one(figures, key):  # the first database that has figures decides the labels
        return figures[key]

    first = next((f for f in results.values() if not isinstance(f, str)), None)
    if first is None:
        for db, why in results.items():
            print(f"{db}: {why}")
        return
    intervals = first["intervals"]
    for i in range(len(first["snapshots"])):
        row(f"snapshot run {i + 1} (ticks recorded)", lambda f, i=i: verdict(
            max(f["snapshots"][i]["runs_s"] or [f["snapshots"][i]["s"]]), f["intervals"]["snapshot"])
            + f" ({len(f['snapshots'][i]['runs_s'])})")
    for i, run in enumerate(one(first, "mirror")):
        row(f"mirror sync, {run['what']}", lambda f, i=i: verdict(f["mirror"][i]["s"], f["intervals"]["mirror"]))
    for i in range(len(one(first, "retention"))):
        label = "retention, backlog" if i == 0 else "retention, second run"
        row(label, lambda f, i=i: verdict(f["retention"][i]["s"], f["intervals"]["retention"]))
    row("  backdated raw rows", lambda f: f"{f['retention_rows']['backdated']:,}")
    for name in first["pages"]:
        row(f"{name[:width - 1]}", lambda f, name=name: (
            f"{f['pages'][name]['ms']:6.0f} ms {f['pages'][name]['bytes'] / 1024:8.0f} KB"
            + ("" if f["pages"][name]["status"] == 200 else f" HTTP {f['pages'][name]['status']}")))
    row("  /metrics series", lambda f: f"{f['pages']['/metrics'].get('series', 0):,}")
    row("  RSS before -> after /metrics", lambda f: "{:.0f} -> {:.0f} MB".format(*f["metrics_rss_mb"]))
    row("peak RSS of the process", lambda f: f"{f['max_rss_mb']:.0f} MB")
    print()
    print(f"intervals: snapshot {intervals['snapshot']} s, mirror {intervals['mirror']} s, "
          f"retention {intervals['retention']:g} s; budget for pages: 500 ms and 300 KB")
    for db, figures in results.items():
        if isinstance(figures, str):
            print(f"{db}: {figures}")
        else:
            print(f"{db}: " + "; ".join(f"{k}: {v}" for k, v in figures["load"].items()))


def cluster_figures(args: argparse.Namespace) -> int:
    """The cluster figures, from the benches that own them: ``bench/tail.py --cluster`` (p99 of the live
    tail with 100 clients over keys in different slots) and ``bench/requeue.py --cluster`` (requeue
    throughput across slots vs within one slot). Each runs in its own process with its own servers;
    a script that has no ``--cluster`` option yet is reported as such, not run."""
    status = 0
    # tail.py's --cluster takes yes/no/only (only: the cluster case without the standalone ones).
    for script, options in (("tail.py", ["--cluster", "only"]), ("requeue.py", ["--cluster"])):
        path = REPO / "bench" / script
        helped = subprocess.run([sys.executable, str(path), "--help"], cwd=REPO, capture_output=True, text=True)
        if "--cluster" not in helped.stdout:
            print(f"== bench/{script}: no --cluster option yet, cluster figures not measured")
            continue
        print(f"== bench/{script} {' '.join(options)} ({load()})", flush=True)
        status |= subprocess.run([sys.executable, str(path), *options], cwd=REPO).returncode
    return status


def scale_figures(args: argparse.Namespace, databases: list[str]) -> int:
    """Fill a private redis-server once, measure each database against it, print the table."""
    server = RedisServer().start()
    try:
        seconds, counted = _timed(lambda: fill(server, streams=args.streams, groups=args.groups,
                                               wide_groups=args.wide_groups, consumers=args.consumers))
        print(f"filled in {seconds:.0f} s: {counted}", flush=True)
        results = {}
        for database in databases:
            print(f"== {database} ({load()})", flush=True)
            results[database] = measure(database, server, args)
        print(f"\n{counted['keys']:,} streams, {args.groups:,} groups ({args.wide_groups:,} on one stream), "
              f"{args.consumers:,} consumers in one group")
        report(results)
    finally:
        server.cleanup()
    return 0 if all(not isinstance(r, str) or r.startswith("skipped:") for r in results.values()) else 1


def main(argv: list[str] | None = None) -> int:
    # The stream-by-stream tick is what this measures: above BUSCONSOLE_FAMILY_MODE_KEYS (50,000) a server is
    # snapshotted by family (docs/operations.md#stream-families), so the threshold is raised past the sizes
    # (the child processes inherit it).
    os.environ.setdefault("BUSCONSOLE_FAMILY_MODE_KEYS", "100000000")
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--streams", type=int, default=100_000)
    parser.add_argument("--groups", type=int, default=10_000)
    parser.add_argument("--wide-groups", type=int, default=1_000)
    parser.add_argument("--consumers", type=int, default=10_000)
    parser.add_argument("--snapshots", type=int, default=3)
    parser.add_argument("--retention-ticks", type=int, default=6)
    parser.add_argument("--reps", type=int, default=3)
    parser.add_argument("--databases", default="sqlite,postgres",
                        help="comma-separated: sqlite, postgres; none with --cluster for the cluster figures alone")
    parser.add_argument("--cluster", action="store_true", help="also run the cluster figures (see cluster_figures)")
    parser.add_argument("--child", action="store_true", help=argparse.SUPPRESS)
    for hidden in ("--redis-port", "--database-url", "--var-dir", "--out"):
        parser.add_argument(hidden, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.child:
        return child(args)
    if args.streams < 1000 or args.wide_groups + 1 > args.groups:
        parser.error("--streams must be >= 1000 and --groups > --wide-groups")

    started = time.perf_counter()
    print(f"before: {load()}", flush=True)
    databases = [d.strip() for d in args.databases.split(",") if d.strip() not in ("", "none")]
    status = 0
    if databases:
        status = scale_figures(args, databases)
    if args.cluster:
        status |= cluster_figures(args)
    print(f"(benchmark ran {time.perf_counter() - started:.0f} s; after: {load()})")
    return status


if __name__ == "__main__":
    sys.exit(main())
