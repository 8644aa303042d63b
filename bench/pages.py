"""Benchmark: the group and stream pages at scale: 10,000 consumers in a group, 1,000 groups on a stream.

Goals, each one row of ``make bench``'s table (``bench/_summary.py``), all ratios to a floor of the same
run rather than a number of milliseconds that holds on one machine only (the old 500 ms budget did):

- each HTML page within 2x of its API: the entries page's rule (docs/performance.md#goals-and-floors) ("the HTML page
  within 2x of its API") applied to these pages. "Its API" is what an API client requests to show the
  same rows: for the group page, the consumers page (same sort and depth) and the pending list's first
  page; for the stream page, the groups page (same sort and depth) and the first 50 entries. Both sides
  read the same XINFO and XPENDING replies and rank the same rows, so the ratio isolates what the page
  adds (the template, the page frame, the charts panel), which must not grow with the list. The floor
  holds two requests' middleware and session work to the page's one: a millisecond or so, small beside
  reading 10,000 consumers, and the page does save an API client that second request.
  The XINFO read every request needs (XINFO CONSUMERS or XINFO GROUPS through redis-py, reply parsed)
  is timed too and each case's multiple of it printed, as the floor of the Redis work, but it is no
  goal: the page also reads the pending summary (8,000 consumers named) and its own frame, so its
  multiple of XINFO alone says more about the page's fixed cost than about how it scales;
- each page's body under 300 KB, whatever the list's length (one page of 50 rows is shown).

Run from the repository root: ``.venv/bin/python bench/pages.py`` (about a minute). It starts its own
redis-server on a free port and a throwaway SQLite database; nothing else is touched.

The bus it builds, with pipelined commands:
- ``bench:consumers``: 30,000 entries, one group ``workers`` with 10,000 consumers (XGROUP
  CREATECONSUMER), 8,000 of them owning 1-4 pending entries (XREADGROUP COUNT), so the pending list's
  summary names 8,000 consumers too;
- ``bench:groups``: 1,000 entries and 1,000 groups (XGROUP CREATE ... ENTRIESREAD, some SETID so that
  their lag is unknown, some with pending entries).

What is timed ("server time": the whole request inside the process through ``django.test.Client``
with a logged-in viewer: middleware, session, form validation, Redis, sorting, the template), for the
HTML pages and the API, at several sorts and depths, interleaved round by round in a shuffled order.
Sizes are the response bodies.
"""

from __future__ import annotations

import os
import random
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
if str(REPO) not in sys.path:
    sys.path.insert(0, str(REPO))

from bench._common import django_bench  # noqa: E402
from bench._summary import check, within  # noqa: E402
from tests.servers import RedisServer  # noqa: E402

CONN = "default"
CONSUMERS_KEY, GROUP = "bench:consumers", "workers"
GROUPS_KEY = "bench:groups"
N_CONSUMERS, N_OWNERS, N_GROUPS = 10_000, 8_000, 1_000
WARMUP, REPS = 3, 25
HTML_RATIO = 2.0  # an HTML page over the API requests of the same rows (module docstring)
BUDGET_KB = 300
CHUNK = 2_000


def build(raw) -> dict[str, float]:
    """The two streams; returns how long each part took to build (seconds)."""
    took: dict[str, float] = {}
    started = time.perf_counter()
    for start in range(0, 30_000, CHUNK):
        with raw.pipeline(transaction=False) as pipe:
            for i in range(start, start + CHUNK):
                pipe.xadd(CONSUMERS_KEY, {"type": "order.created", "n": str(i)})
            pipe.execute()
    raw.xgroup_create(CONSUMERS_KEY, GROUP, id="0")
    names = [f"worker-{i:05d}" for i in range(N_CONSUMERS)]
    random.Random(3).shuffle(names)
    for start in range(0, N_CONSUMERS, CHUNK):
        with raw.pipeline(transaction=False) as pipe:
            for name in names[start : start + CHUNK]:
                pipe.xgroup_createconsumer(CONSUMERS_KEY, GROUP, name)
            pipe.execute()
    for start in range(0, N_OWNERS, CHUNK):
        with raw.pipeline(transaction=False) as pipe:
            for i, name in enumerate(names[start : start + CHUNK], start):
                pipe.xreadgroup(GROUP, name, {CONSUMERS_KEY: ">"}, count=1 + i % 4)
            pipe.execute()
    took["10,000 consumers"] = time.perf_counter() - started

    started = time.perf_counter()
    with raw.pipeline(transaction=False) as pipe:
        for i in range(1_000):
            pipe.xadd(GROUPS_KEY, {"n": str(i)})
        ids = pipe.execute()
    with raw.pipeline(transaction=False) as pipe:
        for i in range(N_GROUPS):
            name, position = f"group-{i:04d}", (i * 37) % 900
            pipe.xgroup_create(GROUPS_KEY, name, id=ids[position], entries_read=position + 1)
            if i % 10 == 3:
                pipe.xgroup_setid(GROUPS_KEY, name, ids[950])  # lag unknown
            if i % 3 == 0:
                pipe.xreadgroup(name, "w", {GROUPS_KEY: ">"}, count=1 + i % 5)
        pipe.execute()
    took["1,000 groups"] = time.perf_counter() - started
    return took


