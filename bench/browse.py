"""Benchmark: browsing a big bus (docs/performance.md#goals-and-floors).

Goals, each reported as one row of ``make bench``'s table (``bench/_summary.py``):
- one entries page (50) at the newest, middle and oldest positions of a 1M-entry stream, and jumped to
  by date-time, costs within 1.5x of the same page of a 10k-entry stream (the API request, medians);
- never a full scan: one XREVRANGE per page at every depth (``INFO commandstats``);
- the HTML entries page within 1.5x of its API: the stream page with 50 entries against
  ``GET .../entries/?count=50`` of the same position, timed interleaved (the worst position of the
  1M stream is the row);
- the stream list, 10k streams: a page from the same number of round trips as with 1k streams (counted
  client-side, by wrapping redis-py's ``send_packed_command``: a pipeline is one send), and the HTML
  page under 300 KB.

Run from the repository root: ``.venv/bin/python bench/browse.py`` (about two minutes; ``--big 200000``
for a quicker run, which the row names then say). It starts its own redis-server on a free port and a
throwaway SQLite database; nothing else is touched.

What is timed ("server time": the whole request inside the process, no network or HTTP parsing):
- the real request path: the Django view through ``django.test.Client`` with a logged-in viewer
  (middleware, session, form validation, access layer, payload decoding, JSON or template);
- the access-layer call ``entry_reads.entries_page`` alone;
- Redis's own time per XREVRANGE, from ``INFO commandstats`` (usec_per_call).
Cases are measured interleaved, round by round in a shuffled order, so drift on the machine hits them
alike. Commands are counted by ``INFO commandstats`` deltas around one request, read on a database of
their own so that the reads are not counted as the console's round trips.
"""

from __future__ import annotations

import argparse
import math
import os
import random
import statistics
import sys
import time
from collections import Counter
from collections.abc import Callable
from datetime import UTC, datetime
from pathlib import Path
from urllib.parse import quote

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import django_bench  # noqa: E402
from bench._summary import check, within  # noqa: E402
from tests.servers import RedisServer  # noqa: E402

CONN = "default"
PAGE = 50
SMALL, BIG = 10_000, 1_000_000
N_LIST_STREAMS, N_LIST_FEW = 10_000, 1_000
T0_MS = 1_767_225_600_000  # 2026-01-01T00:00:00Z: IDs are computed, not read back
PER_MS = 3  # entries per millisecond: entry i has ID (T0_MS + i // PER_MS)-(i % PER_MS)
FILL_CHUNK = 10_000
BUDGET_RATIO = 1.5  # 1M-entry page over the 10k-entry page
HTML_RATIO = 1.5  # the HTML entries page over its API
PAGE_KB = 300  # the stream list page

WARMUP, REPS = 20, 200  # entries API and access layer
HTML_WARMUP, HTML_REPS = 5, 60  # the HTML stream page
LIST_WARMUP, LIST_REPS = 5, 50  # stream list pages
SORT_WARMUP, SORT_REPS = 3, 20  # ?sort=length (scans and XLENs every stream)
REDIS_PASSES, REDIS_CALLS = 15, 50  # Redis's own time per XREVRANGE: passes per case, calls per pass

# Server-side fill: one EVAL adds FILL_CHUNK entries with explicit IDs and realistic fields
# (an order event: type, JSON data of ~170 bytes, a trace id).
FILL_LUA = """
local key, first, n, t0, per_ms = KEYS[1], tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3]), tonumber(ARGV[4])
local types = {"order.created", "order.paid", "order.shipped", "payment.refunded"}
for i = first, first + n - 1 do
  local kind = types[(i % 4) + 1]
  local data = string.format(
    '{"order_id":"ord-%08d","customer_id":"cus-%06d","amount_cents":%d,"currency":"EUR",' ..
    '"items":%d,"region":"eu-west-1","status":"%s","source":"checkout-api"}',
    i, (i * 7919) % 1000000, (i * 37) % 100000 + 100, i % 9 + 1, kind)
  redis.call("XADD", key, string.format("%d-%d", t0 + math.floor(i / per_ms), i % per_ms),
    "type", kind, "data", data, "trace_id", string.format("%08x%08x", (i * 2654435761) % 4294967296, i))
end
return n
"""


def entry_id(i: int) -> str:
    """The ID the fill script gives entry number ``i`` (0 is the oldest)."""
    return f"{T0_MS + i // PER_MS}-{i % PER_MS}"


