"""Benchmark: the console over TLS to Redis (docs/performance.md#goals-and-floors: the tail and the entries page over TLS within
1.3x of the same over plain TCP, same run).

One redis-server listens on a plain port and, with ``--tls-port``, on a TLS port that requires client
certificates (``tls-auth-clients yes``, as a managed Redis with mutual TLS does); the certificates are
made by ``openssl`` for the run (``tests/tls/pki.py``). The console reaches the same data both ways, so the
only difference between a figure and its floor is TLS (and its verification) on the console's connection:

- **the entries page** (``bench/browse.py``'s machinery): one page of 50 at the newest and the middle of a
  10k-entry stream, as the JSON API and as the HTML stream page, for two connections of one console,
  ``plain=redis://...`` and ``tls=rediss://...?ssl_ca_certs=...&ssl_certfile=...&ssl_keyfile=...``, timed
  interleaved in shuffled rounds in this process (Django's test client, a logged-in viewer). Goal: the
  median over TLS within 1.3x of the median over plain TCP, for each of the API and the HTML page. The
  connections are pooled: a page pays for TLS's encryption, not for a handshake (the first page of a fresh
  connection, handshake included, is printed beside them);
- **the live tail** (``bench/tail.py``'s clients, bare reader and feeder, one scenario): two uvicorn
  processes, one whose monitored connection is the plain URL and one whose connection is the TLS URL, and
  50 websocket clients on each (raw sockets in processes of their own; 100 in all, the load of
  ``bench/tail.py``'s 100 x 200/s), tailing ONE feed of 200 entries/s at the same time, for ``--rounds`` rounds: both sides see the same entries at the same
  moments on the same machine, so load from elsewhere hits them alike (two runs one after the other on
  this shared machine differed by 1.4x in the bare reader's own p99). The feeder and the bare
  ``XREAD BLOCK`` reader use the plain port, and the channel layer stays on plain TCP: only the tail's
  reader and control connections differ. Goal: the TLS side's p99 XADD-to-frame within 1.3x of the plain
  side's, in the round whose ratio is the median of ``--rounds`` (5; a stall of either process in a round
  makes that round's p99 on its side: every round and the pooled figures are printed), every entry
  delivered to both.

Run from the repository root: ``.venv/bin/python bench/tls.py`` (about 2 minutes; ``--seconds`` per tail
case, 10 by default).
"""

from __future__ import annotations

import argparse
import multiprocessing as mp
import os
import shutil
import statistics
import sys
import tempfile
import time
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import setup_django  # noqa: E402
from bench._summary import check, within  # noqa: E402
from bench.browse import PAGE, entry_id, fill_stream, get_ok, time_interleaved  # noqa: E402
from bench.tail import (  # noqa: E402
    WARMUP_S,
    baseline_process,
    client_process,
    feeder_process,
    max_ms,
    merge,
    percentile,
    prepare_session,
    start_web,
)
from tests.servers import TlsRedisServer  # noqa: E402
from tests.tls.pki import make_pki  # noqa: E402

GOAL = 1.3
STREAM, ENTRIES = "bench:tls:orders", 10_000
WARMUP, REPS = 20, 300  # entries API
HTML_WARMUP, HTML_REPS = 5, 80  # the HTML stream page
TAIL_CLIENTS, TAIL_RATE = 50, 200  # per side: 100 clients in all, as bench/tail.py's 100 x 200/s


def tls_url(server: TlsRedisServer, pki, db: int = 0) -> str:
    return server.tls_url(db, ssl_ca_certs=str(pki.ca), ssl_certfile=str(pki.client.cert),
                          ssl_keyfile=str(pki.client.key))


def median_ms(samples_ns: list[int]) -> float:
    return statistics.median(samples_ns) / 1e6