def time_interleaved(cases: dict[str, Callable[[], object]]) -> dict[str, list[float]]:
    """Milliseconds per call of each case, the cases run round by round in a shuffled order."""
    for call in cases.values():
        for _ in range(WARMUP):
            call()
    out: dict[str, list[float]] = {name: [] for name in cases}
    rng, order = random.Random(5), list(cases)
    for _ in range(REPS):
        rng.shuffle(order)
        for name in order:
            started = time.perf_counter()
            cases[name]()
            out[name].append((time.perf_counter() - started) * 1000)
    return out


def commands_of(raw, web, url: str) -> tuple[int, dict[str, int], int]:
    """What one request of ``url`` sends to Redis: the round trips the console's redis-py makes (a
    pipeline is one) and the commands the server ran (INFO commandstats between two CONFIG RESETSTAT),
    so the cost of a page is read from Redis itself, not from the code under test."""
    from redis.connection import AbstractConnection

    web.get(url)  # warm: connections, cached health
    trips = []
    original = AbstractConnection.send_packed_command  # a pipeline sends its commands in one call

    def counting(self, *args, **kwargs):
        trips.append(1)
        return original(self, *args, **kwargs)

    raw.config_resetstat()
    AbstractConnection.send_packed_command = counting
    try:
        status = web.get(url).status_code
    finally:
        AbstractConnection.send_packed_command = original
    stats = raw.info("commandstats")
    if status != 200:
        raise RuntimeError(f"{url}: {status}")
    calls = {
        name.removeprefix("cmdstat_"): row["calls"]
        for name, row in stats.items()
        if name not in ("cmdstat_config|resetstat", "cmdstat_info", "cmdstat_config")
    }
    return len(trips), calls, sum(calls.values())


def p95(values: list[float]) -> float:
    return sorted(values)[max(0, round(0.95 * len(values)) - 1)]


