"""The last error of a waiting retry is the failure of its own group, found by the retry's time.

The retries are made by the real event bus: one event fails in two groups of ``orders`` with different
errors (``shipping`` retries it, ``fulfillment`` rejects it). Expected errors come from the metric events
the worker wrote, read back with XRANGE and filtered in plain Python; never from the code under test.
"""

from __future__ import annotations

import hashlib

import msgpack
import redis
from django.test import Client

from eventbus import Bus, Event, Reject, RetryPolicy
from tests.console.helpers import bearer, stream_api, stream_url
from tests.console.retries.conftest import METRICS, RETRY_SET, STREAM, scheduled
from tests.eventbus.conftest import running
from tests.polling import wait_for

#: Retries waiting in ``shipping``: as many as the issue's page showed.
N = 13
#: Metric entries written after the failures: more than the 1,000 the page used to read.
FILLER_EVENTS = 600  # each rejected event writes two metric entries (failed, dead_lettered)


def ref(member: bytes, due: int) -> str:
    return f"{due}-{hashlib.sha1(member).hexdigest()}"


def fields_of(member: bytes) -> dict[bytes, bytes]:
    items = msgpack.unpackb(member, raw=True)
    return dict(zip(items[0::2], items[1::2], strict=True))


def metric_failures(r: redis.Redis, group: bytes) -> dict[bytes, tuple[bytes, bytes]]:
    """{event id: (error, failed entry ID)} of ``group``'s ``failed`` metric events, read with XRANGE."""
    out = {}
    for _, f in r.xrange(METRICS):
        if f.get(b"event") == b"failed" and f.get(b"group") == group:
            out[f[b"event_id"]] = (f[b"error"], f[b"entry_id"])
    return out


def two_groups_fail(redis_url: str, r: redis.Redis, *, filler: int = 0) -> list[str]:
    """``shipping`` fails each order (a retry due in 300 s), then ``fulfillment`` rejects the same orders,
    so its failures are the newer ones; then ``filler`` other events are rejected by ``notes``."""
    bus = Bus.from_url(redis_url, maxlen=None)

    @bus.on("order.created", stream=STREAM, group="shipping", start="0", retry=RetryPolicy(base=3600, jitter=0))
    def ship(event: Event) -> None:
        raise RuntimeError(f"no carrier for order {event.data['order_id']}")

    @bus.on("order.created", stream=STREAM, group="fulfillment", start="0")
    def fulfil(event: Event) -> None:
        raise Reject(f"out of stock for order {event.data['order_id']}")

    @bus.on("order.noted", stream=STREAM, group="notes", start="0")
    def note(event: Event) -> None:
        raise Reject("not interesting")

    try:
        ids = [bus.publish(STREAM, "order.created", {"order_id": i}) for i in range(N)]
        with running(bus, {"shipping"}, metrics_interval=0.05):
            wait_for(lambda: r.zcard(RETRY_SET) == N, what="shipping's retries to be scheduled")
            wait_for(lambda: len(metric_failures(r, b"shipping")) == N, what="shipping's failures")
        with running(bus, {"fulfillment"}, metrics_interval=0.05):
            wait_for(lambda: len(metric_failures(r, b"fulfillment")) == N, what="fulfillment's failures")
        if filler:
            bus.publish_many(STREAM, [("order.noted", {"n": i}) for i in range(filler)])
            with running(bus, {"notes"}, metrics_interval=0.05):
                wait_for(lambda: r.xlen("{orders}:dlq") == N + filler, what="the filler dead-lettered")
        return ids
    finally:
        bus.close()


def api_rows(client: Client) -> dict[bytes, dict]:
    """The API's retries by event id (one page: N is under the default page size)."""
    reply = client.get(stream_api(STREAM, "retries/")).json()
    assert reply["total"] == N and reply["next"] is None
    return {row["event_id"].encode(): row for row in reply["retries"]}


def page_errors(client: Client, r: redis.Redis) -> dict[bytes, str]:
    """The page's Last error cell per event id (the member's event id, read with msgpack)."""
    html = client.get(stream_url(STREAM, "retries/")).content.decode()
    by_ref = {ref(m, due): fields_of(m)[b"id"] for m, due in scheduled(r)}
    out = {}
    for chunk in html.split('<tr data-ref="')[1:]:
        row_ref = chunk.split('"', 1)[0]
        cell = chunk.split('class="error-cell">', 1)[1].split("</td>", 1)[0]
        out[by_ref[row_ref]] = cell
    return out


