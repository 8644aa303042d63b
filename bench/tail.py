"""Benchmark: the live tail (SPEC section 8).

Budget: one blocking Redis reader per process and monitored server for all tailed streams; p99
XADD-to-websocket under 50 ms for 100 clients at 200 entries/s on 2 cores; at 500 clients and
1000 entries/s it degrades by batching frames and skipping slow clients ahead, never by unbounded
memory.

Run from the repository root: ``.venv/bin/python bench/tail.py`` (about 2 minutes; ``--seconds`` sets
the measured time per case, 10 by default). It starts its own redis-server, a throwaway SQLite
database with one viewer and a session, and ONE uvicorn process serving ``busconsole.asgi`` exactly as
``make run`` does (``--ws websockets``). Then, for 1, 100 and 500 websocket clients and a feed of 200
and 1000 entries/s:

- a feeder process XADDs at the rate, each entry carrying its send time (``t``, first field);
- client processes hold the websockets (negotiating permessage-deflate, as browsers do) and turn each
  received entry into a latency: receive time minus ``t`` (same machine, same clock);
- in the same run, a bare redis-py ``XREAD BLOCK`` loop on the same stream measures the floor: what
  any reader of Redis sees, with no console in between.
Reported per case: p50/p99/max latency (websocket and bare XREAD), the share of the expected
deliveries (entries x clients) that arrived by the end of the drain time, skip notes received
(``skipped`` frames: a slow client skipped ahead, or the reader jumping to the newest entry when the
process cannot keep up) and the entries they counted, frames per entry (batching), XREAD calls per
second of the console (the bare reader's own taken out), Redis connections of the tail hub and all
connections to the monitored database that are not the benchmark's own, the server process's peak
RSS and CPU, and the client processes' CPU.

The Redis Cluster case (``--cluster yes``, the default; ``only`` runs it alone) starts a 3-primary
cluster as well, and 100 clients tail 100 streams in 100 different slots (``--cluster-clients``,
``--cluster-keys``) while a feeder XADDs 200 entries/s in all, round robin, through a cluster client.
No XREAD may span two slots, so the floor is a bare ``XREAD BLOCK`` per key, each on a connection of its
own to the key's node (the best any reader can see); the hub's connections are bounded by nodes, so
a node's slots are read in one round trip per ``BUSCONSOLE_TAIL_POLL_MS`` (``--poll-ms`` sets it).
Reported: p50/p99/max against the floor, deliveries, the hub's connections per node, XREAD/s and
server CPU while fed and while idle (every client live, nothing written).
Latencies are histogrammed in 10 us bins so half a million deliveries per second cost no memory.
Clients and server share the machine's cores: client-side parsing time is inside the figures.
"""

from __future__ import annotations

import argparse
import asyncio
import json
import math
import multiprocessing as mp
import os
import re
import shutil
import socket
import subprocess
import sys
import tempfile
import time
from array import array
from pathlib import Path
from typing import Any

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from tests.servers import RedisClusterServers, RedisServer, free_port  # noqa: E402

CLIENTS = (1, 100, 500)
RATES = (200, 1000)
WARMUP_S = 1.0
DRAIN_S = 1.5
BIN_US = 10
BINS = 200_000  # 10 us x 200k = 2 s; slower deliveries land in the last bin (reported as ">= 2 s")
BUDGET_MS = 50.0

# Entry frames start {"type":"entry","id":"...","fields":{"t":"<send time>",...}: a regex finds the
# send times without parsing the whole frame (the clients must not be the bottleneck they measure).
SENT = re.compile(rb'"fields":\{"t":"([0-9.]+)"')
SKIPPED = re.compile(rb'"type":"skipped","count":(\d+|null)')
DATA = json.dumps({"order_id": 123456, "customer": "c-42", "total": 99.5, "currency": "EUR",
                   "items": [{"sku": "A-1", "qty": 2}, {"sku": "B-7", "qty": 1}]})


# ------------------------------------------------------------------------------- histograms


def new_hist() -> array:
    return array("q", bytes(8 * BINS))


