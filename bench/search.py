"""Benchmark: payload search (docs/performance.md#goals-and-floors: entries scanned per second within 3x of the floor).

Run ``.venv/bin/python bench/search.py [--entries 1000000] [--sample 100000]``. It starts a private
redis-server, fills one stream with ``--entries`` JSON events (pipelined XADD in batches of 10,000) and
measures, in the same run, entries scanned per second for:

1. the floor: bare ``XRANGE key (last + COUNT 500`` pages with redis-py and ``json.loads`` of each
   entry's ``data`` field (what any search must at least do), measured right before each search;
2. plain text (``needle-0042``: 1 entry in 1,000 has it), through ``streams_app.search.search_page``
   run step after step (100,000 entries each, no time budget) until the range is complete;
3. expressions: ``data.customer.id == 42`` (cut down to the path it reads), ``type == "order.refunded"``
   (the raw-bytes prefilter rejects most entries before decoding), and
   ``size(data.items) > 3 && data.total > 100.0``.

Each search must find exactly what a plain-Python filter over the same data finds (checked on the
counts), so a fast wrong answer cannot pass. Each search is one row of ``make bench``'s table
(:mod:`bench._summary`): its time per entry against the floor's, goal within 3x. Then, on ``--sample``
entries held in memory, where the time goes: XRANGE (Redis round trips and redis-py's reply parsing),
decode (``decoded_value`` of the referenced field), evaluate (the plain-Python evaluator of
:mod:`eventbus.search.fast` where the expression is in its subset, else the CEL program on prepared
activations) and the whole ``Query.matches``.
"""

from __future__ import annotations

import argparse
import contextlib
import json
import sys
import time
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import django_bench  # noqa: E402 - needs the repo root on sys.path
from bench._summary import within  # noqa: E402

KEY = b"bench:orders"
TYPES = [b"order.created", b"order.paid", b"order.shipped", b"order.cancelled"]
GOAL_RATIO = 3.0
MAX_ENTRIES = 2_000_000


def _payload(i: int) -> dict[bytes, bytes]:
    data = {
        "customer": {
            "id": i % 1000,
            "name": f"Customer {i % 1000}",
            "tier": "gold" if i % 10 == 0 else "basic",
        },
        "items": [{"sku": f"SKU-{(i + k) % 500}", "qty": 1 + k} for k in range(i % 6)],
        "total": round((i % 250) * 1.25, 2),
        "note": f"needle-{i % 1000:04d}",
    }
    kind = b"order.refunded" if i % 997 == 0 else TYPES[i % 4]
    return {b"type": kind, b"data": json.dumps(data).encode()}


def _fill(r, n: int) -> None:
    for start in range(0, n, 10_000):
        pipe = r.pipeline(transaction=False)
        for i in range(start, min(n, start + 10_000)):
            pipe.xadd(KEY, _payload(i))
        pipe.execute()


def _expected(n: int) -> dict[str, int]:
    """What each query must find, by plain Python over the generator (not the search code)."""
    counts = {
        "needle-0042": 0,
        "data.customer.id == 42": 0,
        'type == "order.refunded"': 0,
        "size(data.items) > 3 && data.total > 100.0": 0,
    }
    for i in range(n):
        fields = _payload(i)
        data = json.loads(fields[b"data"])
        counts["needle-0042"] += b"needle-0042" in fields[b"data"]
        counts["data.customer.id == 42"] += data["customer"]["id"] == 42
        counts['type == "order.refunded"'] += fields[b"type"] == b"order.refunded"
        counts["size(data.items) > 3 && data.total > 100.0"] += (
            len(data["items"]) > 3 and data["total"] > 100.0
        )
    return counts


def _floor(client, n: int) -> tuple[float, float]:
    """Entries/s of bare XRANGE pages + json.loads, and the seconds spent in XRANGE alone."""
    start, seen, in_xrange = "-", 0, 0.0
    began = time.perf_counter()
    while True:
        t = time.perf_counter()
        page = client.execute_command("XRANGE", KEY, start, "+", "COUNT", 500)
        in_xrange += time.perf_counter() - t
        for _entry_id, flat in page:
            json.loads(flat[3])
        seen += len(page)
        if len(page) < 500:
            break
        start = "(" + page[-1][0].decode()
    assert seen == n, (seen, n)
    return n / (time.perf_counter() - began), in_xrange


def _search_rate(conn: str, text: str, n: int) -> tuple[float, int]:
    from streams_app.search import compile_query, search_page

    query = compile_query(text)
    cursor, scanned, found = None, 0, 0
    began = time.perf_counter()
    while True:
        page = search_page(
            conn, KEY, query, cursor=cursor, limit=1000, budget_entries=100_000, budget_ms=10**9, mask=None
        )
        scanned += page.scanned
        found += len(page.matches)
        if page.complete:
            break
        cursor = page.next
    assert scanned == n, (scanned, n)
    return n / (time.perf_counter() - began), found


