"""A job continued after Celery's soft time limit keeps its queue and its priority.

Jobs are sent on the jobs' queue at their kind's priority (a fix before the queued reads). A job that
hits the task's soft time limit goes on in a new task; that task was sent without a priority, so an
export's continuation (priority 6) jumped ahead of the queued reads and an operator's queued replay
(priority 0) waited behind it no longer. Here the first send and the continuation of one export are
read from the broker itself (kombu's Redis lists, one per priority step, as ``test_queues`` reads them).

The task runs in this process (no worker may take its messages meanwhile), and the soft time limit
reaches it the way Celery's prefork pool delivers it to a child: SIGUSR1, handled by billiard's own
``soft_timeout_sighandler``, which raises ``SoftTimeLimitExceeded`` wherever the job's body is. That may
be inside one of the bus library's catch-alls (a search's evaluation, a value's decoding), which must
let it through (``eventbus.interrupts``): the last tests deliver the signal there.
"""

from __future__ import annotations

import json
import os
import signal
import threading
from collections.abc import Iterator

import msgpack
import pytest
import redis
from billiard.exceptions import SoftTimeLimitExceeded
from billiard.pool import soft_timeout_sighandler
from django.conf import settings

from busconsole.celery import app as celery_app
from eventbus import decoding
from eventbus.search.query import compile_query
from streams_app import services, tasks
from streams_app.jobs import runner as jobs
from streams_app.redis_ops.types import Entry
from tests.console.helpers import CONN
from tests.console.jobs.helpers import job_state
from tests.polling import wait_for

pytestmark = pytest.mark.django_db(transaction=True)

JOBS = "busconsole-jobs"
#: kombu's Redis transport keeps one list per priority step: the queue's own name for 0, then a suffix.
STEPS = (0, 3, 6, 9)
SLOW_QUERY = 'data.items.exists(x, data.items.exists(y, x == y + "z"))'  # ~10,000 CEL steps an entry


def _list_name(step: int) -> str:
    return JOBS if step == 0 else f"{JOBS}\x06\x16{step}"


def _messages(broker: redis.Redis) -> dict[int, list[dict]]:
    """Every message waiting on the jobs' queue, by the priority step of the list holding it."""
    return {step: [json.loads(m) for m in broker.lrange(_list_name(step), 0, -1)] for step in STEPS}


def _sent(broker: redis.Redis) -> list[tuple[int, str, str, int | None, str]]:
    """(list's step, task, args, the message's priority, its routing key) of each waiting message."""
    return [
        (step, m["headers"]["task"], m["headers"]["argsrepr"], m["properties"].get("priority"),
         m["properties"]["delivery_info"]["routing_key"])
        for step, found in _messages(broker).items() for m in found
    ]


@pytest.fixture
def soft_limit() -> Iterator[None]:
    """SIGUSR1 raises SoftTimeLimitExceeded in this process, as in a prefork child of a Celery worker."""
    before = signal.signal(signal.SIGUSR1, soft_timeout_sighandler)
    yield
    signal.signal(signal.SIGUSR1, before)


@pytest.fixture
def broker() -> Iterator[redis.Redis]:
    client = redis.Redis.from_url(settings.CELERY_BROKER_URL)
    celery_app.control.purge()
    yield client
    celery_app.control.purge()  # no worker here: a later test's worker must not run these
    client.close()