def record(hist: array, seconds: float) -> None:
    hist[min(BINS - 1, max(0, int(seconds * 1_000_000 / BIN_US)))] += 1


def percentile(hist: array, q: float) -> float | None:
    total = sum(hist)
    if not total:
        return None
    rank, seen = math.ceil(q * total), 0
    for i, n in enumerate(hist):
        seen += n
        if seen >= rank:
            return (i + 1) * BIN_US / 1000  # ms, upper edge of the bin
    return None


def merge(hists: list[array]) -> array:
    out = new_hist()
    for h in hists:
        for i, n in enumerate(h):
            if n:
                out[i] += n
    return out


def max_ms(hist: array) -> float | None:
    for i in range(BINS - 1, -1, -1):
        if hist[i]:
            return (i + 1) * BIN_US / 1000
    return None


# ------------------------------------------------------------------------------ processes


def client_process(urls: list[str], headers: dict[str, str], origin: str, deflate: bool, window: Any, ready: Any,
                   out: Any) -> None:
    """Hold one websocket per URL; histogram every entry received inside the measured window."""

    async def main() -> None:
        from websockets.asyncio.client import connect

        hist = new_hist()
        counts = {"entries": 0, "frames": 0, "skipped": 0, "skip_notes": 0, "clients": 0}
        sockets = []
        gate = asyncio.Semaphore(50)

        async def open_one(url: str) -> Any:
            async with gate:
                ws = await connect(url, origin=origin, additional_headers=headers, proxy=None, max_size=None,
                                   open_timeout=60, ping_interval=None,
                                   compression="deflate" if deflate else None)
                first = await ws.recv()  # {"type": "status", "state": "live"}
                assert b'"live"' in (first if isinstance(first, bytes) else first.encode()), first
                return ws

        sockets = await asyncio.gather(*(open_one(url) for url in urls))
        counts["clients"] = len(sockets)
        ready.put(len(sockets))
        start, end = await asyncio.to_thread(window.get)

        async def read(ws: Any) -> None:
            loop_end = end + DRAIN_S
            while True:
                remaining = loop_end - time.time()
                if remaining <= 0:
                    return
                try:
                    message = await asyncio.wait_for(ws.recv(decode=False), remaining)
                except Exception:  # the window ended (timeout) or the server closed
                    return
                now = time.time()
                in_window = 0
                for sent in SENT.findall(message):
                    t = float(sent)
                    if start <= t < end:
                        record(hist, now - t)
                        in_window += 1
                if in_window:
                    counts["entries"] += in_window
                    counts["frames"] += 1
                for skipped in SKIPPED.findall(message):
                    counts["skip_notes"] += 1
                    counts["skipped"] += 0 if skipped == b"null" else int(skipped)

        cpu0 = time.process_time()
        await asyncio.gather(*(read(ws) for ws in sockets))
        counts["cpu_s"] = time.process_time() - cpu0
        out.put((hist, counts))
        await asyncio.gather(*(ws.close() for ws in sockets), return_exceptions=True)

    asyncio.run(main())


def baseline_process(redis_url: str, key: bytes, window: Any, ready: Any, out: Any) -> None:
    """A bare redis-py XREAD BLOCK reader of the same stream: the latency floor."""
    import redis

    client = redis.Redis.from_url(redis_url, client_name="bench-baseline")
    last = (client.xrevrange(key, count=1) or [(b"0-0", None)])[0][0]
    hist = new_hist()
    ready.put(1)
    start, end = window.get()
    count = calls = 0
    while time.time() < end + DRAIN_S:
        reply = client.xread({key: last}, block=500, count=1000)
        now = time.time()
        calls += start <= now < end
        for _key, entries in reply or ():
            for entry_id, fields in entries:
                last = entry_id
                t = float(fields[b"t"])
                if start <= t < end:
                    record(hist, now - t)
                    count += 1
    out.put((hist, {"entries": count, "xread_calls": calls}))