def _breakdown(client, conn: str, sample: int, queries: list[str]) -> None:
    from eventbus.decoding import decoded_value
    from streams_app.redis_ops.parsers import parse_entry
    from streams_app.search import compile_query

    t = time.perf_counter()
    raw, start = [], "-"
    while len(raw) < sample:
        page = client.execute_command("XRANGE", KEY, start, "+", "COUNT", 500)
        if not page:
            break
        raw += page
        start = "(" + page[-1][0].decode()
    xrange_s = time.perf_counter() - t
    t = time.perf_counter()
    for e in raw:  # not kept: holding 100k new objects would time the garbage collector too
        parse_entry(e)
    parse_s = time.perf_counter() - t
    entries = [parse_entry(e) for e in raw]
    n = len(entries)
    print(f"\nWhere the time goes, per entry, on {n:,} entries held in memory:")
    print(f"  XRANGE pages of 500 (round trip + redis-py parsing): {xrange_s / n * 1e6:6.2f} us")
    print(f"  parse_entry (the reply as an Entry):                 {parse_s / n * 1e6:6.2f} us")
    t = time.perf_counter()
    for e in entries:
        decoded_value(e.fields[1][1])
    print(
        f"  decode the data field (decoded_value, JSON):         {(time.perf_counter() - t) / n * 1e6:6.2f} us"
    )
    t = time.perf_counter()
    for e in entries:
        json.loads(e.fields[1][1])
    print(
        f"  json.loads alone, for comparison:                    {(time.perf_counter() - t) / n * 1e6:6.2f} us"
    )
    for text in queries:
        query = compile_query(text)
        if query.is_text:
            t = time.perf_counter()
            hits = sum(query.matches(e) for e in entries)
            print(
                f"  {text!r}: plain text, matches() {(time.perf_counter() - t) / n * 1e6:6.2f} us ({hits} hits)"
            )
            continue
        t = time.perf_counter()
        passed = [e for e in entries if query.may_match(e.fields)]
        prefilter = time.perf_counter() - t
        prepare = query.variables if query.fast is not None else query.activation
        evaluate = query.fast if query.fast is not None else query.program.execute
        t = time.perf_counter()
        for e in passed:  # nothing kept, as in a search
            prepare(e, dlq=False, key=KEY)
        decode = time.perf_counter() - t
        t = time.perf_counter()
        for e in passed:
            with contextlib.suppress(Exception):  # an evaluation error is "no match"
                evaluate(prepare(e, dlq=False, key=KEY))
        evaluate_s = time.perf_counter() - t - decode
        t = time.perf_counter()
        hits = sum(query.matches(e) for e in entries)
        whole = time.perf_counter() - t
        how = "plain Python" if query.fast is not None else "CEL"
        print(
            f"  {text!r}: prefilter {prefilter / n * 1e6:5.2f} us (passes {len(passed) / n:.1%}), "
            f"decode {decode / n * 1e6:5.2f} us, evaluate ({how}) {evaluate_s / n * 1e6:5.2f} us, "
            f"matches() in all {whole / n * 1e6:5.2f} us ({hits} hits)"
        )
        if query.fast is not None:
            t = time.perf_counter()
            for e in passed:
                with contextlib.suppress(Exception):
                    query.program.execute(query.activation(e, dlq=False, key=KEY))
            print(
                f"    the same by CEL (cut-down activation + program): {(time.perf_counter() - t) / n * 1e6:5.2f} us"
            )


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--entries", type=int, default=1_000_000)
    parser.add_argument("--sample", type=int, default=100_000)
    args = parser.parse_args()
    n = max(1000, min(args.entries, MAX_ENTRIES))

    with django_bench(read_only=True) as server:
        import redis

        from streams_app.redis_ops.client import get_client

        r = redis.Redis.from_url(server.url(0))
        t = time.perf_counter()
        _fill(r, n)
        print(
            f"Filled {n:,} entries in {time.perf_counter() - t:.1f} s "
            f"({r.memory_usage(KEY) / 2**20:.0f} MiB in Redis)"
        )
        expected = _expected(n)
        conn = "default"
        client = get_client(conn)

        print(f"Goal: each search within {GOAL_RATIO:.0f}x of the floor's time per entry")
        print("(the floor is measured again right before each search: a loaded machine's speed drifts)\n")
        results = []
        for text, count in expected.items():
            floor, in_xrange = _floor(client, n)
            rate, found = _search_rate(conn, text, n)
            assert found == min(count, 1000 * 10**6), (text, found, count)
            print(
                f"{text!r:50} {rate:10,.0f} entries/s  {found:6} matches; floor, bare XRANGE pages + "
                f"json.loads: {floor:,.0f} entries/s (XRANGE alone {n / in_xrange:,.0f} entries/s)"
            )
            results.append(within(f"search {text}", 1e6 / rate, 1e6 / floor, GOAL_RATIO, unit="us/entry"))
        _breakdown(client, conn, min(args.sample, n), list(expected))
        print(f"\n{sum(results)} of {len(results)} searches meet the goal.")


if __name__ == "__main__":
    main()
