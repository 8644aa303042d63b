"""Benchmark: hostile search expressions against the web process (docs/api.md#bounded-cost:
"every query is bounded before it runs").

Run ``.venv/bin/python bench/cost.py [--entries 6000]`` from the repository root (about two minutes).
It starts its own redis-server and throwaway database (:func:`bench._common.django_bench`), fills a
stream, its DLQ and a group's pending list with ``--entries`` entries each (23-item lists, a short
string), and serves ``busconsole.asgi`` with uvicorn in a process of its own, as ``make run`` does.

1. The floor: ``/healthz`` asked 100 times on an idle server, its worst latency.
2. For each hostile expression (:data:`EXPRESSIONS`: the issue's refused one, the dearest ones the
   bound lets run, a regex bomb, string doubling) on each surface a user reaches over HTTP
   (:data:`SURFACES`: the search API and its page step, the streamed export, the replay, requeue and
   ack-matching counts), the request runs in a thread while ``/healthz`` is asked again and again on
   a connection of its own. Two rows each: the worst ``/healthz`` latency meanwhile against the idle
   floor (goal: within 100 ms, the issue's; the median and 99th percentile are printed), and the
   request's duration against its surface's time budget plus the request's own fixed cost (the same
   surface's answer to the refused expression, measured first: login, compile, page) (goal: within
   1.1x). The streamed export has no time budget (it streams its whole range, at most
   ``BUSCONSOLE_EXPORT_STREAM_MAX`` entries, each bounded): its duration is printed, not a row.
3. In this process, the longest single CEL evaluation of the allowed dear expressions (the GIL is
   held for all of it) and the time per step of the cost bound (:mod:`eventbus.search.cost`), which
   is what :data:`~eventbus.search.cost.MAX_STEPS` was chosen from (goal: one evaluation within 10 ms).

No figure here is asserted by the test suite (``tests/security/test_cost_matrix.py`` checks outcomes).
"""

from __future__ import annotations

import argparse
import contextlib
import json
import os
import socket
import subprocess
import sys
import threading
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import django_bench  # noqa: E402 - needs the repo root on sys.path
from bench._summary import check, within  # noqa: E402

KEY = "cost:orders"
DLQ = "{cost:orders}:dlq"
GROUP = "billing"
HEALTHZ_GOAL_MS = 100.0
DURATION_GOAL = 1.1
EVALUATION_GOAL_MS = 10.0
L60 = "[" + ",".join(str(i % 10) for i in range(60)) + "]"
L23 = "[" + ",".join(str(i % 10) for i in range(23)) + "]"
ITEMS = 23  # the entries' lists: the nested exists over them costs 172,549 steps, near the bound

EXPRESSIONS = {
    "the issue's 60^4 exists (refused)": f"{L60}.exists(v0,{L60}.exists(v1,{L60}.exists(v2,{L60}.exists(v3,false))))",
    "nested exists over the entry's lists": "data.items.exists(a, data.items.exists(b, data.items.exists(c, a + b + c < 0)))",
    "nested exists over literal lists": f"{L23}.exists(a, {L23}.exists(b, {L23}.exists(c, a * b * c == data.n + 1000)))",
    "regex bomb (a+)+$": 'data.s.matches("(a+)+$")',
    "string doubling, 60-fold": " + ".join(["data.s"] * 60) + ' == "x"',
}  # fmt: skip


def _seg(key: str) -> str:
    from streams_app.views.links import key_segment

    return key_segment(key.encode())


