"""Every retry of an event says where it has been: its first publish, the attempt that failed and when.
Expected values are the entries Redis holds, read back with XRANGE."""

from __future__ import annotations

import redis

from eventbus import Bus, Event, RetryPolicy
from tests.eventbus.conftest import running, server_ms
from tests.polling import wait_for


def test_retries_carry_the_first_publish_and_the_failed_attempt(bus: Bus, r: redis.Redis) -> None:
    @bus.on("order.created", stream="orders", group="billing", start="0", max_retries=3,
            retry=RetryPolicy(base=0.01))  # fmt: skip
    def charge(event: Event) -> None:
        raise RuntimeError("card declined")

    before = server_ms(r)
    bus.publish("orders", "order.created", {"order_id": 7})
    with running(bus):
        wait_for(lambda: r.xlen("{orders}:dlq") == 1, what="the order to be dead-lettered")
    after = server_ms(r)

    entries = r.xrange("orders")
    assert len(entries) == 4  # the publish and three retries
    first_id = entries[0][0]
    assert b"_first_id" not in entries[0][1]
    for (previous_id, _), (_, fields) in zip(entries, entries[1:], strict=False):
        assert fields[b"_first_id"] == first_id
        assert fields[b"_failed_id"] == previous_id
        # scheduled after the failed attempt was added and before the retry was re-added
        assert int(previous_id.split(b"-")[0]) <= int(fields[b"_failed_at"]) <= after
    assert before <= int(entries[1][1][b"_failed_at"])

    [(_, dead)] = r.xrange("{orders}:dlq")
    assert dead[b"_first_id"] == first_id  # the first publish
    assert dead[b"dlq_original_id"] == entries[-1][0]  # the last attempt
