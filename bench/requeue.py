"""Benchmark: bulk DLQ requeue (SPEC section 8: >= 20,000 entries/s on 100k entries, >= 10x a per-entry loop).

Run ``.venv/bin/python bench/requeue.py [--entries 100000] [--batch 1000] [--sweep 500,2000]``. It starts a private
redis-server, fills a DLQ with eventbus-convention dead letters (pipelined) and moves them back to their
stream three ways, in the same run, refilling the DLQ before each:

1. ``requeue_range`` batches in a loop: one Lua call per batch (the access layer alone), at ``--batch``
   and at each ``--sweep`` size (a bigger batch is faster but blocks Redis longer per call);
2. the job machinery: a ``dlq.requeue_all`` Job row run synchronously by ``streams_app.jobs.runner.job_run``,
   which calls the same function and also saves progress to the database, renews its lock and
   broadcasts after every batch (what a Celery worker does);
3. the baseline: a per-entry loop, XRANGE id id + XADD + XDEL, one round trip each, with the same
   Python planning (``conventions.requeue_plan``) per entry.

After each run it checks the end state (the DLQ empty, one new entry per dead letter, each
``_requeued_from`` once) so a fast wrong answer cannot pass. It prints entries/s and the ratios.
"""

from __future__ import annotations

import argparse
import sys
import time
from collections.abc import Callable
from pathlib import Path

REPO = Path(__file__).resolve().parent.parent
sys.path.insert(0, str(REPO))

from bench._common import django_bench  # noqa: E402 - needs the repo root on sys.path

DLQ = b"orders:dlq"
TARGET = b"orders"
BUDGET_RATE = 20_000
BUDGET_RATIO = 10.0


def _fill(r, n: int) -> str:
    """``n`` dead letters as eventbus files them; returns the newest DLQ ID (the operator's up_to)."""
    last = b""
    for start in range(0, n, 10_000):
        pipe = r.pipeline(transaction=False)
        for i in range(start, min(n, start + 10_000)):
            pipe.xadd(
                DLQ,
                {
                    b"type": b"order.created",
                    b"data": b'{"order_id": %d, "amount": "12.50", "currency": "EUR"}' % i,
                    b"id": b"evt-%d" % i,
                    b"ts": b"1700000000000",
                    b"_retries": b"5",
                    b"dlq_original_stream": TARGET,
                    b"dlq_original_id": b"1700000000000-%d" % i,
                    b"dlq_group": b"billing",
                    b"dlq_error": b"ValueError: card declined",
                    b"dlq_traceback": b'Traceback (most recent call last):\n  File "app.py", line 7\n' * 3,
                    b"dlq_retries": b"5",
                    b"dlq_failed_at": b"1700000000100",
                },
            )
        last = pipe.execute()[-1]
    return last.decode()


def _verify(r, n: int) -> None:
    """The DLQ is empty and the target holds one copy of each dead letter (checked in pages)."""
    assert r.xlen(DLQ) == 0, f"{r.xlen(DLQ)} entries left in the DLQ"
    origins: set[bytes] = set()
    count = 0
    start = "-"
    while True:
        page = r.xrange(TARGET, start, "+", count=10_000)
        for _entry_id, fields in page:
            origins.add(fields[b"_requeued_from"])
            assert b"dlq_error" not in fields and b"_retries" not in fields
            count += 1
        if len(page) < 10_000:
            break
        start = "(" + page[-1][0].decode()
    assert count == n and len(origins) == n, (
        f"{count} new entries, {len(origins)} distinct origins, {n} expected"
    )


def _timed(label: str, run: Callable[[], None], r, n: int) -> float:
    r.delete(TARGET)
    up_to_holder[0] = _fill(r, n)
    started = time.perf_counter()
    run()
    elapsed = time.perf_counter() - started
    _verify(r, n)
    rate = n / elapsed
    print(f"  {label:<44} {n:>7} entries in {elapsed:7.2f} s = {rate:>9,.0f} entries/s")
    return rate