def feeder_process(redis_url: str, key: bytes, rate: int, start: float, end: float) -> None:
    """XADD ``rate`` entries per second from ``start - WARMUP_S`` to ``end`` on a fixed schedule."""
    import redis

    client = redis.Redis.from_url(redis_url, client_name="bench-feeder")
    interval = 1.0 / rate
    due = start - WARMUP_S
    while due < end:
        delay = due - time.time()
        if delay > 0:
            time.sleep(delay)
        client.xadd(key, {"t": repr(time.time()), "type": "order.created", "data": DATA}, maxlen=100_000,
                    approximate=True)
        due += interval


# ------------------------------------------------------------------------------- the server


def proc_rss_mb(pid: int) -> float:
    with open(f"/proc/{pid}/status") as f:
        for line in f:
            if line.startswith("VmRSS:"):
                return int(line.split()[1]) / 1024
    return 0.0


def proc_cpu_s(pid: int) -> float:
    with open(f"/proc/{pid}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
    return (int(fields[11]) + int(fields[12])) / os.sysconf("SC_CLK_TCK")


def start_web(env: dict[str, str], port: int) -> subprocess.Popen:
    web = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "busconsole.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--ws", "websockets", "--lifespan", "off", "--log-level", "warning"],
        cwd=REPO, env=env,
    )
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return web
        except OSError:
            if web.poll() is not None:
                raise RuntimeError("uvicorn exited") from None
            time.sleep(0.05)
    raise RuntimeError("uvicorn did not start")


def prepare_session() -> dict[str, str]:
    import django
    from django.core.management import call_command

    django.setup()
    call_command("migrate", verbosity=0, interactive=False)
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.test import Client

    user = User.objects.create_user("bench-viewer")
    user.groups.add(Group.objects.get(name="viewer"))
    client = Client()
    client.force_login(user)
    return {"Cookie": f"{settings.SESSION_COOKIE_NAME}={client.cookies[settings.SESSION_COOKIE_NAME].value}"}


# --------------------------------------------------------------------------------- one case