def iso_of(i: int) -> str:
    return datetime.fromtimestamp((T0_MS + i // PER_MS) / 1000, tz=UTC).isoformat().replace("+00:00", "Z")


# ---------------------------------------------------------------- measuring


class RoundTrips:
    """Counts what redis-py sends: one count per command sent alone, one per pipeline."""

    def __init__(self) -> None:
        import redis.connection

        self.counts: Counter[tuple[int, int]] = Counter()  # (port, db) -> sends
        self.on = False
        original = redis.connection.AbstractConnection.send_packed_command
        counter = self

        def counted(conn, command, check_health=True):
            if counter.on:
                counter.counts[(conn.port, conn.db)] += 1
            return original(conn, command, check_health)

        redis.connection.AbstractConnection.send_packed_command = counted

    def __enter__(self) -> RoundTrips:
        self.counts.clear()
        self.on = True
        return self

    def __exit__(self, *exc) -> None:
        self.on = False


def commandstats(raw) -> dict[str, tuple[int, float]]:
    """Command name -> (calls, usec) from INFO commandstats (``xinfo|stream`` for subcommands)."""
    out = {}
    for name, stats in raw.info("commandstats").items():
        out[name.removeprefix("cmdstat_")] = (int(stats["calls"]), float(stats["usec"]))
    return out


def command_delta(client, action: Callable[[], object]) -> tuple[Counter[str], object]:
    """The commands Redis ran while ``action`` ran (server-wide), and what ``action`` returned."""
    before = commandstats(client)
    result = action()
    after = commandstats(client)
    delta = Counter({k: v[0] - before.get(k, (0, 0.0))[0] for k, v in after.items()})
    delta["info"] -= 1  # the INFO that took ``before``
    return +delta, result


def stats_ms(samples_ns: list[int]) -> tuple[float, float]:
    ordered = sorted(samples_ns)
    p95 = ordered[max(0, math.ceil(0.95 * len(ordered)) - 1)]
    return statistics.median(ordered) / 1e6, p95 / 1e6


def time_interleaved(cases: dict[str, Callable[[], object]], warmup: int, reps: int) -> dict[str, list[int]]:
    """Each case ``reps`` times, every round in a fresh shuffled order; warm-ups are not kept."""
    rng = random.Random(42)
    names = list(cases)
    samples: dict[str, list[int]] = {n: [] for n in names}
    for round_no in range(warmup + reps):
        rng.shuffle(names)
        for name in names:
            start = time.perf_counter_ns()
            cases[name]()
            elapsed = time.perf_counter_ns() - start
            if round_no >= warmup:
                samples[name].append(elapsed)
    return samples


def time_one(action: Callable[[], object], warmup: int, reps: int) -> list[int]:
    return time_interleaved({"x": action}, warmup, reps)["x"]


def get_ok(client, url: str, *, json: bool = True):
    response = client.get(url)
    if response.status_code != 200:
        raise RuntimeError(f"GET {url} -> {response.status_code}: {response.content[:300]!r}")
    return response.json() if json else response


# ---------------------------------------------------------------- building data


def fill_stream(raw, key: str, n: int) -> float:
    start = time.perf_counter()
    script = raw.register_script(FILL_LUA)
    for first in range(0, n, FILL_CHUNK):
        script(keys=[key], args=[first, min(FILL_CHUNK, n - first), T0_MS, PER_MS])
    elapsed = time.perf_counter() - start
    if raw.xlen(key) != n:
        raise RuntimeError(f"{key}: XLEN {raw.xlen(key)} != {n}")
    for i in (0, n // 2, n - 1):  # the computed IDs are the stored ones
        if not raw.xrange(key, entry_id(i), entry_id(i), count=1):
            raise RuntimeError(f"{key}: entry {i} is not at {entry_id(i)}")
    return elapsed


def fill_many_streams(raw, n: int, start_at: int = 0) -> tuple[float, int]:
    """Streams number ``start_at`` to ``n - 1``: 1-20 entries each, every tenth with a consumer group and
    pending entries."""
    start = time.perf_counter()
    services = ["orders", "payments", "shipping", "billing", "users", "inventory", "search", "mail"]
    total = 0
    for first in range(start_at, n, 2000):
        pipe = raw.pipeline(transaction=False)
        for i in range(first, min(first + 2000, n)):
            key = f"{services[i % len(services)]}:events:{i:05d}"
            length = 1 + (i * 7919) % 20
            total += length
            for j in range(length):
                pipe.xadd(key, {"type": "tick", "data": f'{{"n":{j},"stream":{i}}}'})
            if i % 10 == 0:
                pipe.xgroup_create(key, "workers", id="0")
                pipe.xreadgroup("workers", "w1", {key: ">"}, count=2)
        pipe.execute()
    return time.perf_counter() - start, total


# ---------------------------------------------------------------- the benchmark


def run(server: RedisServer, big: int) -> None:
    import redis
    from django.contrib.auth.models import Group, User
    from django.db import connection
    from django.test import Client
    from django.test.utils import CaptureQueriesContext

    from streams_app.redis_ops.reads import entries as entry_reads
    from streams_app.redis_ops.reads import streams as stream_reads

    trips = RoundTrips()
    raw = redis.Redis.from_url(server.url(0))
    # INFO commandstats is server-wide: read it on a db of its own so its sends are not counted as
    # round trips of the console (those are counted on db 0 only).
    stats_client = redis.Redis.from_url(server.url(15))
    version = raw.info("server")["redis_version"]

    user = User.objects.create_user("bench")
    user.groups.add(Group.objects.get(name="viewer"))
    from streams_app.perf.heap import freeze_startup

    freeze_startup()  # as the web process does at the end of busconsole/asgi.py
    web = Client(HTTP_HOST="localhost")
    web.force_login(user)

    print(
        f"busconsole browse benchmark: redis-server {version} on 127.0.0.1:{server.port}, "
        f"{os.cpu_count()} CPUs, Python {sys.version.split()[0]}, DEBUG=1, SQLite sessions"
    )

    big_label = "1M" if big == BIG else f"{big:,}"
    streams = {"10k": ("bench:orders:10k", SMALL), big_label: ("bench:orders:big", big)}
    for key, n in streams.values():
        seconds = fill_stream(raw, key, n)
        print(
            f"filled {key}: {n:,} entries in {seconds:.1f} s ({n / seconds:,.0f} entries/s), "
            f"MEMORY USAGE {raw.memory_usage(key, samples=0) / 1e6:.1f} MB"
        )

    # Positions: desc pages (newest first) that start just below an entry at that depth.
    def positions(n: int) -> dict[str, dict[str, str]]:
        return {
            "newest": {},
            "middle": {"before": entry_id(n // 2)},
            "oldest": {"before": entry_id(PAGE)},  # the last page: the 50 oldest entries
        }

    def expected_first(n: int, pos: str) -> str:
        return {"newest": entry_id(n - 1), "middle": entry_id(n // 2 - 1), "oldest": entry_id(PAGE - 1)}[pos]

    # ---- entries: correctness of what is timed, and what one page costs Redis
    api_cases, layer_cases, html_cases = {}, {}, {}
    for label, (key, n) in streams.items():
        seg, key_bytes = quote(key.encode(), safe=""), key.encode()
        for pos, params in positions(n).items():
            query = "&".join(f"{k}={v}" for k, v in {"count": PAGE, **params}.items())
            api_url = f"/api/v1/c/{CONN}/streams/{seg}/entries/?{query}"
            html_url = f"/c/{CONN}/streams/{seg}/?{query}"
            body = get_ok(web, api_url)
            ids = [e["id"] for e in body["entries"]]
            if len(ids) != PAGE or ids[0] != expected_first(n, pos):
                raise RuntimeError(
                    f"{api_url}: {len(ids)} entries from {ids[:1]}, expected {expected_first(n, pos)}"
                )
            if (body["next"] is None) != (pos == "oldest"):
                raise RuntimeError(f"{api_url}: next={body['next']!r}")
            get_ok(web, html_url, json=False)
            case = (pos, label)
            api_cases[case] = lambda u=api_url: web.get(u)
            html_cases[case] = lambda u=html_url: web.get(u)
            layer_cases[case] = lambda k=key_bytes, p=params: entry_reads.entries_page(CONN, k, count=PAGE, mask=None, **p)

    # "at" (jump to a date-time) in the middle: parsed, then one XREVRANGE from that millisecond.
    for label, (key, n) in streams.items():
        seg = quote(key.encode(), safe="")
        url = f"/api/v1/c/{CONN}/streams/{seg}/entries/?count={PAGE}&at={quote(iso_of(n // 2))}"
        body = get_ok(web, url)
        if len(body["entries"]) != PAGE:
            raise RuntimeError(f"{url}: {len(body['entries'])} entries")
        api_cases[("middle at=ISO", label)] = lambda u=url: web.get(u)

    # Redis's own time: commandstats are server-wide totals, so each case runs alone for a short
    # pass; passes are interleaved in shuffled rounds and the median pass is kept.
    redis_cost: dict[tuple[str, str], tuple[float, Counter[str], int]] = {}
    per_pass: dict[tuple[str, str], list[float]] = {case: [] for case in layer_cases}
    commands: dict[tuple[str, str], Counter[str]] = {}
    rng, order = random.Random(7), list(layer_cases)
    for _ in range(REDIS_PASSES):
        rng.shuffle(order)
        for case in order:
            stats_client.config_resetstat()
            for _ in range(REDIS_CALLS):
                layer_cases[case]()
            stats = commandstats(stats_client)
            calls, usec = stats.get("xrevrange", (0, 0.0))
            per_pass[case].append(usec / calls if calls else float("nan"))
            commands[case] = Counter(
                {k: round(v[0] / REDIS_CALLS, 2) for k, v in stats.items() if k != "config|resetstat"}
            )
    for case, call in layer_cases.items():
        with trips:
            call()
        redis_cost[case] = (statistics.median(per_pass[case]), commands[case], trips.counts[(server.port, 0)])

    # What one request costs beside its time (load does not disturb these): the console's SQL queries
    # and its round trips to the bus, for the HTML page and its API at the newest position.
    newest = ("newest", big_label)
    request_cost = {}
    for side, call in (("HTML", html_cases[newest]), ("API", api_cases[newest])):
        with CaptureQueriesContext(connection) as queries, trips:
            call()
        request_cost[side] = (len(queries), trips.counts[(server.port, 0)])

    api = time_interleaved(api_cases, WARMUP, REPS)
    layer = time_interleaved(layer_cases, WARMUP, REPS)
    # The HTML page and its API, same positions, interleaved with each other: their ratio is a goal.
    load_before = os.getloadavg()[0]
    pair = time_interleaved(
        {
            **{("html", *c): f for c, f in html_cases.items()},
            **{("api", *c): api_cases[c] for c in html_cases},
        },
        HTML_WARMUP,
        HTML_REPS,
    )
    html = {case: pair[("html", *case)] for case in html_cases}
    load_after = os.getloadavg()[0]

    print()
    print(
        f"ENTRIES PAGE (count={PAGE}, newest first): server time in ms, median / p95 "
        f"({REPS} runs after {WARMUP} warm-ups; HTML {HTML_REPS} after {HTML_WARMUP}, interleaved with its API)"
    )
    header = (
        f"{'position':<14} {'stream':<9} {'API med':>8} {'API p95':>8} {'layer med':>9} {'layer p95':>9} "
        f"{'HTML med':>8} {'HTML p95':>8} {'HTML/API':>8} {'redis us/XREVRANGE':>18} {'cmds/page':>18} {'trips':>5}"
    )
    print(
        f"load average (1 min) {load_before:.1f} before the HTML/API runs, {load_after:.1f} after, on "
        f"{os.cpu_count()} CPUs; one request, newest of {big_label}: "
        + ", ".join(
            f"{side} {n_sql} SQL queries and {n_trips} round trips"
            for side, (n_sql, n_trips) in request_cost.items()
        )
    )
    print(header)
    print("-" * len(header))
    medians: dict[tuple[str, str, str], float] = {}
    for pos in ("newest", "middle", "oldest", "middle at=ISO"):
        for label in streams:
            case = (pos, label)
            a_med, a_p95 = stats_ms(api[case])
            medians[("api", pos, label)] = a_med
            cells = f"{a_med:8.3f} {a_p95:8.3f}"
            if case in layer:
                l_med, l_p95 = stats_ms(layer[case])
                h_med, h_p95 = stats_ms(html[case])
                paired_api, _ = stats_ms(pair[("api", *case)])
                medians[("layer", pos, label)] = l_med
                medians[("html", pos, label)] = h_med
                medians[("paired api", pos, label)] = paired_api
                us, per_call, n_trips = redis_cost[case]
                medians[("redis", pos, label)] = us
                cmds = " ".join(f"{k}={v:g}" for k, v in sorted(per_call.items()))
                cells += (
                    f" {l_med:9.3f} {l_p95:9.3f} {h_med:8.3f} {h_p95:8.3f} {h_med / paired_api:7.2f}x"
                    f" {us:18.1f} {cmds:>18} {n_trips:5d}"
                )
            print(f"{pos:<14} {label:<9} {cells}")
    print()
    print(f"RATIO {big_label} / 10k (medians; goal <= {BUDGET_RATIO}x on the API)")
    print(f"{'position':<14} {'API':>7} {'layer':>7} {'HTML':>7} {'redis':>7}")
    for pos in ("newest", "middle", "oldest", "middle at=ISO"):
        cells = " ".join(
            f"{medians[(w, pos, big_label)] / medians[(w, pos, '10k')]:6.2f}x"
            if (w, pos, "10k") in medians
            else f"{'-':>7}"
            for w in ("api", "layer", "html", "redis")
        )
        print(f"{pos:<14} {cells}")
    print()
    for pos in ("newest", "middle", "oldest", "middle at=ISO"):
        within(
            f"entries page (50) at {pos}, {big_label} vs 10k entries, API",
            medians[("api", pos, big_label)],
            medians[("api", pos, "10k")],
            BUDGET_RATIO,
        )
    # Never a full scan: a page is one XREVRANGE and nothing that walks the stream, at every depth.
    walks = {"xrange", "xrevrange", "xlen", "scan", "xinfo|stream"}
    per_page = {case: sum(v for k, v in redis_cost[case][1].items() if k in walks) for case in layer_cases}
    worst_case = max(per_page, key=per_page.get)
    check(
        "entries page: stream reads per page, any depth",
        f"{per_page[worst_case]:g} ({' '.join(worst_case)})",
        "1 XREVRANGE",
        all(v == 1 for v in per_page.values())
        and all(redis_cost[c][1].get("xrevrange") == 1 for c in layer_cases),
    )
    html_ratio = {
        pos: medians[("html", pos, big_label)] / medians[("paired api", pos, big_label)]
        for pos in ("newest", "middle", "oldest")
    }
    worst = max(html_ratio, key=html_ratio.get)
    within(
        f"HTML entries page vs its API ({big_label} entries, {worst}: worst position)",
        medians[("html", worst, big_label)],
        medians[("paired api", worst, big_label)],
        HTML_RATIO,
    )

    # ---- the stream list: first over a few streams, then over 10k
    raw.delete(*[key for key, _ in streams.values()])  # keep the list about the small streams
    api_list = f"/api/v1/c/{CONN}/streams/?count={PAGE}"
    html_list = f"/c/{CONN}/streams/"
    first_pages = {"API first page": (api_list, True), "HTML first page": (html_list, False)}

    def round_trips() -> dict[str, int]:
        """Round trips of one request in the steady state: right after the same request, so that the
        connection's health (``INFO server``, cached a few seconds per process) is not counted."""
        out = {}
        for name, (url, is_json) in first_pages.items():
            get_ok(web, url, json=is_json)
            with trips:
                get_ok(web, url, json=is_json)
            out[name] = trips.counts[(server.port, 0)]
        return out

    seconds, total = fill_many_streams(raw, N_LIST_FEW)
    print()
    print(f"filled {N_LIST_FEW:,} streams ({total:,} entries) in {seconds:.1f} s")
    trips_few = round_trips()
    seconds, total = fill_many_streams(raw, N_LIST_STREAMS, start_at=N_LIST_FEW)
    print(
        f"filled {N_LIST_STREAMS - N_LIST_FEW:,} more streams ({total:,} entries, groups on every tenth) "
        f"in {seconds:.1f} s"
    )
    trips_many = round_trips()
    print(
        f"round trips to the bus for one page: {trips_few} with {N_LIST_FEW:,} streams, "
        f"{trips_many} with {N_LIST_STREAMS:,}"
    )

    # One full pass through the API pages: every stream seen once, cost of every page.
    seen: list[str] = []
    page_trips, page_scans, page_sizes, cursors = [], [], [], []
    cursor = None
    while True:
        url = api_list + (f"&cursor={cursor}" if cursor else "")
        with trips:
            delta, body = command_delta(stats_client, lambda u=url: get_ok(web, u))
        page_trips.append(trips.counts[(server.port, 0)])
        page_scans.append(delta["scan"])
        page_sizes.append(len(body["streams"]))
        seen.extend(s["key"] for s in body["streams"])
        cursor = body["next_cursor"]
        if not cursor:
            break
        cursors.append(cursor)
    unique = len(set(seen))
    print(
        f"full pass over the API pages (count={PAGE}): {len(page_sizes)} pages, {len(seen):,} rows, "
        f"{unique:,} distinct streams (of {N_LIST_STREAMS:,}); streams per page min/median/max "
        f"{min(page_sizes)}/{statistics.median(page_sizes):g}/{max(page_sizes)}; round trips per page max "
        f"{max(page_trips)}; SCAN calls per page max {max(page_scans)}"
    )

    later = cursors[len(cursors) // 2]
    list_cases = {
        "API first page": f"{api_list}",
        "API later page (cursor)": f"{api_list}&cursor={later}",
        "HTML first page": f"{html_list}",
        "HTML later page (cursor)": f"{html_list}?cursor={later}",
        "API ?sort=length": f"{api_list}&sort=length",
        "API ?sort=length&offset=5000": f"{api_list}&sort=length&offset=5000",
        "HTML ?sort=length": f"{html_list}?sort=length",
    }
    layer_list = {
        "layer streams_scan first page": lambda: stream_reads.streams_scan(CONN, count=PAGE),
        "layer streams_by_length": lambda: stream_reads.streams_by_length(CONN, count=PAGE),
    }
    print()
    print(
        f"STREAM LIST over {N_LIST_STREAMS:,} streams: server time in ms ({LIST_REPS} runs after {LIST_WARMUP} "
        f"warm-ups; sort=length {SORT_REPS} after {SORT_WARMUP}); Redis cost of one request"
    )
    header = (
        f"{'request':<31} {'median':>8} {'p95':>8} {'rows':>5} {'trips':>5} {'SCANs':>5} {'cmds':>6} "
        f"{'KB':>6}  commands"
    )
    print(header)
    print("-" * (len(header) + 30))
    html_sizes: dict[str, int] = {}
    for name, target in {**list_cases, **layer_list}.items():
        if callable(target):
            action = target
        else:
            is_json = name.startswith("API")
            action = lambda u=target, j=is_json: get_ok(web, u, json=j)  # noqa: E731
        with trips:
            delta, result = command_delta(stats_client, action)
        size = 0
        if isinstance(result, dict):
            rows = len(result["streams"])
        elif hasattr(result, "streams"):
            rows = len(result.streams)
        elif isinstance(result, tuple):
            rows = len(result[0])
        else:
            rows = result.content.count(b"<tr") - 1  # type: ignore[attr-defined]  # the page response: the last kind command_delta returns  # minus the header row
            size = len(result.content)  # type: ignore[attr-defined]  # the page response: the last kind command_delta returns
            html_sizes[name] = size
        n_trips = trips.counts[(server.port, 0)]
        heavy = "sort" in name or "length" in name
        samples = time_one(action, SORT_WARMUP if heavy else LIST_WARMUP, SORT_REPS if heavy else LIST_REPS)
        med, p95 = stats_ms(samples)
        cmds = ", ".join(f"{k}={v}" for k, v in sorted(delta.items(), key=lambda kv: -kv[1]))
        print(
            f"{name:<31} {med:8.2f} {p95:8.2f} {rows:5d} {n_trips:5d} {delta['scan']:5d} "
            f"{sum(delta.values()):6d} {size / 1024:6.1f}  {cmds}"
        )

    print()
    check(
        f"stream list: full pass over the API pages sees every stream ({N_LIST_STREAMS:,})",
        f"{unique:,} distinct",
        f"{N_LIST_STREAMS:,}",
        unique == N_LIST_STREAMS,
    )
    for name in first_pages:
        check(
            f"stream list {name}: round trips, {N_LIST_STREAMS // 1000}k streams vs {N_LIST_FEW // 1000}k",
            f"{trips_many[name]}",
            "the same",
            trips_many[name] == trips_few[name],
            floor=f"{trips_few[name]}",
        )
    biggest = max(html_sizes, key=html_sizes.get)
    check(
        f"stream list HTML page size, {N_LIST_STREAMS // 1000}k streams (largest: {biggest})",
        f"{html_sizes[biggest] / 1024:.0f} KB",
        f"< {PAGE_KB} KB",
        html_sizes[biggest] < PAGE_KB * 1024,
    )


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n", 1)[0])
    parser.add_argument("--big", type=int, default=BIG, help="entries of the big stream (default 1,000,000)")
    args = parser.parse_args()
    started = time.perf_counter()
    with django_bench(read_only=True) as server:
        run(server, args.big)
    print(f"(benchmark ran {time.perf_counter() - started:.0f} s)")
    return 0


if __name__ == "__main__":
    sys.exit(main())
