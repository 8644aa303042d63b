"""A cancel stops a running job within about a second of its work, in a real Celery worker.

The export job of the issue evaluated a search query on every entry and looked at its cancel flag only
between part files of ten thousand entries: an admin's cancel left the worker busy for minutes. Here an
export whose query costs a fraction of a millisecond an entry (an ``exists`` over a 200-item list in
each payload) is cancelled as soon as the worker starts it; what the database and the export directory
say afterwards decides the test, not a clock: the job stopped short of its one part (its count below the
part's entries, no part file written), and the same worker went on to run the next task queued behind
it. A replay driven by a search (steps of at most a second of search, saved between them) is held to
the same: cancelled mid-range, it stops short of it and frees its worker.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from streams_app import services
from streams_app.audit.models import AuditEvent
from tests.console.celery_procs import Workers, celery_env
from tests.console.helpers import CONN
from tests.console.jobs.helpers import finished, job_state
from tests.polling import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

#: One part of the export (ten pages of 1000): the whole range, so a job that finishes its part is done.
ENTRIES = 10_000
QUERY = 'data.items.exists(x, x.endsWith("zzz"))'  # matches nothing: every item of every entry is looked at


@pytest.fixture(scope="module")
def export_dir(tmp_path_factory) -> Path:
    return tmp_path_factory.mktemp("exports")


@pytest.fixture(scope="module")
def pool(django_db_setup, django_db_blocker, export_dir: Path) -> Iterator[Workers]:
    with django_db_blocker.unblock():
        env = celery_env(BUSCONSOLE_EXPORT_DIR=str(export_dir))
    workers = Workers(env)
    yield workers
    workers.stop_all()


def _slow_stream(r: redis.Redis) -> None:
    items = [f"item-{i:04d}-abcdef" for i in range(200)]
    pipe = r.pipeline(transaction=False)
    for n in range(ENTRIES):
        pipe.xadd("big", {"type": "order.created", "data": json.dumps({"n": n, "items": items})})
        if n % 1000 == 999:
            pipe.execute()
    pipe.execute()


@pytest.mark.slow
def test_a_cancelled_export_stops_mid_part_and_frees_its_worker(
    pool: Workers, r: redis.Redis, viewer, operator, settings, export_dir: Path
) -> None:
    settings.BUSCONSOLE_EXPORT_DIR = str(export_dir)
    _slow_stream(r)
    pool.shared()
    job = services.stream_export_job(user=viewer, conn=CONN, key=b"big", fmt="ndjson", q=QUERY)
    # Its first save (the CSV columns, the cursor) is behind it: it is reading and testing entries now.
    wait_for(lambda: "columns" in job_state(job.pk).progress, timeout=60, what="the export to start", step=0.01)

    services.job_cancel(user=operator, job=job)
    # The next task for the same (only) worker: a one-entry replay, queued behind the cancelled export.
    first = r.xrange("big", count=1)[0][0].decode()
    later = services.stream_replay(user=operator, conn=CONN, key=b"big", start=first, end=first, target=b"copy")
    wait_for(lambda: finished(later.pk), timeout=120, what="the worker to take the next task", step=0.05)
    assert job_state(later.pk).state == "done" and r.xlen("copy") == 1

    stopped = job_state(job.pk)
    assert stopped.state == "cancelled"
    # It stopped inside its one part: not every entry looked at, and the part never written.
    assert stopped.done < ENTRIES == stopped.total
    assert stopped.progress["parts"] == 0
    assert not list((export_dir / f"job-{job.pk}").glob("part-*.ndjson"))
    row = AuditEvent.objects.get(action="export.finished", parameters__job=job.pk)
    assert row.parameters["state"] == "cancelled"


@pytest.mark.slow
def test_a_cancelled_search_driven_replay_stops_within_its_step(pool: Workers, r: redis.Redis, operator) -> None:
    """A replay of the entries a query matches searches in steps of at most a second (the search's budget
    holds per entry), saving between steps: a cancel stops it short of its range, its worker free again."""
    payload = json.dumps({"items": [f"i{i:03d}" for i in range(100)]})
    pipe = r.pipeline(transaction=False)
    for n in range(5000):
        pipe.xadd("slow", {"type": "order.created", "n": str(n), "data": payload})
    ids = [x.decode() for x in pipe.execute()]
    pool.shared()
    # ~10,000 CEL iterations an entry, matching none: the job reads the stream for a minute or so.
    query = 'data.items.exists(x, data.items.exists(y, x == y + "z"))'
    job = services.stream_replay(user=operator, conn=CONN, key=b"slow", start=ids[0], end=ids[-1],
                                 target=b"slow-copy", query=query)
    wait_for(lambda: job_state(job.pk).progress.get("scanned", 0) > 0, timeout=60,
             what="the replay to finish its first step", step=0.02)

    services.job_cancel(user=operator, job=job)
    later = services.stream_export_job(user=operator, conn=CONN, key=b"slow", start=ids[0], end=ids[0], fmt="ndjson")
    wait_for(lambda: finished(later.pk), timeout=120, what="the worker to take the next task", step=0.05)
    stopped = job_state(job.pk)
    assert stopped.state == "cancelled"
    assert stopped.progress["scanned"] < len(ids) and r.xlen("slow-copy") == 0
