"""Retries made by the real event bus: a handler that always fails, run by a real worker until the
bus has scheduled one delayed retry per event, then stopped so the schedule stays as the bus left it."""

from __future__ import annotations

from collections.abc import Iterator
from types import SimpleNamespace

import pytest
import redis
import redis.cluster

from eventbus import Bus, Event, RetryPolicy
from tests.eventbus.conftest import running
from tests.polling import wait_for

STREAM = "orders"
RETRY_SET = "{orders}:retry"
DLQ = "{orders}:dlq"
METRICS = "{orders}:metrics"


def scheduled(r: redis.Redis, key: str = RETRY_SET) -> list[tuple[bytes, int]]:
    """The set as Redis holds it: (member, due ms), soonest first."""
    return [(m, int(s)) for m, s in r.zrange(key, 0, -1, withscores=True)]


def make_retries(
    redis_url: str, r: redis.Redis | redis.cluster.RedisCluster, n: int, *, stream: str = STREAM
) -> list[str]:
    """Publish ``n`` events whose handler fails; returns their event ids once each waits in the set.

    The first retry is due in 300 s (the policy's cap), so nothing the test does not do moves it.
    """
    bus = Bus.from_url(redis_url, maxlen=None)

    @bus.on(
        "order.created", stream=stream, group="billing", start="0", retry=RetryPolicy(base=3600, jitter=0)
    )
    def charge(event: Event) -> None:
        raise RuntimeError(f"card declined for order {event.data['order_id']}")

    try:
        ids = [bus.publish(stream, "order.created", {"order_id": i}) for i in range(n)]
        retry_set = "{" + stream + "}:retry" if "{" not in stream else stream + ":retry"
        with running(bus, metrics_interval=0.05):
            wait_for(lambda: r.zcard(retry_set) == n, what=f"{n} retries to be scheduled")
            wait_for(lambda: len(failures(r, stream)) == n, what="the failures in the metric events")
        events = [fields[b"id"].decode() for _, fields in r.xrange(stream)]
        assert len(ids) == n
        return events
    finally:
        bus.close()


def failures(r: redis.Redis, stream: str = STREAM) -> dict[bytes, bytes]:
    """{event id: error} of the ``failed`` metric events the worker wrote for ``stream``."""
    key = "{" + stream + "}:metrics" if "{" not in stream else stream + ":metrics"
    if not r.exists(key):
        return {}
    return {f[b"event_id"]: f[b"error"] for _, f in r.xrange(key) if f.get(b"event") == b"failed"}


@pytest.fixture
def bus_retries(redis_server, r: redis.Redis) -> Iterator[SimpleNamespace]:
    events = make_retries(redis_server.url(0), r, 5)
    yield SimpleNamespace(r=r, events=events)
