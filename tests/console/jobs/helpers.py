"""What the job tests share: dead letters written in bulk, one field of every entry read in pages, and the
state of a job as the database has it.
"""

from __future__ import annotations

import json

import redis

from streams_app.jobs.models import Job


def dead_letters(r: redis.Redis, n: int, *, key: str = "orders:dlq") -> list[str]:
    """``n`` eventbus-convention dead letters of ``orders``, written in pipelined chunks."""
    ids: list[str] = []
    for start in range(0, n, 5000):
        pipe = r.pipeline(transaction=False)
        for i in range(start, min(n, start + 5000)):
            pipe.xadd(key, {
                "type": "order.created", "data": json.dumps({"order_id": i}), "_retries": "5",
                "dlq_original_stream": "orders", "dlq_original_id": f"1-{i}", "dlq_group": "billing",
                "dlq_error": "ValueError: declined", "dlq_retries": "5", "dlq_failed_at": "1700000000000",
            })
        ids += [x.decode() for x in pipe.execute()]
    return ids


def field_values(r: redis.Redis, key: str, field: bytes) -> list[bytes]:
    """One field of every entry of ``key``, read in pages (never one XRANGE - + of everything)."""
    out: list[bytes] = []
    start = "-"
    while True:
        page = r.xrange(key, start, "+", count=5000)
        out += [fields.get(field) for _, fields in page]
        if len(page) < 5000:
            return out
        start = "(" + page[-1][0].decode()


def job_state(job_id: int) -> Job:
    return Job.objects.get(pk=job_id)


def finished(job_id: int) -> Job | None:
    job = job_state(job_id)
    return job if job.is_finished else None
