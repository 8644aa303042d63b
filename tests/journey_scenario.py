"""The journey's scenario, run through the real event bus on a real Redis (one server or
the cluster): order 7 fails in group ``billing``, is retried twice, is dead-lettered, is requeued by an
operator (``requeue``: the console's API in the console tests, the bus's command line here) and then
succeeds; group ``ledger`` acknowledges it at once. Orders 6 and 8 go through both groups untouched.

:func:`expected` computes what the journey must show from Redis itself (XRANGE of the stream) and from
the scenario's own script, never from the journey's code.
"""

from __future__ import annotations

import json
import threading
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any

from eventbus import Bus, Event, RetryPolicy
from eventbus import keys as bus_keys
from tests.eventbus.conftest import running
from tests.polling import wait_for

STREAM = "orders"
FAILING, ACKING = "billing", "ledger"
ERROR = "RuntimeError: card declined"


@dataclass(frozen=True)
class Expected:
    event_id: str
    first: str  # the first publish
    retries: list[str]  # the two retry copies, in order
    dead: str  # the dead letter's ID (gone from the DLQ once requeued)
    requeued: str  # the requeued copy

    def failing_steps(self) -> list[tuple[str, str]]:
        """(kind, entry) of the failing group's story, in order."""
        a, (b, c) = self.first, self.retries
        return [("failed", a), ("retry_scheduled", a), ("retry", b), ("failed", b), ("retry_scheduled", b),
                ("retry", c), ("failed", c), ("dead_letter", self.dead), ("requeue", self.requeued),
                ("delivery", self.requeued)]  # fmt: skip

    def acking_steps(self) -> list[tuple[str, str, str]]:
        """(kind, entry, state) of the other group's steps: the publish acked, every copy skipped."""
        return [("delivery", self.first, "acked")] + [
            ("delivery", i, "skipped") for i in (*self.retries, self.requeued)
        ]


def run(url: str, raw: Any, requeue: Callable[[str, str], None]) -> Expected:
    """Run the scenario; ``raw`` is a redis-py client (plain or cluster) for waiting and reading back,
    ``requeue(dlq_key, dlq_id)`` the operator's requeue."""
    bus = Bus.from_url(url, maxlen=None)
    failing = threading.Event()
    failing.set()

    @bus.on("order.created", stream=STREAM, group=FAILING, start="0", max_retries=2,
            retry=RetryPolicy(base=0.01, jitter=0))  # fmt: skip
    def charge(event: Event) -> None:
        if event.data["order_id"] == 7 and failing.is_set():
            raise RuntimeError("card declined")

    @bus.on("order.created", stream=STREAM, group=ACKING, start="0")
    def book(event: Event) -> None:
        pass

    dlq = bus_keys.dlq_key(STREAM)
    try:
        for order in (6, 7, 8):
            bus.publish(STREAM, "order.created", {"order_id": order})
        with running(bus, metrics_interval=0.05):
            wait_for(lambda: raw.xlen(dlq) == 1 and _settled(raw), what="order 7 to be dead-lettered")
        failing.clear()
        [(dead_id, _)] = raw.xrange(dlq)
        requeue(dlq, dead_id.decode())
        with running(bus, metrics_interval=0.05):
            wait_for(lambda: raw.xlen(STREAM) == 6 and _settled(raw), what="the requeued copy to be handled")
    finally:
        bus.close()
    return expected(raw)


def _settled(raw: Any) -> bool:
    groups = raw.xinfo_groups(STREAM)
    last = raw.xrevrange(STREAM, count=1)[0][0]
    return len(groups) == 2 and all(g["pending"] == 0 and g["last-delivered-id"] == last for g in groups)


def expected(raw: Any) -> Expected:
    """The event's entries as Redis holds them, classified by the fields the bus wrote."""
    order7 = [(i.decode(), f) for i, f in raw.xrange(STREAM) if json.loads(f[b"data"])["order_id"] == 7]
    first = order7[0]
    retries = [i for i, f in order7 if b"_failed_id" in f and b"_requeued_from" not in f]
    [(requeued, fields)] = [(i, f) for i, f in order7 if b"_requeued_from" in f]
    assert len(order7) == 4 and len(retries) == 2
    return Expected(event_id=first[1][b"id"].decode(), first=first[0], retries=retries,
                    dead=fields[b"_requeued_from"].decode(), requeued=requeued)  # fmt: skip


def check_steps(steps: list[dict[str, Any]], want: Expected) -> None:
    """The journey's steps (JSON) tell exactly the scenario, in order."""
    failing = [(s["kind"], s.get("entry_id")) for s in steps if s.get("group") == FAILING or s["kind"] in
               ("retry", "requeue", "dead_letter") and s.get("group") in (FAILING, None)]  # fmt: skip
    assert failing == want.failing_steps(), failing
    acking = [(s["kind"], s.get("entry_id"), s.get("state")) for s in steps if s.get("group") == ACKING]
    assert acking == want.acking_steps(), acking
    kinds = [s["kind"] for s in steps]
    assert kinds[0] == "publish" and steps[0]["entry_id"] == want.first
    dead = next(s for s in steps if s["kind"] == "dead_letter")
    assert ERROR in (dead.get("error") or dead["text"]) and dead["group"] == FAILING  # the page shows it in its text
    final = next(s for s in steps if s["kind"] == "delivery" and s.get("entry_id") == want.requeued
                 and s.get("group") == FAILING)  # fmt: skip
    assert final["state"] == "acked"
