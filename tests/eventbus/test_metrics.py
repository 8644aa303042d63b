"""Metric events in each stream's ``{stream}:metrics``."""

from __future__ import annotations

import redis

from eventbus import Bus, Event, RetryPolicy
from tests.eventbus.conftest import running
from tests.polling import wait_for


def test_metric_events(bus: Bus, r: redis.Redis) -> None:
    @bus.on("ok", stream="jobs", group="g", start="0")
    def ok(event: Event) -> None: ...

    @bus.on("bad", stream="jobs", group="g", start="0", max_retries=1, retry=RetryPolicy(base=0.01))
    def bad(event: Event) -> None:
        raise RuntimeError("nope")

    bus.publish_many("jobs", [("ok", n) for n in range(50)] + [("bad", 0)])
    with running(bus, metrics_interval=0.05):
        wait_for(lambda: r.xlen("{jobs}:dlq") == 1 and r.xpending("jobs", "g")["pending"] == 0,
                 what="one dead letter and nothing pending")

    rows = [{k.decode(): v.decode() for k, v in fields.items()} for _, fields in r.xrange("{jobs}:metrics")]
    by_kind: dict[str, list[dict[str, str]]] = {}
    for row in rows:
        by_kind.setdefault(row["event"], []).append(row)
    assert sum(int(row["count"]) for row in by_kind["processed"]) == 50
    assert {row["type"] for row in by_kind["processed"]} == {"ok"}
    assert len(by_kind["failed"]) == 2
    assert len(by_kind["retried"]) == 1
    assert len(by_kind["dead_lettered"]) == 1
    assert by_kind["dead_lettered"][0]["error"] == "RuntimeError: nope"
    for row in rows:
        assert (row["stream"], row["group"]) == ("jobs", "g")
        assert float(row["duration_ms"]) >= 0 and float(row["max_ms"]) <= float(row["duration_ms"]) + 1e-9