def run(server: RedisServer) -> None:
    import redis
    from django.contrib.auth.models import Group, User
    from django.test import Client

    raw = redis.Redis.from_url(server.url(0))
    version = raw.info("server")["redis_version"]
    user = User.objects.create_user("bench")
    user.groups.add(Group.objects.get(name="viewer"))
    from streams_app.perf.heap import freeze_startup

    freeze_startup()  # as the web process does at the end of busconsole/asgi.py
    web = Client(HTTP_HOST="localhost")
    web.force_login(user)
    print(
        f"busconsole pages benchmark: redis-server {version} on 127.0.0.1:{server.port}, {os.cpu_count()} CPUs, "
        f"Python {sys.version.split()[0]}, DEBUG=1, SQLite sessions; {REPS} timed requests per case"
    )

    for what, seconds in build(raw).items():
        print(f"built {what} in {seconds:.2f} s (pipelined)")
    assert len(raw.xinfo_groups(GROUPS_KEY)) == N_GROUPS
    assert raw.xinfo_groups(CONSUMERS_KEY)[0]["consumers"] == N_CONSUMERS

    group_page = f"/c/{CONN}/streams/{CONSUMERS_KEY}/groups/{GROUP}/"
    stream_page = f"/c/{CONN}/streams/{GROUPS_KEY}/"
    api_consumers = f"/api/v1/c/{CONN}/streams/{CONSUMERS_KEY}/groups/{GROUP}/consumers/"
    api_groups = f"/api/v1/c/{CONN}/streams/{GROUPS_KEY}/groups/"
    api_pending = f"/api/v1/c/{CONN}/streams/{CONSUMERS_KEY}/groups/{GROUP}/pending/?count=50"
    api_entries = f"/api/v1/c/{CONN}/streams/{GROUPS_KEY}/entries/?count=50"
    # Each HTML page beside the API requests of the same rows (50 a page, as the API's count).
    pairs = {
        "group page, 10k consumers, default (most pending)": (group_page, api_consumers),
        "group page, 10k consumers, sort=idle": (group_page + "?sort=idle", api_consumers + "?sort=idle"),
        "group page, 10k consumers, sort=name, page 100": (
            group_page + "?sort=name&page=100",
            api_consumers + "?sort=name&offset=4950",
        ),
        "group page, 10k consumers, last page (200)": (
            group_page + "?page=200",
            api_consumers + "?offset=9950",
        ),
        "stream page, 1k groups, default (most pending)": (stream_page, api_groups),
        "stream page, 1k groups, groups_sort=lag, page 20": (
            stream_page + "?groups_sort=lag&groups_page=20",
            api_groups + "?sort=lag&offset=950",
        ),
    }
    pages = {name: html for name, (html, _) in pairs.items()}
    apis = {f"API of {name}": api for name, (_, api) in pairs.items()}
    apis["API pending (first page)"] = api_pending
    apis["API entries (first page)"] = api_entries
    # Not paged (for reference): the stream's own reply carries the first page of groups and their total.
    apis["API stream (XINFO STREAM, first page of 1k groups)"] = f"/api/v1/c/{CONN}/streams/{GROUPS_KEY}/"
    sizes: dict[str, int] = {}
    for name, url in {**pages, **apis}.items():
        response = web.get(url)
        if response.status_code != 200:
            raise RuntimeError(f"{url}: {response.status_code} {response.content[:300]!r}")
        sizes[name] = len(response.content)
    # The page shows one page, not the whole list.
    body = web.get(group_page).content.decode()
    if "1–50 of 10000" not in body:
        raise RuntimeError("the group page does not say 1–50 of 10000")

    # What a page of the pending list costs in Redis commands and round trips (its
    # payload previews must cost a bounded number of pipelined commands, whatever the page's size).
    print(f"{'commands per request':<62} {'trips':>6} {'cmds':>6} {'XRANGE':>7} {'XPENDING':>9}")
    for name, url in (
        ("group page, pending 50 (default)", group_page),
        ("group page, pending 200", group_page + "?count=200"),
        ("API pending (first page)", api_pending),
        ("API pending, 200", api_pending.replace("count=50", "count=200")),
    ):
        trips, calls, total = commands_of(raw, web, url)
        print(f"{name:<62} {trips:>6} {total:>6} {calls.get('xrange', 0):>7} {calls.get('xpending', 0):>9}")
    print()

    cases: dict[str, Callable[[], object]] = {
        name: (lambda u=url: web.get(u)) for name, url in {**pages, **apis}.items()
    }
    floors = {
        "floor: XINFO CONSUMERS (10k), redis-py": lambda: raw.execute_command(
            "XINFO", "CONSUMERS", CONSUMERS_KEY, GROUP
        ),
        "floor: XINFO GROUPS (1k), redis-py": lambda: raw.execute_command("XINFO", "GROUPS", GROUPS_KEY),
    }
    load_before = os.getloadavg()[0]
    times = time_interleaved({**cases, **floors})
    print(
        f"\nload average (1 min) {load_before:.1f} before the timed runs, {os.getloadavg()[0]:.1f} after, "
        f"on {os.cpu_count()} CPUs: a load above the CPU count stretches every figure alike"
    )

    consumers_floor, groups_floor = floors
    floor_of = {
        name: consumers_floor
        if name.startswith(("group page", "API of group page", "API pending"))
        else groups_floor
        for name in cases
    }
    med = {name: statistics.median(values) for name, values in times.items()}
    # The API side of a page: its list's page plus the other list the page shows.
    second = {
        name: "API pending (first page)" if name.startswith("group page") else "API entries (first page)"
        for name in pages
    }
    api_of = {name: med[f"API of {name}"] + med[second[name]] for name in pages}
    print(
        f"{'case':<62} {'min ms':>8} {'p50 ms':>8} {'p95 ms':>8} {'size KB':>8} {'x XINFO':>8} {'x API':>6}"
    )
    for name in floors:
        print(f"{name:<62} {min(times[name]):>8.1f} {med[name]:>8.1f} {p95(times[name]):>8.1f}")
    for name in cases:
        vs_api = f"{med[name] / api_of[name]:>6.2f}" if name in pages else f"{'':>6}"
        print(
            f"{name:<62} {min(times[name]):>8.1f} {med[name]:>8.1f} {p95(times[name]):>8.1f} "
            f"{sizes[name] / 1024:>8.1f} {med[name] / med[floor_of[name]]:>8.2f} {vs_api}"
        )
    print()

    for kind, other in (("group page", "pending"), ("stream page", "entries")):
        names = [n for n in pages if n.startswith(kind)]
        worst = max(names, key=lambda n: med[n] / api_of[n])
        within(
            f"{worst}: HTML vs its API (that page + {other}; worst of {len(names)})",
            med[worst],
            api_of[worst],
            HTML_RATIO,
        )
        largest = max(names, key=sizes.get)
        check(
            f"{largest}: size",
            f"{sizes[largest] / 1024:.0f} KB",
            f"< {BUDGET_KB} KB",
            sizes[largest] < BUDGET_KB * 1024,
        )


def main() -> None:
    with django_bench(read_only=True) as server:
        run(server)


if __name__ == "__main__":
    main()