up_to_holder = [""]


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("--entries", type=int, default=100_000)
    parser.add_argument("--batch", type=int, default=1000, help="entries per Lua call (job and loop)")
    parser.add_argument("--sweep", default="500,2000", help="more batch sizes for the loop, comma-separated")
    args = parser.parse_args()
    n = args.entries

    with django_bench() as server:
        import redis

        from streams_app.jobs import runner as jobs
        from streams_app.jobs.models import Job
        from streams_app.redis_ops import actions
        from streams_app.redis_ops.conventions import requeue_plan

        conn = "default"
        r = redis.Redis.from_url(server.url(0))
        print(f"bulk DLQ requeue, {n} eventbus dead letters, redis-server {r.info()['redis_version']}")

        call_ms: list[float] = []

        def bulk(batch: int) -> Callable[[], None]:
            def run() -> None:
                call_ms.clear()
                cursor = None
                while True:
                    started = time.perf_counter()
                    cursor = actions.requeue_range(
                        conn, DLQ, up_to=up_to_holder[0], after=cursor, batch=batch
                    ).cursor
                    call_ms.append((time.perf_counter() - started) * 1000)
                    if cursor is None:
                        return

            return run

        def through_job() -> None:
            job = Job.objects.create(
                kind=jobs.KIND_REQUEUE_ALL,
                connection=conn,
                parameters={
                    "key": DLQ.hex(),
                    "key_text": DLQ.decode(),
                    "up_to": up_to_holder[0],
                    "batch": args.batch,
                },
            )
            jobs.job_run(job.pk)
            job.refresh_from_db()
            assert job.state == Job.State.DONE and job.done == n, (job.state, job.done, job.error)

        raw = redis.Redis.from_url(server.url(0))
        raw.set_response_callback("XRANGE", lambda response, **options: response)

        def per_entry() -> None:
            start = "-"
            while True:
                page = raw.xrange(DLQ, start, up_to_holder[0], count=1000)
                for entry_id, _ in page:
                    found = raw.xrange(DLQ, entry_id, entry_id, count=1)
                    if not found:
                        continue
                    flat = found[0][1]
                    target, fields = requeue_plan(
                        DLQ, entry_id.decode(), list(zip(flat[::2], flat[1::2], strict=True))
                    )
                    raw.execute_command("XADD", target, "*", *[x for pair in fields for x in pair])
                    raw.xdel(DLQ, entry_id)
                if len(page) < 1000:
                    return
                start = "(" + page[-1][0].decode()

        for size in [int(x) for x in args.sweep.split(",") if x.strip()]:
            _timed(f"requeue_range, batches of {size}", bulk(size), r, n)
        fast = _timed(f"requeue_range, batches of {args.batch}", bulk(args.batch), r, n)
        call_ms.sort()
        print(
            f"    time per call, client side (bounds how long Redis is busy with one batch): median {call_ms[len(call_ms) // 2]:.1f} ms,"
            f" max {call_ms[-1]:.1f} ms"
        )
        job = _timed(f"job_run (dlq.requeue_all), batches of {args.batch}", through_job, r, n)
        slow = _timed("per-entry loop: XRANGE id id + XADD + XDEL", per_entry, r, n)

        print(f"ratio requeue_range / per-entry: {fast / slow:5.1f}x")
        print(f"ratio job_run / per-entry:       {job / slow:5.1f}x")
        ok = min(fast, job) >= BUDGET_RATE and min(fast, job) / slow >= BUDGET_RATIO
        print(
            f"budget (>= {BUDGET_RATE:,} entries/s and >= {BUDGET_RATIO:.0f}x the per-entry loop): "
            + ("met" if ok else "NOT MET")
        )
        return 0 if ok else 1


if __name__ == "__main__":
    sys.exit(main())