def check(client: Client, api_client: Client, r: redis.Redis) -> None:
    shipping = metric_failures(r, b"shipping")
    fulfillment = metric_failures(r, b"fulfillment")
    assert len(shipping) == len(fulfillment) == N
    assert all(shipping[e][0] != fulfillment[e][0] for e in shipping)  # two errors for each event
    rows = api_rows(api_client)
    assert set(rows) == set(shipping)
    for event_id, row in rows.items():
        assert row["group"] == "shipping"
        assert row["error"] == shipping[event_id][0].decode()
        assert row["failed_entry_id"] == shipping[event_id][1].decode()
    cells = page_errors(client, r)
    assert set(cells) == set(shipping)
    for event_id, cell in cells.items():
        assert shipping[event_id][0].decode() in cell
        assert "out of stock" not in cell and "not in the metric events" not in cell


def test_each_row_shows_its_own_groups_error(redis_server, r: redis.Redis, viewer, api_token) -> None:
    two_groups_fail(redis_server.url(0), r)
    client = Client()
    client.force_login(viewer)
    check(client, Client(**bearer(api_token(viewer))), r)


def test_errors_found_past_a_thousand_newer_metric_entries(
    redis_server, r: redis.Redis, viewer, api_token
) -> None:
    two_groups_fail(redis_server.url(0), r, filler=FILLER_EVENTS)
    newest = r.xrevrange(METRICS, count=1000)
    assert not any(f.get(b"group") == b"shipping" for _, f in newest)  # all past the old lookback
    client = Client()
    client.force_login(viewer)
    check(client, Client(**bearer(api_token(viewer))), r)


def test_a_retry_scheduled_by_an_older_worker_matches_event_and_group(
    r: redis.Redis, viewer_client: Client
) -> None:
    """A member without the bus's ``_failed_at`` (written before it existed): the failure of its own group
    at or before its due time is taken, not a newer failure of another group nor a later one of its own."""
    due = 1_800_000_000_000
    member = msgpack.packb([b"type", b"t", b"id", b"ev1", b"_retries", b"1", b"_group", b"shipping"])
    r.zadd(RETRY_SET, {member: due})
    base = {"stream": STREAM, "type": "t", "count": "1", "duration_ms": "1", "max_ms": "1", "consumer": "w",
            "ts": "0", "event_id": "ev1"}  # fmt: skip
    r.xadd(METRICS, {**base, "event": "failed", "group": "shipping", "entry_id": "1-1", "error": "old"},
           id=f"{due - 60_000}-0")  # fmt: skip
    r.xadd(METRICS, {**base, "event": "failed", "group": "shipping", "entry_id": "1-2", "error": "mine"},
           id=f"{due - 5_000}-0")  # fmt: skip
    r.xadd(METRICS, {**base, "event": "failed", "group": "fulfillment", "entry_id": "1-2", "error": "theirs"},
           id=f"{due - 4_000}-0")  # fmt: skip
    r.xadd(METRICS, {**base, "event": "failed", "group": "shipping", "entry_id": "1-3", "error": "later"},
           id=f"{due + 3_600_000}-0")  # fmt: skip
    reply = viewer_client.get(stream_api(STREAM, "retries/")).json()
    [row] = reply["retries"]
    assert (row["error"], row["failed_entry_id"]) == ("mine", "1-2")


def test_a_metrics_key_of_another_type_leaves_the_errors_unknown(r: redis.Redis, viewer_client: Client) -> None:
    """Someone's string under ``{orders}:metrics``: the retries are listed, their errors unknown, no 500."""
    member = msgpack.packb([b"type", b"t", b"id", b"ev1", b"_retries", b"1", b"_group", b"shipping",
                            b"_failed_id", b"1-1", b"_failed_at", b"1700000000000"])  # fmt: skip
    r.zadd(RETRY_SET, {member: 1_800_000_000_000})
    r.set(METRICS, "not a stream")
    reply = viewer_client.get(stream_api(STREAM, "retries/"))
    assert reply.status_code == 200
    [row] = reply.json()["retries"]
    assert (row["error"], row["failed_entry_id"]) == (None, "1-1")
    assert viewer_client.get(stream_url(STREAM, "retries/")).status_code == 200