def test_a_job_continued_after_the_soft_time_limit_keeps_its_queue_and_priority(
    broker: redis.Redis, soft_limit: None, r: redis.Redis, viewer
) -> None:
    payload = json.dumps({"items": [f"i{i:03d}" for i in range(100)]})
    pipe = r.pipeline(transaction=False)
    for i in range(3000):
        pipe.xadd("big", {"type": "order.created", "n": str(i), "data": payload})
    pipe.execute()

    job = services.stream_export_job(user=viewer, conn=CONN, key=b"big", fmt="ndjson", q=SLOW_QUERY)
    [first] = _sent(broker)  # the first send, as the broker holds it
    assert first == (6, jobs.RUN_JOB_TASK, f"({job.pk},)", 6, JOBS)  # an export is a read: priority 6
    broker.delete(*(_list_name(step) for step in STEPS))  # taken, as a worker would

    def limit_once_working() -> None:
        # The job's body is at work (its first progress saved): the time limit strikes it there.
        wait_for(lambda: job_state(job.pk).progress.get("columns") is not None, timeout=60,
                 what="the export to start", step=0.01)
        os.kill(os.getpid(), signal.SIGUSR1)

    timer = threading.Thread(target=limit_once_working, daemon=True)
    timer.start()
    tasks.run_job.apply(args=(job.pk,))  # in this thread: the signal's handler runs here
    timer.join(10)

    stopped = job_state(job.pk)
    assert stopped.state == "running" and stopped.done < 3000  # stopped by the limit, to go on elsewhere
    # The continuation waits on the same queue, in the same priority list, with the same priority.
    assert _sent(broker) == [first]
    services.job_cancel(user=viewer, job=stopped)


@pytest.mark.parametrize(
    ("text", "evaluator"),
    [(SLOW_QUERY, "execute"), ('type == "order.created"', "fast")],
    ids=["inside CEL", "inside the fast path"],
)
def test_the_soft_time_limit_striking_inside_an_evaluation_stops_the_search(
    soft_limit: None, text: str, evaluator: str
) -> None:
    """The limit's signal, delivered while an entry is being evaluated, reaches the job's code: the
    search used to count it as that entry's "no match" and scan on towards the hard limit's SIGKILL.
    Any other error inside an evaluation still means "no match" (in the fast path: CEL answers)."""
    payload = json.dumps({"items": [f"i{i:03d}" for i in range(100)]}).encode()
    entry = Entry("1-0", ((b"type", b"order.created"), (b"data", payload)))
    query = compile_query(text)
    real = getattr(query, evaluator)
    assert real is not None, f"{text!r} has no {evaluator} evaluator"
    assert query.matches(entry) is (evaluator == "fast")  # the answer without a signal

    def struck(*args: object) -> object:
        os.kill(os.getpid(), signal.SIGUSR1)  # the handler runs as soon as this call returns
        return real(*args)

    setattr(query, evaluator, struck)
    with pytest.raises(SoftTimeLimitExceeded):
        query.matches(entry)

    def broken(*args: object) -> object:
        raise ValueError("no such key")

    setattr(query, evaluator, broken)
    if evaluator == "fast":
        assert query.matches(entry) is True  # CEL answers instead, as for an entry the fast path cannot
    else:
        assert query.matches(entry) is False


@pytest.mark.parametrize("where", ["json", "msgpack"])
def test_the_soft_time_limit_striking_inside_a_decoding_stops_the_job(
    soft_limit: None, monkeypatch: pytest.MonkeyPatch, where: str
) -> None:
    """Decoding a value renders anything (hex at worst) whatever goes wrong inside it, but the limit's
    signal is no value's fault: it reaches the job, not the page as a hex dump of a JSON value. Struck
    in the JSON attempt it meets the decoder's last resort; inside msgpack's unpacking, the msgpack
    attempt's own catch-all first."""
    raw = {"json": b'{"order_id": 1}', "msgpack": msgpack.packb({"order_id": 1})}[where]
    owner, name = {"json": (decoding, "_try_json"), "msgpack": (msgpack, "unpackb")}[where]
    assert decoding.decode_value(raw).value == {"order_id": 1}  # the answer without a signal
    real = getattr(owner, name)

    def struck(*args: object, **kwargs: object) -> object:
        os.kill(os.getpid(), signal.SIGUSR1)  # the handler runs as soon as this call returns
        return real(*args, **kwargs)

    monkeypatch.setattr(owner, name, struck)
    with pytest.raises(SoftTimeLimitExceeded):
        decoding.decode_value(raw)

    def broken(*args: object, **kwargs: object) -> object:
        raise RecursionError("a bug")

    monkeypatch.setattr(owner, name, broken)
    assert decoding.decode_value(raw).format == "hex"  # the last resort, as before
