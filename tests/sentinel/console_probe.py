"""A console process whose own Redis (REDIS_URL) is a Sentinel URL: it uses every client of that Redis.

Run as ``python -m tests.sentinel.console_probe`` with the environment of a console process. For each
line read on stdin (a tag), it writes one JSON line: the cache's read-back of a value it set, whether it
took a job's lock, the message it sent itself through the channel layer, and the id of a Celery task it sent
(``resume_stalled_jobs``, for a worker to run). A step that fails says its error instead. The same
process answers every line, so a second line after a failover shows its clients followed the sentinels.
"""

from __future__ import annotations

import json
import sys

import django

django.setup()

from asgiref.sync import async_to_sync  # noqa: E402
from channels.layers import get_channel_layer  # noqa: E402
from django.core.cache import cache  # noqa: E402

from busconsole.celery import app  # noqa: E402
from busconsole.locks import renewable_lock  # noqa: E402


def attempt(step) -> object:
    try:
        return step()
    except Exception as exc:  # noqa: BLE001 - reported to the test
        return f"error: {type(exc).__name__}: {exc}"


def cached(tag: str) -> object:
    cache.set(f"probe-{tag}", tag, 300)
    return cache.get(f"probe-{tag}")


def locked(tag: str) -> object:
    """A job's lock (``busconsole:probe-<tag>``), taken and left to expire, so the test can see it."""
    return renewable_lock(f"probe-{tag}", timeout_s=300).acquire()


def channel(tag: str) -> object:
    layer = get_channel_layer()

    async def roundtrip() -> str:
        name = await layer.new_channel()
        await layer.send(name, {"type": "probe", "tag": tag})
        return (await layer.receive(name))["tag"]

    return async_to_sync(roundtrip)()


def task(tag: str) -> object:
    return app.send_task("streams_app.tasks.resume_stalled_jobs", kwargs={"stalled_after_s": 3600}).id


for line in sys.stdin:
    tag = line.strip()
    report = {name: attempt(lambda f=f, t=tag: f(t)) for name, f in
              (("cache", cached), ("lock", locked), ("channel", channel), ("task", task))}
    print(json.dumps(report), flush=True)
