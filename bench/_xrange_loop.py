"""The floor of ``bench/pipeline.py``'s export: a bare ``XRANGE ... COUNT 10000`` loop over one stream, in
a process of its own that imports redis-py (and its hiredis parser) and nothing else.

Run ``python bench/_xrange_loop.py <redis-url> <key>``; it prints ``{"entries": n, "rate": entries/s, "cpu_s": CPU
seconds of the loop}`` (this process's, user and system).

Why a process of its own: CPython's cyclic collector walks the young objects a reply leaves alive, and
now and then the whole heap (see ``streams_app/perf/heap.py``). A loop in the bench's own process, where
Django, the console and pyarrow are loaded, ran at about half the rate of the same loop here, and swung
from one run to the next (docs/performance.md#figures-behind-the-design): a floor that
measured the bench's heap, not Redis and a client.
"""

from __future__ import annotations

import json
import sys
import time

import redis


def xrange_loop(client: redis.Redis, key: str) -> tuple[int, float, float]:
    """Entries, entries/s and CPU seconds of ``key`` read to its end in pages of 10,000, parsed by hiredis,
    nothing else."""
    client.set_response_callback("XRANGE", lambda response, **options: response)
    started, cpu, start, n = time.perf_counter(), time.process_time(), "-", 0
    while True:
        reply = client.execute_command("XRANGE", key, start, "+", "COUNT", 10_000)
        if not reply:
            break
        n += len(reply)
        start = "(" + reply[-1][0].decode()
    return n, n / (time.perf_counter() - started), time.process_time() - cpu


def main(url: str, key: str) -> None:
    n, rate, cpu_s = xrange_loop(redis.Redis.from_url(url), key)
    print(json.dumps({"entries": n, "rate": rate, "cpu_s": cpu_s}))


if __name__ == "__main__":
    main(*sys.argv[1:])