SURFACES: dict[str, tuple[Callable[[str], tuple[str, str, dict]], float | None]] = {
    # name: (request for a query text -> (method, path, params or JSON body), time budget in seconds)
    "search API": (lambda q: ("GET", f"/api/v1/c/default/streams/{_seg(KEY)}/search/", {"q": q}), 2.0),
    "search page step": (lambda q: ("GET", f"/c/default/streams/{_seg(KEY)}/search/", {"q": q}), 0.4),
    "export, streamed": (
        lambda q: ("GET", f"/api/v1/c/default/streams/{_seg(KEY)}/export", {"q": q, "format": "ndjson"}),
        None,
    ),
    "replay matching count": (lambda q: ("GET", f"/c/default/streams/{_seg(KEY)}/search/replay/confirm/", {"q": q}), 2.0),
    "requeue matching count": (
        lambda q: ("POST", f"/api/v1/c/default/dlq/{_seg(DLQ)}/search/requeue", {"q": q, "dry_run": True}),
        2.0,
    ),
    "ack matching count": (
        lambda q: ("GET", f"/c/default/streams/{_seg(KEY)}/groups/{GROUP}/search/ack/confirm/", {"q": q}),
        2.0,
    ),
}  # fmt: skip


def _fill(url: str, n: int) -> None:
    import redis

    r = redis.Redis.from_url(url)
    for start in range(0, n, 2000):
        pipe = r.pipeline(transaction=False)
        for i in range(start, min(n, start + 2000)):
            data = json.dumps({"n": i, "s": "a" * 40 + "!", "items": list(range(ITEMS))})
            pipe.xadd(KEY, {"type": "order.created", "data": data})
            pipe.xadd(DLQ, {"type": "order.created", "data": data, "dlq_original_stream": KEY,
                            "dlq_error": "TimeoutError", "dlq_retries": "3"})  # fmt: skip
        pipe.execute()
    r.xgroup_create(KEY, GROUP, id="0")
    r.xreadgroup(GROUP, "worker", {KEY: ">"}, count=n)


def _session() -> tuple[dict[str, str], dict[str, str]]:
    """An operator's session cookie (pages) and API token header (the API: no CSRF for a POST)."""
    from django.conf import settings
    from django.contrib.auth.models import Group, User
    from django.test import Client

    from streams_app.accounts.tokens import token_create

    user = User.objects.create_user("bench-operator")
    user.groups.add(Group.objects.get(name="operator"))
    client = Client()
    client.force_login(user)
    cookies = {settings.SESSION_COOKIE_NAME: client.cookies[settings.SESSION_COOKIE_NAME].value}
    return cookies, {"Authorization": f"Bearer {token_create(user=user, name='bench')[1]}"}


def _serve() -> tuple[subprocess.Popen, str]:
    from tests.servers import free_port

    port = free_port()
    env = {**os.environ, "PYTHONPATH": str(REPO)}
    proc = subprocess.Popen(
        [sys.executable, "-m", "uvicorn", "busconsole.asgi:application", "--host", "127.0.0.1", "--port", str(port),
         "--lifespan", "off", "--log-level", "warning"],
        cwd=REPO, env=env,
    )  # fmt: skip
    for _ in range(300):
        try:
            with socket.create_connection(("127.0.0.1", port), timeout=0.2):
                return proc, f"http://127.0.0.1:{port}"
        except OSError:
            if proc.poll() is not None:
                raise RuntimeError("uvicorn exited") from None
            time.sleep(0.05)
    raise RuntimeError("uvicorn did not start")


def _idle_floor(base: str) -> float:
    import httpx

    latencies = []
    with httpx.Client(base_url=base) as http:
        http.get("/healthz")
        for _ in range(100):
            began = time.perf_counter()
            http.get("/healthz")
            latencies.append(time.perf_counter() - began)
    return max(latencies) * 1000


def _hostile(
    base: str, auth: tuple[dict[str, str], dict[str, str]], method: str, path: str, params: dict
) -> tuple[float, list[float], str]:
    """The request in a thread, /healthz polled meanwhile: (its duration, every /healthz latency in
    ms, what the request answered)."""
    import httpx

    done: dict[str, object] = {}

    def run() -> None:
        cookies, token = auth
        api = path.startswith("/api/")
        with httpx.Client(base_url=base, cookies=None if api else cookies, headers=token if api else None,
                          timeout=600) as http:  # fmt: skip
            began = time.perf_counter()
            reply = http.get(path, params=params) if method == "GET" else http.post(path, json=params)
            done["seconds"] = time.perf_counter() - began
            done["reply"] = f"{reply.status_code} {reply.text[:90]!r}"
        done["over"] = True

    latencies: list[float] = []
    with httpx.Client(base_url=base) as http:
        http.get("/healthz")
        thread = threading.Thread(target=run)
        thread.start()
        while "over" not in done:
            began = time.perf_counter()
            http.get("/healthz")
            latencies.append((time.perf_counter() - began) * 1000)
        thread.join()
    return float(done["seconds"]), latencies, str(done["reply"])