def entries_pages() -> tuple[float, float, float, float]:
    """(API plain, API TLS, HTML plain, HTML TLS) medians in ms over the two positions; prints per case."""
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from streams_app.redis_ops import client as redis_client

    user = User.objects.create_user("bench-tls")
    user.groups.add(Group.objects.get(name="viewer"))
    web = Client(HTTP_HOST="localhost")
    web.force_login(user)
    seg = quote(STREAM.encode(), safe="")
    positions = {"newest": "", "middle": f"&before={entry_id(ENTRIES // 2)}"}
    api, html = {}, {}
    for conn in ("plain", "tls"):
        for pos, extra in positions.items():
            api_url = f"/api/v1/c/{conn}/streams/{seg}/entries/?count={PAGE}{extra}"
            html_url = f"/c/{conn}/streams/{seg}/?count={PAGE}{extra}"
            if len(get_ok(web, api_url)["entries"]) != PAGE:  # what is timed is what it should be
                raise RuntimeError(f"{api_url}: not {PAGE} entries")
            if "unreachable" in get_ok(web, html_url, json=False).content.decode():
                raise RuntimeError(f"{html_url}: the connection is unreachable")
            api[(conn, pos)] = lambda u=api_url: web.get(u)
            html[(conn, pos)] = lambda u=html_url: web.get(u)

    # The first page of a fresh connection: a TCP connect, and over TLS the handshake and verification.
    fresh = {}
    for conn in ("plain", "tls"):
        samples = []
        for _ in range(20):
            redis_client.reset()
            start = time.perf_counter_ns()
            api[(conn, "newest")]()
            samples.append(time.perf_counter_ns() - start)
        fresh[conn] = median_ms(samples)

    api_times = time_interleaved(api, WARMUP, REPS)
    html_times = time_interleaved(html, HTML_WARMUP, HTML_REPS)
    print(f"\nentries page ({PAGE} of a {ENTRIES:,}-entry stream), server time, median ms over {REPS} (API) "
          f"and {HTML_REPS} (HTML) interleaved rounds:")
    print(f"{'position':>8} | {'API plain':>9} {'API TLS':>8} {'ratio':>6} | {'HTML plain':>10} {'HTML TLS':>8} {'ratio':>6}")
    for pos in positions:
        a0, a1 = median_ms(api_times[("plain", pos)]), median_ms(api_times[("tls", pos)])
        h0, h1 = median_ms(html_times[("plain", pos)]), median_ms(html_times[("tls", pos)])
        print(f"{pos:>8} | {a0:>9.2f} {a1:>8.2f} {a1 / a0:>5.2f}x | {h0:>10.2f} {h1:>8.2f} {h1 / h0:>5.2f}x")
    print(f"first page on a fresh connection (connect included), median of 20: plain {fresh['plain']:.2f} ms, "
          f"TLS {fresh['tls']:.2f} ms")

    def overall(times: dict, conn: str) -> float:
        return median_ms([t for (c, _), samples in times.items() if c == conn for t in samples])

    return overall(api_times, "plain"), overall(api_times, "tls"), overall(html_times, "plain"), overall(html_times, "tls")


def run_pair(server: TlsRedisServer, webs: dict, headers: dict[str, str], seconds: float) -> dict[str, dict]:
    """One feed, tailed at once by TAIL_CLIENTS clients of each web process (plain and TLS) and by the bare
    reader: the same entries, at the same moments, on the same machine. Per side: its latency histogram,
    entries received and expected; ``base``: the bare reader's."""
    import redis

    ctx = mp.get_context("spawn")
    key = b"bench:tls:tail"
    admin = redis.Redis.from_url(server.url(0))
    admin.delete(key)
    admin.close()
    path = f"/ws/c/default/streams/{quote(key, safe='')}/tail/"
    ready = ctx.Queue()
    windows = {kind: ctx.Queue() for kind in (*webs, "base")}
    outs = {kind: ctx.Queue() for kind in (*webs, "base")}
    procs = [
        ctx.Process(target=client_process, args=([f"ws://127.0.0.1:{web.port}{path}"] * TAIL_CLIENTS, headers,
                                                 f"http://127.0.0.1:{web.port}", False, windows[kind], ready,
                                                 outs[kind]))
        for kind, web in webs.items()
    ]
    procs.append(ctx.Process(target=baseline_process, args=(server.url(0), key, windows["base"], ready, outs["base"])))
    for proc in procs:
        proc.start()
    connected = sum(ready.get(timeout=120) for _ in procs) - 1
    assert connected == TAIL_CLIENTS * len(webs), connected
    start = time.time() + WARMUP_S + 0.5
    end = start + seconds
    for window in windows.values():
        window.put((start, end))
    feeder = ctx.Process(target=feeder_process, args=(server.url(0), key, TAIL_RATE, start, end))
    feeder.start()
    feeder.join()
    results = {kind: out.get(timeout=120) for kind, out in outs.items()}
    for proc in procs:
        proc.join(30)
    produced = results["base"][1]["entries"]
    return {kind: {"hist": hist, "entries": counts["entries"],
                   "expected": produced * (TAIL_CLIENTS if kind != "base" else 1)}
            for kind, (hist, counts) in results.items()}