def run_case(server: RedisServer, web: subprocess.Popen, port: int, headers: dict[str, str], clients: int,
             rate: int, seconds: float, deflate: bool) -> dict[str, Any]:
    import redis

    ctx = mp.get_context("spawn")
    key = f"bench:tail:{clients}:{rate}".encode()
    monitor = redis.Redis.from_url(server.url(0), client_name="bench-monitor")
    url = f"ws://127.0.0.1:{port}/ws/c/default/streams/{key.decode().replace(':', '%3A')}/tail/"
    origin = f"http://127.0.0.1:{port}"
    procs = 1 if clients <= 100 else 2
    shares = [clients // procs + (1 if i < clients % procs else 0) for i in range(procs)]
    ready, out = ctx.Queue(), ctx.Queue()
    windows = [ctx.Queue() for _ in range(procs + 1)]
    workers = [ctx.Process(target=client_process, args=([url] * n, headers, origin, deflate, windows[i], ready, out))
               for i, n in enumerate(shares)]
    workers.append(ctx.Process(target=baseline_process, args=(server.url(0), key, windows[-1], ready, out)))
    for w in workers:
        w.start()
    connected = sum(ready.get(timeout=120) for _ in workers) - 1
    assert connected == clients, connected

    start = time.time() + WARMUP_S + 0.5
    end = start + seconds
    for q in windows:
        q.put((start, end))
    feeder = ctx.Process(target=feeder_process, args=(server.url(0), key, rate, start, end))
    feeder.start()

    # Mid-run observations: Redis connections, XREAD calls, the server's memory and CPU.
    time.sleep(max(0.0, start - time.time()))
    xread0 = monitor.info("commandstats").get("cmdstat_xread", {}).get("calls", 0)
    cpu0, rss_max = proc_cpu_s(web.pid), proc_rss_mb(web.pid)
    time.sleep(seconds / 2)
    listing = monitor.client_list()
    tail_conns = sum(1 for c in listing if c["name"].startswith("busconsole-tail"))
    # Every connection to the monitored database that is not the benchmark's own.
    all_conns = sum(1 for c in listing if c["db"] == "0" and not c["name"].startswith("bench-"))
    while time.time() < end:
        rss_max = max(rss_max, proc_rss_mb(web.pid))
        time.sleep(0.25)
    cpu1 = proc_cpu_s(web.pid)
    xread1 = monitor.info("commandstats").get("cmdstat_xread", {}).get("calls", 0)
    feeder.join()

    results = [out.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(30)
    base_hist, base_counts = next((h, c) for h, c in results if "clients" not in c)
    ws_results = [(h, c) for h, c in results if "clients" in c]
    ws_hist = merge([h for h, _ in ws_results])
    totals = {k: sum(c[k] for _, c in ws_results) for k in ("entries", "frames", "skipped", "skip_notes", "cpu_s")}
    produced = base_counts["entries"]
    monitor.close()
    return {
        "clients": clients, "rate": rate,
        "ws_p50": percentile(ws_hist, 0.50), "ws_p99": percentile(ws_hist, 0.99), "ws_max": max_ms(ws_hist),
        "base_p50": percentile(base_hist, 0.50), "base_p99": percentile(base_hist, 0.99),
        "delivered": totals["entries"], "expected": produced * clients, "skipped": totals["skipped"], "skip_notes": totals["skip_notes"],
        "frames_per_entry": totals["frames"] / max(1, totals["entries"]),
        "tail_conns": tail_conns, "redis_conns": all_conns,
        # INFO commandstats is server-wide: the bare reader's own XREADs are taken out.
        "xread_per_s": (xread1 - xread0 - base_counts["xread_calls"]) / seconds,
        "rss_mb": rss_max, "cpu_pct": 100 * (cpu1 - cpu0) / seconds,
        "client_cpu_pct": 100 * totals["cpu_s"] / (seconds + DRAIN_S),
    }


# ------------------------------------------------------------------------------ the cluster case


def cluster_keys(n: int) -> list[bytes]:
    """``n`` keys in ``n`` different hash slots: no two may share an XREAD, and every node gets several."""
    from redis.crc import key_slot

    out: list[bytes] = []
    slots: set[int] = set()
    for i in range(100 * n):
        key = f"bench:tail:cluster:{i}".encode()
        if key_slot(key) not in slots:
            slots.add(key_slot(key))
            out.append(key)
            if len(out) == n:
                break
    return out


def cluster_baseline_process(cluster_url: str, keys: list[bytes], window: Any, ready: Any, out: Any) -> None:
    """The floor on a cluster: a bare ``XREAD BLOCK`` per key, each on a connection of its own to the key's node.

    XREAD cannot span slots, so this is the best any reader can see: one blocked connection per key
    (the console's hub may not do that: its connections are bounded by nodes).
    """
    import redis.asyncio as aioredis
    from redis.cluster import RedisCluster

    sync = RedisCluster.from_url(cluster_url)
    where = {key: sync.get_node_from_key(key) for key in keys}
    last = {key: (sync.xrevrange(key, count=1) or [(b"0-0", None)])[0][0] for key in keys}
    sync.close()

    async def main() -> None:
        hist = new_hist()
        counts = {"entries": 0, "xread_calls": 0}
        ready.put(1)
        start, end = await asyncio.to_thread(window.get)

        async def read(key: bytes) -> None:
            client = aioredis.Redis(host=where[key].host, port=where[key].port, client_name="bench-baseline")
            cursor = last[key]
            try:
                while time.time() < end + DRAIN_S:
                    reply = await client.xread({key: cursor}, block=500, count=1000)
                    now = time.time()
                    counts["xread_calls"] += start <= now < end
                    for _key, entries in reply or ():
                        for entry_id, fields in entries:
                            cursor = entry_id
                            t = float(fields[b"t"])
                            if start <= t < end:
                                record(hist, now - t)
                                counts["entries"] += 1
            finally:
                await client.aclose()

        await asyncio.gather(*(read(key) for key in keys))
        out.put((hist, counts))

    asyncio.run(main())


def cluster_feeder_process(cluster_url: str, keys: list[bytes], rate: int, start: float, end: float) -> None:
    """XADD ``rate`` entries per second in all, round robin over ``keys``, through a cluster client."""
    from redis.cluster import RedisCluster

    client = RedisCluster.from_url(cluster_url, client_name="bench-feeder")
    interval = 1.0 / rate
    due = start - WARMUP_S
    i = 0
    while due < end:
        delay = due - time.time()
        if delay > 0:
            time.sleep(delay)
        client.xadd(keys[i % len(keys)], {"t": repr(time.time()), "type": "order.created", "data": DATA},
                    maxlen=100_000, approximate=True)
        i += 1
        due += interval


def xread_calls(monitors: list[Any]) -> int:
    return sum(m.info("commandstats").get("cmdstat_xread", {}).get("calls", 0) for m in monitors)


def run_cluster_case(cluster: Any, web: subprocess.Popen, port: int, headers: dict[str, str], clients: int,
                     n_keys: int, rate: int, seconds: float, deflate: bool) -> dict[str, Any]:
    """``clients`` websockets over ``n_keys`` streams in as many slots of a 3-primary cluster."""
    from urllib.parse import quote

    import redis

    ctx = mp.get_context("spawn")
    keys = cluster_keys(n_keys)
    monitors = [redis.Redis(port=p, client_name="bench-monitor") for p in cluster.ports]
    origin = f"http://127.0.0.1:{port}"
    urls = [f"ws://127.0.0.1:{port}/ws/c/cluster/streams/{quote(keys[i % n_keys], safe='')}/tail/"
            for i in range(clients)]
    procs = 1 if clients <= 100 else 2
    ready, out = ctx.Queue(), ctx.Queue()
    windows = [ctx.Queue() for _ in range(procs + 1)]
    workers = [ctx.Process(target=client_process, args=(urls[i::procs], headers, origin, deflate, windows[i], ready,
                                                        out)) for i in range(procs)]
    for w in workers:
        w.start()
    connected = sum(ready.get(timeout=180) for _ in workers)
    assert connected == clients, connected

    # Idle: every client live, nothing written. What the multi-slot rounds cost when nothing happens.
    idle_s = 3.0
    xread0, cpu0 = xread_calls(monitors), proc_cpu_s(web.pid)
    time.sleep(idle_s)
    idle_xreads, idle_cpu = xread_calls(monitors) - xread0, proc_cpu_s(web.pid) - cpu0

    baseline = ctx.Process(target=cluster_baseline_process, args=(cluster.url(), keys, windows[-1], ready, out))
    baseline.start()
    ready.get(timeout=120)
    workers.append(baseline)

    start = time.time() + WARMUP_S + 0.5
    end = start + seconds
    for q in windows:
        q.put((start, end))
    feeder = ctx.Process(target=cluster_feeder_process, args=(cluster.url(), keys, rate, start, end))
    feeder.start()

    time.sleep(max(0.0, start - time.time()))
    xread0, cpu0, rss_max = xread_calls(monitors), proc_cpu_s(web.pid), proc_rss_mb(web.pid)
    time.sleep(seconds / 2)
    per_node = [sum(1 for c in m.client_list() if c["name"].startswith("busconsole-tail")) for m in monitors]
    while time.time() < end:
        rss_max = max(rss_max, proc_rss_mb(web.pid))
        time.sleep(0.25)
    cpu1, xread1 = proc_cpu_s(web.pid), xread_calls(monitors)
    feeder.join()

    results = [out.get(timeout=120) for _ in workers]
    for w in workers:
        w.join(30)
    base_hist, base_counts = next((h, c) for h, c in results if "clients" not in c)
    ws_results = [(h, c) for h, c in results if "clients" in c]
    ws_hist = merge([h for h, _ in ws_results])
    totals = {k: sum(c[k] for _, c in ws_results) for k in ("entries", "frames", "skipped", "skip_notes", "cpu_s")}
    per_key = base_counts["entries"] / n_keys  # every key gets the same share of the feed, round robin
    for m in monitors:
        m.close()
    return {
        "clients": clients, "keys": n_keys, "rate": rate,
        "ws_p50": percentile(ws_hist, 0.50), "ws_p99": percentile(ws_hist, 0.99), "ws_max": max_ms(ws_hist),
        "base_p50": percentile(base_hist, 0.50), "base_p99": percentile(base_hist, 0.99),
        "delivered": totals["entries"], "expected": per_key * clients, "skip_notes": totals["skip_notes"],
        "tail_conns": sum(per_node), "tail_conns_max_node": max(per_node), "nodes": len(monitors),
        "xread_per_s": (xread1 - xread0 - base_counts["xread_calls"]) / seconds,
        "idle_xread_per_s": idle_xreads / idle_s, "idle_cpu_pct": 100 * idle_cpu / idle_s,
        "rss_mb": rss_max, "cpu_pct": 100 * (cpu1 - cpu0) / seconds,
    }


def print_cluster(row: dict[str, Any], poll_ms: int) -> None:
    share = row["delivered"] / max(1, row["expected"])
    ratio = row["ws_p99"] / row["base_p99"] if row["ws_p99"] and row["base_p99"] else None
    print(f"\nRedis Cluster ({row['nodes']} primaries): {row['clients']} clients over {row['keys']} streams in "
          f"{row['keys']} slots, {row['rate']} entries/s in all, BUSCONSOLE_TAIL_POLL_MS={poll_ms}")
    print(f"  ws p50 / p99 / max      {fmt(row['ws_p50'])} / {fmt(row['ws_p99'])} / {fmt(row['ws_max'])} ms")
    print(f"  bare XREAD p50 / p99    {fmt(row['base_p50'], '.2f')} / {fmt(row['base_p99'], '.2f')} ms "
          f"(one blocked connection per key)")
    print(f"  ws p99 / bare p99       {fmt(ratio, '.0f')}x")
    print(f"  delivered               {share:.1%} ({row['skip_notes']} skip notes)")
    print(f"  hub Redis connections   {row['tail_conns']} in all, at most {row['tail_conns_max_node']} per node "
          f"(bound: 2 per node = {2 * row['nodes']}; clients: {row['clients']})")
    print(f"  XREAD/s fed / idle      {row['xread_per_s']:.0f} / {row['idle_xread_per_s']:.0f}")
    print(f"  server CPU fed / idle   {row['cpu_pct']:.0f} % / {row['idle_cpu_pct']:.0f} %, RSS {row['rss_mb']:.0f} MB")


def fmt(value: float | None, spec: str = ".1f") -> str:
    return "-" if value is None else format(value, spec)


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per case")
    parser.add_argument("--clients", type=int, nargs="*", default=list(CLIENTS))
    parser.add_argument("--rates", type=int, nargs="*", default=list(RATES))
    parser.add_argument("--no-deflate", action="store_true",
                        help="clients do not offer permessage-deflate (browsers do; this shows its cost)")
    parser.add_argument("--cluster", choices=("yes", "no", "only"), default="yes",
                        help="also (yes), never (no) or only (only) run the Redis Cluster case")
    parser.add_argument("--cluster-clients", type=int, default=100)
    parser.add_argument("--cluster-keys", type=int, default=100, help="streams, each in a slot of its own")
    parser.add_argument("--cluster-rate", type=int, default=200, help="entries/s over all the streams")
    parser.add_argument("--poll-ms", type=int, default=None,
                        help="BUSCONSOLE_TAIL_POLL_MS of the server (default: the setting's default)")
    args = parser.parse_args()
    if args.cluster == "only":
        args.clients = []

    server = RedisServer()
    cluster = RedisClusterServers() if args.cluster != "no" else None
    var_dir = tempfile.mkdtemp(prefix="busconsole-bench-tail-")
    web = None
    started = time.perf_counter()
    try:
        server.start()
        connections = f"default={server.url(0)}"
        if cluster is not None:
            cluster.start()
            connections += f",cluster={cluster.url()}"
        env = {
            **os.environ, "DJANGO_SETTINGS_MODULE": "busconsole.settings", "BUS_REDIS_URL": server.url(0),
            "BUS_REDIS_URLS": connections,
            "REDIS_URL": server.url(1), "BUSCONSOLE_VAR_DIR": var_dir, "DEBUG": "0",
            "SECRET_KEY": "bench-only-" + os.urandom(16).hex(), "ALLOWED_HOSTS": "127.0.0.1",
            "LOG_LEVEL": "WARNING",
        }
        if args.poll_ms is not None:
            env["BUSCONSOLE_TAIL_POLL_MS"] = str(args.poll_ms)
        os.environ.update(env)
        headers = prepare_session()
        port = free_port()
        web = start_web(env, port)
        load = os.getloadavg()[0]
        print(f"tail benchmark: uvicorn pid {web.pid} (--ws websockets), redis-server "
              f"{server.url(0)}, {os.cpu_count()} cores, {args.seconds:.0f} s per case, permessage-deflate "
              f"{'off' if args.no_deflate else 'on'}; "
              f"load average before the run {load:.2f}")
        if load > 0.5:
            print("WARNING: other work is running on this machine: the figures below are pessimistic")
        print()
        header = (f"{'clients':>7} {'rate/s':>6} | {'ws p50':>7} {'ws p99':>7} {'ws max':>7} | {'xread p50':>9} "
                  f"{'p99':>6} | {'delivered':>9} {'skip notes':>10} {'counted':>8} {'frames/entry':>12} | {'tail conns':>10} "
                  f"{'db0 conns':>9} {'XREAD/s':>7} | {'RSS MB':>6} {'CPU %':>5} {'clients CPU %':>13}")
        if args.clients:
            print(header + "\n" + "-" * len(header))
        rows = []
        for clients in args.clients:
            for rate in args.rates:
                row = run_case(server, web, port, headers, clients, rate, args.seconds, not args.no_deflate)
                rows.append(row)
                share = row["delivered"] / max(1, row["expected"])
                print(f"{clients:>7} {rate:>6} | {fmt(row['ws_p50']):>7} {fmt(row['ws_p99']):>7} {fmt(row['ws_max']):>7} "
                      f"| {fmt(row['base_p50'], '.2f'):>9} {fmt(row['base_p99'], '.2f'):>6} | {share:>9.1%} "
                      f"{row['skip_notes']:>10} {row['skipped']:>8} {row['frames_per_entry']:>12.3f} | {row['tail_conns']:>10} "
                      f"{row['redis_conns']:>9} {row['xread_per_s']:>7.0f} | {row['rss_mb']:>6.0f} {row['cpu_pct']:>5.0f} {row['client_cpu_pct']:>13.0f}",
                      flush=True)
        print("\nlatencies in ms, XADD to frame received (ws) or to XREAD reply (bare redis-py reader, same run)")
        for row in rows:
            if row["ws_p99"] is not None and row["base_p99"]:
                print(f"  {row['clients']:>3} clients at {row['rate']:>4}/s: ws p99 / bare XREAD p99 = "
                      f"{row['ws_p99'] / row['base_p99']:.0f}x")
        budget = [r for r in rows if r["clients"] == 100 and r["rate"] == 200]
        tail_ok = all(r["tail_conns"] <= 2 for r in rows)
        if rows:
            print(f"\nRedis connections of the hub: {'at most 2 (reader + control) in every case' if tail_ok else 'MORE THAN 2'}")
        for r in budget:
            verdict = "within" if r["ws_p99"] is not None and r["ws_p99"] < BUDGET_MS else "OVER"
            print(f"budget: p99 {fmt(r['ws_p99'])} ms for 100 clients at 200/s: {verdict} the {BUDGET_MS:.0f} ms budget")
        if cluster is not None:
            from django.conf import settings

            row = run_cluster_case(cluster, web, port, headers, args.cluster_clients, args.cluster_keys,
                                   args.cluster_rate, args.seconds, not args.no_deflate)
            print_cluster(row, args.poll_ms if args.poll_ms is not None else settings.BUSCONSOLE_TAIL_POLL_MS)
    finally:
        if web is not None:
            web.terminate()
            try:
                web.wait(10)
            except subprocess.TimeoutExpired:
                web.kill()
        server.cleanup()
        if cluster is not None:
            cluster.cleanup()
        shutil.rmtree(var_dir, ignore_errors=True)
    print(f"(benchmark ran {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
