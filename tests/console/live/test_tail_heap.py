"""Live tails keep their objects out of CPython's full collections, and give them back when they end.

Real uvicorn (in a thread of this process, so its collector is the test's) and redis-server. Whether an
object is frozen is CPython's own answer (``gc.get_objects()`` leaves the permanent generation out,
``gc.get_freeze_count()`` counts it); delivered IDs come from XADD's replies; that the subscriptions
are freed once their tails close is told by weak references.
"""

from __future__ import annotations

import asyncio
import gc
import json
import weakref

import redis

from streams_app.live.hub import Subscription, heap, running_hubs
from tests.console.live.helpers import RawClient
from tests.polling import wait_for


def subscriptions(key: bytes) -> list[Subscription]:
    """The subscriptions of ``key`` in the live server's hubs, read on the hub's own event loop."""
    out: list[Subscription] = []
    for loop, hub in running_hubs():
        if loop.is_running():

            async def snapshot(h=hub) -> list[Subscription]:
                tail = h.tails.get("default")
                return list(tail.subscribers.get(key, ())) if tail is not None else []

            out += asyncio.run_coroutine_threadsafe(snapshot(), loop).result(10)
    return out


def frozen(obj: object) -> bool:
    return not any(o is obj for o in gc.get_objects())


def read_ids_until(client: RawClient, last_id: str) -> list[str]:
    ids: list[str] = []
    while last_id not in ids:
        message = client.frame()
        if message is None:
            continue
        if message["type"] == "entry":
            ids.append(message["id"])
        elif message["type"] == "entries":
            ids += [e["id"] for e in message["entries"]]
    return ids


def live(client: RawClient) -> None:
    message = client.frame()
    assert message is not None and message["type"] == "status" and message["state"] == "live", message


def test_live_tails_are_frozen_out_of_full_collections_and_freed_after(
    asgi_server, cookies, r: redis.Redis
) -> None:
    wait_for(lambda: heap.live == 0, what="no tail left open by an earlier test")
    before = gc.get_freeze_count()  # the server's start-up freeze (streams_app/perf/heap.py), or 0
    key = b"heap"
    clients = [RawClient(asgi_server, cookies, key)]
    try:
        live(clients[0])
        (first,) = subscriptions(key)
        for _ in range(5):
            clients.append(RawClient(asgi_server, cookies, key))
            live(clients[-1])
        subs = subscriptions(key)
        assert len(subs) == 6
        assert gc.get_freeze_count() > before
        assert frozen(first)  # alive at the freezes its successors caused
        ids = [r.xadd(key, {"n": str(i), "data": json.dumps({"i": i})}).decode() for i in range(30)]
        for client in clients:
            assert read_ids_until(client, ids[-1]) == ids  # frozen or not, every entry, in order
        refs = [weakref.ref(s) for s in subs]
        del subs, first
    finally:
        for client in clients:
            client.close()
    wait_for(lambda: heap.live == 0, what="the tails to close")
    assert gc.get_freeze_count() == 0  # the last tail gave the heap back to the collector

    def freed() -> bool:
        gc.collect()
        return all(ref() is None for ref in refs)

    # Nothing of the closed tails is held. A closing socket leaves the hub at once and cancels its pump
    # task, which holds the subscription until the server's loop (another thread, maybe not scheduled
    # yet on a loaded machine) runs the cancellation: so poll.
    wait_for(freed, what="the closed tails' subscriptions to be freed")


def test_a_refused_tail_is_not_counted(asgi_server, cookies, r: redis.Redis) -> None:
    wait_for(lambda: heap.live == 0, what="no tail left open by an earlier test")
    before = gc.get_freeze_count()
    r.set(b"heap:string", b"not a stream")
    client = RawClient(asgi_server, cookies, b"heap:string")
    try:
        message = client.frame()
        assert message is not None and message["state"] == "error", message
    finally:
        client.close()
    assert heap.live == 0
    assert gc.get_freeze_count() == before  # nothing frozen for it