def tail_rounds(server: TlsRedisServer, pki, rounds: int, seconds: float) -> tuple[dict[str, dict], list[dict]]:
    """``rounds`` feeds over a plain and a TLS web process: each side's histograms pooled over the rounds,
    and each round's p99 per side."""
    from django.conf import settings

    headers = prepare_session()  # a session signed with this process's SECRET_KEY: the web processes get it
    webs = {}
    try:
        for kind, url in (("plain", server.url(0)), ("tls", tls_url(server, pki))):
            env = {**os.environ, "BUS_REDIS_URLS": f"default={url}", "DEBUG": "0", "SECRET_KEY": settings.SECRET_KEY,
                   "ALLOWED_HOSTS": "127.0.0.1", "LOG_LEVEL": "WARNING"}
            webs[kind] = start_web(env, deflate=False)
        pooled: dict[str, dict] = {}
        per_round: list[dict] = []
        for number in range(1, rounds + 1):
            sides = run_pair(server, webs, headers, seconds)
            per_round.append({kind: percentile(side["hist"], 0.99) for kind, side in sides.items()})
            parts = []
            for kind, side in sides.items():
                parts.append(f"{kind} p50 {percentile(side['hist'], 0.5):.2f} p99 {percentile(side['hist'], 0.99):.2f} ms")
                total = pooled.setdefault(kind, {"hists": [], "entries": 0, "expected": 0})
                total["hists"].append(side["hist"])
                total["entries"] += side["entries"]
                total["expected"] += side["expected"]
            print(f"round {number}: " + "; ".join(parts), flush=True)
    finally:
        for web in webs.values():
            web.stop()
    for total in pooled.values():
        hist = merge(total.pop("hists"))
        total.update(p50=percentile(hist, 0.5), p99=percentile(hist, 0.99), max=max_ms(hist))
    return pooled, per_round


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--seconds", type=float, default=10.0, help="measured seconds per tail case")
    parser.add_argument("--rounds", type=int, default=5, help="feeds tailed by both sides at once")
    args = parser.parse_args()

    var_dir = tempfile.mkdtemp(prefix="busconsole-bench-tls-")
    started = time.perf_counter()
    pki = make_pki(Path(var_dir) / "pki")
    server = TlsRedisServer(cert=str(pki.server.cert), key=str(pki.server.key), ca=str(pki.ca))
    try:
        server.start()
        setup_django(bus_url=server.url(0), console_url=server.url(1),
                     database_url=f"sqlite:///{var_dir}/bench.sqlite3", var_dir=var_dir,
                     bus_urls=f"plain={server.url(0)},tls={tls_url(server, pki)}")
        import redis

        raw = redis.Redis.from_url(server.url(0))
        fill_stream(raw, STREAM, ENTRIES)
        version = raw.info("server")["redis_version"]
        load = os.getloadavg()[0]
        print(f"TLS benchmark: redis-server {version}, plain port {server.port}, TLS port {server.tls_port} "
              f"(tls-auth-clients yes, EC P-256 certificates), {os.cpu_count()} cores; load average {load:.2f}")
        if load > 0.5:
            print("WARNING: other work is running on this machine: the figures below are noisier")

        api0, api1, html0, html1 = entries_pages()
        within("TLS: entries page API (50 of 10k), median, TLS / plain TCP", api1, api0, GOAL)
        within("TLS: entries page HTML (50 of 10k), median, TLS / plain TCP", html1, html0, GOAL)

        print(f"\nlive tail: {TAIL_CLIENTS} clients on a plain-TCP console and {TAIL_CLIENTS} on a TLS one, tailing "
              f"one feed of {TAIL_RATE} entries/s at once, {args.seconds:.0f} s per round:")
        tail, per_round = tail_rounds(server, pki, args.rounds, args.seconds)
        for kind, side in tail.items():
            print(f"  {kind:>5}: p50 {side['p50']:.2f} ms, p99 {side['p99']:.2f} ms, max {side['max']:.1f} ms, "
                  f"{side['entries']:,} of {side['expected']:,} received (pooled)")
        # The figure is the round whose TLS/plain p99 ratio is the median: one stall of either web process
        # (a 100-200 ms pause, seen here at load averages above 3) makes a whole round's p99 on its side.
        ratios = sorted(per_round, key=lambda r: r["tls"] / r["plain"])
        middle = ratios[len(ratios) // 2]
        listed = ", ".join(f"{r['tls'] / r['plain']:.2f}x" for r in per_round)
        print(f"  p99 ratios per round: {listed}; pooled {tail['tls']['p99'] / tail['plain']['p99']:.2f}x")
        within(f"TLS: tail p99, {TAIL_CLIENTS} + {TAIL_CLIENTS} clients x {TAIL_RATE}/s, TLS / plain TCP (median of "
               f"{args.rounds} rounds)", middle["tls"], middle["plain"], GOAL)
        delivered = all(side["entries"] == side["expected"] for side in tail.values())
        check("TLS: tail delivers every entry, plain and TLS", "all" if delivered else "some missing",
              "all delivered", delivered)
        raw.close()
    finally:
        server.cleanup()
        shutil.rmtree(var_dir, ignore_errors=True)
    print(f"(benchmark ran {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