def _evaluations(n: int = 200) -> None:
    """The longest single evaluation of each allowed dear expression, in this process (row 3)."""
    from eventbus.search import QueryError, compile_query
    from streams_app.redis_ops.types import Entry

    data = json.dumps({"n": 1, "s": "a" * 40 + "!", "items": list(range(ITEMS))}).encode()
    entry = Entry(id="1700000000000-0", fields=((b"type", b"order.created"), (b"data", data)))
    longest = 0.0
    for name, text in EXPRESSIONS.items():
        try:
            query = compile_query(text)
        except QueryError:
            continue
        activation = query.activation(entry, dlq=False, key=KEY.encode())
        steps = query.estimate.steps_for(activation) if query.estimate else 0.0
        times = []
        for _ in range(n):
            began = time.perf_counter()
            with contextlib.suppress(Exception):
                query.execute(activation)
            times.append(time.perf_counter() - began)
        worst = max(times) * 1000
        longest = max(longest, worst)
        per_step = min(times) / steps * 1e9 if steps else 0.0
        print(f"  {name}: {steps:,.0f} steps, fastest {min(times) * 1000:.2f} ms ({per_step:.0f} ns/step), "
              f"longest {worst:.2f} ms")  # fmt: skip
    from eventbus.search.cost import MAX_STEPS

    check(
        "longest single CEL evaluation (GIL held) of an allowed expression",
        f"{longest:.2f} ms", f"<= {EVALUATION_GOAL_MS:g} ms", longest <= EVALUATION_GOAL_MS,
        floor=f"bound {MAX_STEPS:,} steps",
    )  # fmt: skip


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=6000)
    args = parser.parse_args()
    with django_bench() as server:
        _fill(server.url(0), args.entries)
        auth = _session()
        proc, base = _serve()
        try:
            floor = _idle_floor(base)
            print(f"Idle /healthz, worst of 100: {floor:.1f} ms\n")
            for surface, (request, budget) in SURFACES.items():
                fixed = 0.0  # the surface's answer to the refused expression (the first): its fixed cost
                for name, text in EXPRESSIONS.items():
                    method, path, params = request(text)
                    seconds, latencies, reply = _hostile(base, auth, method, path, params)
                    fixed = fixed or seconds
                    worst, ranked = max(latencies), sorted(latencies)
                    label = f"{surface}, {name}"
                    print(f"{label}: {seconds * 1000:.0f} ms; /healthz answered {len(latencies)} times, median "
                          f"{ranked[len(ranked) // 2]:.1f} ms, p99 {ranked[int(len(ranked) * 0.99)]:.1f} ms, "
                          f"worst {worst:.1f} ms; {reply}")  # fmt: skip
                    check(
                        f"/healthz during {label}", f"{worst:.1f} ms", f"<= {HEALTHZ_GOAL_MS:g} ms",
                        worst <= HEALTHZ_GOAL_MS, floor=f"{floor:.1f} ms idle", ratio=f"{worst / floor:.1f}x",
                    )  # fmt: skip
                    if budget is not None:
                        within(f"duration of {label} (budget + fixed cost)", seconds, budget + fixed,
                               DURATION_GOAL, unit="s")  # fmt: skip
        finally:
            proc.terminate()
            proc.wait(10)
        print("\nOne evaluation, in this process:")
        _evaluations()


if __name__ == "__main__":
    main()
