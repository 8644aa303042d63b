"""The tail's filter is search's language: the same text finds the same entries, masked, on the server.

Real uvicorn and redis-server. Each query runs through the stream search API and as a tail filter
(``?filter=``) on the same entries, replayed and live; both must equal a plain-Python predicate written
here per query, over the entries as the test wrote them and as the masking rule documents its output
(``••••``). Entry IDs are XADD's replies. Nothing is timed.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any

import httpx
import pytest
import redis

from streams_app.masking.models import MaskRule
from tests.console.helpers import seg
from tests.console.live.helpers import (
    RawClient,
    entries_of,
    filtered_through,
    frame,
    hub_stats,
    id_key,
    open_tail,
    run,
    until_live,
)

KEY = b"flt:orders"
MASKED = "••••"
Fields = dict[str, str]


def order(i: int) -> Fields:
    """One entry of the test stream: customers 4, 42, 14, "4" (a string), 40; some with an e-mail, a refund."""
    customer: dict[str, Any] = {"id": [4, 42, 14, 4, "4", 40][i % 6], "name": "Ada" if i % 3 == 0 else "Bob"}
    if i % 2 == 0:
        customer["email"] = f"ada{i}@example.com"
    data: dict[str, Any] = {
        "customer": customer,
        "items": [{"sku": f"S-{k}", "qty": k + 1} for k in range(1 + i % 3)],
        "total": 10.5 + i * 7.25,
    }
    if i % 5 == 0:
        data["refund"] = {"reason": "damaged"}
    return {
        "type": ["order.created", "order.paid", "order.refunded"][i % 3],
        "data": json.dumps(data, separators=(",", ":")),
        "note": "timeout after 3 s" if i % 4 == 1 else "ok",
        "x-request-id": f"r-{i}",
    }


def shown(fields: Fields) -> Fields:
    """The entry as every viewer sees it under the test's rule (``data.customer.email`` masked)."""
    data = json.loads(fields["data"])
    if "email" not in data["customer"]:
        return fields
    data["customer"]["email"] = MASKED
    return {**fields, "data": json.dumps(data, separators=(",", ":"), ensure_ascii=False)}


def data(f: Fields) -> dict[str, Any]:
    return json.loads(f["data"])


def text_in(needle: str) -> Callable[[Fields], bool]:
    """Plain text: a field's name or value (as shown) contains it, ignoring case."""
    return lambda f: any(needle.lower() in name.lower() or needle.lower() in value.lower() for name, value in f.items())


def customer_is(n: int) -> Callable[[Fields], bool]:
    return lambda f: type(data(f)["customer"]["id"]) is int and data(f)["customer"]["id"] == n


QUERIES: dict[str, Callable[[Fields], bool]] = {
    "data.customer.id == 4": customer_is(4),
    'type == "order.paid"': lambda f: f["type"] == "order.paid",
    'type in ["order.created", "order.refunded"]': lambda f: f["type"] in ("order.created", "order.refunded"),
    "size(data.items) > 1": lambda f: len(data(f)["items"]) > 1,
    "has(data.refund)": lambda f: "refund" in data(f),
    'data.customer.email == "ada0@example.com"': lambda f: False,  # masked: not a guess oracle
    f'data.customer.email == "{MASKED}"': lambda f: data(f)["customer"].get("email") == MASKED,
    "ada": text_in("ada"),
    "timeout": text_in("timeout"),
    "order.paid": text_in("order.paid"),
    "payment failed": text_in("payment failed"),
    'note.contains("timeout") && data.customer.id == 42': lambda f: "timeout" in f["note"] and customer_is(42)(f),
    'fields["x-request-id"] == "r-3"': lambda f: f["x-request-id"] == "r-3",
    "data.total > 100.0": lambda f: data(f)["total"] > 100.0,
}


def write(r: redis.Redis, numbers: range) -> dict[str, Fields]:
    return {r.xadd(KEY, order(i)).decode(): shown(order(i)) for i in numbers}


def searched(server, cookies: dict[str, str], q: str) -> list[str]:
    """The IDs the stream search API finds for ``q`` (one complete step: the stream is small)."""
    with httpx.Client(base_url=server.url, cookies=cookies) as http:
        reply = http.get(f"/api/v1/c/default/streams/{seg(KEY)}/search/", params={"q": q, "limit": 1000})
    assert reply.status_code == 200, reply.text
    body = reply.json()
    assert body["complete"]
    return [m["id"] for m in body["matches"]]


def test_the_tail_filter_finds_what_search_finds(asgi_server, cookies, r: redis.Redis) -> None:
    MaskRule.objects.create(stream_glob="flt:*", field_path="data.customer.email", action="mask")
    backlog = write(r, range(24))

    async def scenario() -> tuple[dict[str, list[dict]], dict[str, list[str]], dict[str, Fields]]:
        got: dict[str, list[dict]] = {}
        statuses: dict[str, list[str]] = {}
        async with contextlib.AsyncExitStack() as stack:
            sockets = {q: await stack.enter_async_context(open_tail(asgi_server, cookies, KEY, after="0-0", filter=q))
                       for q in QUERIES}
            for q, ws in sockets.items():
                first = await frame(ws)
                statuses[q] = [first["state"], first.get("query")]
                got[q] = entries_of(await until_live(ws))  # the backlog, replayed through the filter
            live = write(r, range(24, 48))
            last = list(live)[-1]
            for q, ws in sockets.items():
                got[q] += await filtered_through(ws, last)
        return got, statuses, live

    got, statuses, live = run(scenario())
    entries = {**backlog, **live}
    for q, predicate in QUERIES.items():
        expected = [entry_id for entry_id, fields in entries.items() if predicate(fields)]
        assert statuses[q] == ["filter", q], q
        assert [e["id"] for e in got[q]] == expected, q
        assert searched(asgi_server, cookies, q) == expected, q
    # the frames are the masked entries, as search shows them
    frames = [e for q in QUERIES for e in got[q]]
    assert frames and all("@example.com" not in json.dumps(e) for e in frames)
    assert [e["fields"] for e in got["data.customer.id == 4"]] == [
        entries[e["id"]] for e in got["data.customer.id == 4"]
    ]


@pytest.mark.slow
def test_customer_4_is_not_customer_42_and_the_old_syntax_is_read_as_cel(asgi_server, cookies, r) -> None:
    ids = write(r, range(12))
    expected = [entry_id for entry_id, fields in ids.items() if customer_is(4)(fields)]

    async def scenario(text: str) -> tuple[dict[str, Any], list[str]]:
        async with open_tail(asgi_server, cookies, KEY, after="0-0", filter=text) as ws:
            status = await frame(ws)
            return status, [e["id"] for e in entries_of(await until_live(ws))]

    status, got = run(scenario("data.customer.id=4"))
    assert status == {"type": "status", "state": "filter", "filter": "data.customer.id=4",
                      "query": "data.customer.id == 4", "kind": "expression", "read_as": "data.customer.id == 4"}
    assert got == expected == searched(asgi_server, cookies, "data.customer.id == 4")
    status, got = run(scenario("data.customer.id == 4"))
    assert status["read_as"] is None and got == expected
    # "name:value" was plain text for the old filter too, and is for search: it stays so
    status, got = run(scenario("type:order"))
    assert (status["kind"], status["query"], status["read_as"]) == ("text", "type:order", None) and got == []


DLQ = b"shipments:dlq"
DEAD_QUERIES: dict[str, Callable[[Fields], bool]] = {
    'error.contains("timeout")': lambda f: "timeout" in f["dlq_error"],
    "retries > 2": lambda f: int(f["dlq_retries"]) > 2,
    'group == "billing"': lambda f: f["dlq_group"] == "billing",
    "declined": text_in("declined"),
}


def dead_letter(i: int) -> Fields:
    """An event bus dead letter (docs/architecture.md#conventions-of-other-buses): the original fields and the ``dlq_*`` ones."""
    return {
        "type": "shipment.created",
        "data": json.dumps({"n": i}),
        "dlq_original_stream": "shipments",
        "dlq_original_id": f"1700000000000-{i}",
        "dlq_group": ["billing", "fulfillment"][i % 2],
        "dlq_error": ["timeout after 30 s", "card declined", "KeyError: 'sku'"][i % 3],
        "dlq_traceback": "Traceback (most recent call last): ...",
        "dlq_retries": str(i % 5),
        "dlq_failed_at": str(1700000000000 + i),
    }


@pytest.mark.slow
def test_on_a_dead_letter_queue_the_filter_has_search_s_dead_letter_variables(asgi_server, cookies, r) -> None:
    letters = {r.xadd(DLQ, dead_letter(i)).decode(): dead_letter(i) for i in range(15)}

    async def scenario(q: str) -> list[str]:
        async with open_tail(asgi_server, cookies, DLQ, after="0-0", filter=q) as ws:
            assert (await frame(ws))["state"] == "filter"
            return [e["id"] for e in entries_of(await until_live(ws))]

    for q, predicate in DEAD_QUERIES.items():
        expected = [i for i, fields in letters.items() if predicate(fields)]
        assert 0 < len(expected) < len(letters), q
        assert run(scenario(q)) == expected, q
        with httpx.Client(base_url=asgi_server.url, cookies=cookies) as http:
            reply = http.get(f"/api/v1/c/default/streams/{seg(DLQ)}/search/", params={"q": q, "limit": 1000})
        assert [m["id"] for m in reply.json()["matches"]] == expected, q


NESTED = "data.items.exists(a, data.items.exists(b, data.items.exists(c, a + b + c == 6)))"


def listing(n: int) -> Fields:
    return {"type": "t", "data": json.dumps({"items": list(range(1, n + 1))})}


def left_out(frames: list[dict[str, Any]]) -> int:
    return sum(f["count"] for f in frames if f.get("state") == "filter_costly")


@pytest.mark.slow
def test_entries_too_costly_for_the_filter_are_counted_as_search_counts_them(asgi_server, cookies, r) -> None:
    """A filter whose cost grows with the entry's own list: entries with 60 items are not evaluated (search
    leaves them out and counts them), and the tail says how many it left out, replayed and live."""
    sizes = [3, 60, 1, 60, 60, 3]
    backlog = {r.xadd(KEY, listing(n)).decode(): n for n in sizes}

    async def scenario() -> tuple[list[dict[str, Any]], list[dict[str, Any]], dict[str, int]]:
        async with open_tail(asgi_server, cookies, KEY, after="0-0", filter=NESTED) as ws:
            assert (await frame(ws))["state"] == "filter"
            replayed = await until_live(ws)
            live = {r.xadd(KEY, listing(n)).decode(): n for n in (60, 3, 60)}
            frames: list[dict[str, Any]] = []
            await filtered_through(ws, list(live)[-1], frames=frames)
            while left_out(frames) < list(live.values()).count(60):  # control frames may come after
                frames.append(await frame(ws))
            return replayed, frames, live

    replayed, frames, live = run(scenario())
    # 1+2+3 == 6: a list of 3 matches, a list of 1 cannot (1+1+1); a list of 60 is left out
    assert [e["id"] for e in entries_of(replayed)] == [i for i, n in backlog.items() if n == 3]
    assert [e["id"] for e in entries_of(frames)] == [i for i, n in live.items() if n == 3]
    assert left_out(replayed) == sizes.count(60)  # one frame for the replay
    assert left_out(frames) == 2  # in as many frames as batches
    with httpx.Client(base_url=asgi_server.url, cookies=cookies) as http:
        reply = http.get(f"/api/v1/c/default/streams/{seg(KEY)}/search/", params={"q": NESTED}).json()
    assert reply["too_costly"] == sizes.count(60) + 2
    assert [m["id"] for m in reply["matches"]] == [i for i, n in {**backlog, **live}.items() if n == 3]


async def expect_error(ws) -> dict[str, Any]:
    status = await frame(ws)
    assert (status["type"], status["state"]) == ("status", "filter_error"), status
    assert status["message"]
    return status


@pytest.mark.slow
def test_a_bad_filter_gets_a_status_frame_and_the_connection_stays_usable(asgi_server, cookies, r) -> None:
    before = write(r, range(6))

    async def scenario() -> tuple[dict[str, Any], dict[str, Any], list[str], list[str], dict[str, Fields]]:
        async with open_tail(asgi_server, cookies, KEY, after="0-0", filter="data.customer.id == ") as ws:
            refused = await expect_error(ws)
            # the same socket takes a corrected filter, from the position the address gave
            await ws.send(json.dumps({"type": "filter", "filter": "data.customer.id == 4"}))
            accepted = await frame(ws)
            replayed = [e["id"] for e in entries_of(await until_live(ws))]
            # a bad filter on a live tail is refused and the tail goes on with the filter it had
            await ws.send(json.dumps({"type": "filter", "filter": "size(data.items"}))
            await expect_error(ws)
            await ws.send("not json")
            assert (await frame(ws))["state"] == "filter_error"
            live = write(r, range(6, 18))
            later = [e["id"] for e in await filtered_through(ws, list(live)[-1])]
        return refused, accepted, replayed, later, live

    refused, accepted, replayed, later, live = run(scenario())
    assert refused["filter"] == "data.customer.id == " and "expression" in refused["message"]
    assert accepted["state"] == "filter" and accepted["query"] == "data.customer.id == 4"
    assert replayed == [i for i, f in before.items() if customer_is(4)(f)]
    assert later == [i for i, f in live.items() if customer_is(4)(f)]


@pytest.mark.slow
def test_a_filter_changed_on_the_socket_goes_on_from_the_same_position(asgi_server, cookies, r) -> None:
    async def scenario() -> tuple[list[str], list[str], dict[str, Fields], dict[str, Fields]]:
        async with open_tail(asgi_server, cookies, KEY, filter="data.customer.id == 4") as ws:
            assert (await frame(ws))["state"] == "filter"
            await until_live(ws)
            first = write(r, range(12))
            got = [e["id"] for e in await filtered_through(ws, list(first)[-1])]
            await ws.send(json.dumps({"type": "filter", "filter": "data.customer.id == 42"}))
            assert (await frame(ws))["query"] == "data.customer.id == 42"
            second = write(r, range(12, 24))
            got2 = [e["id"] for e in await filtered_through(ws, list(second)[-1])]
        return got, got2, first, second

    got, got2, first, second = run(scenario())
    assert got == [i for i, f in first.items() if customer_is(4)(f)]
    assert got2 == [i for i, f in second.items() if customer_is(42)(f)]


@pytest.mark.slow
def test_a_filtered_tail_says_how_far_it_read_so_a_resume_replays_only_what_is_new(
    asgi_server, cookies, r, settings
) -> None:
    """A filter that matches nothing still moves the client's position (``tested`` frames): a reconnect
    after it replays what arrived since, not everything since the last match, and skips nothing."""
    settings.BUSCONSOLE_TAIL_REPLAY_MAX = 10

    async def scenario() -> tuple[str, list[dict[str, Any]], dict[str, Fields]]:
        async with open_tail(asgi_server, cookies, KEY, filter="has(data.refund)") as ws:
            await until_live(ws)
            quiet = [r.xadd(KEY, {"type": "ping", "data": "{}"}).decode() for _ in range(30)]
            frames: list[dict[str, Any]] = []
            assert await filtered_through(ws, quiet[-1], frames=frames) == []
            position = max((f["last_id"] for f in frames if f["type"] == "tested"), key=id_key)
        missed = write(r, range(5))  # one of them (order 0) has a refund
        async with open_tail(asgi_server, cookies, KEY, filter="has(data.refund)", after=position) as ws:
            await frame(ws)
            return position, await until_live(ws), missed

    position, frames, missed = run(scenario())
    assert [f["type"] for f in frames if f["type"] not in ("entry", "entries", "status")] == []  # no skip note
    assert [e["id"] for e in entries_of(frames)] == [i for i, f in missed.items() if "refund" in data(f)]
    assert id_key(position) < id_key(list(missed)[0])


def test_each_distinct_filter_is_evaluated_once_per_entry_and_its_clients_share_frames(
    asgi_server, cookies, r
) -> None:
    """Five filtered clients with two distinct filters (the old syntax reads as one of them) and one
    plain client: entries x 2 evaluations, and the clients of one filter get the same bytes."""
    texts = ["data.customer.id == 4", "data.customer.id=4", "data.customer.id == 4", "has(data.refund)",
             "has(data.refund)"]
    plain = RawClient(asgi_server, cookies, KEY)
    clients = [RawClient(asgi_server, cookies, KEY, filter=t) for t in texts]
    try:
        for client in clients:
            assert client.frame()["state"] == "filter"
        for client in [plain, *clients]:
            assert client.frame()["state"] == "live"
        before = hub_stats()["default"]["filter_evaluations"]
        entries = write(r, range(30))
        last = list(entries)[-1]
        received = [raw_until(client, last) for client in clients]
        everything = raw_until(plain, last)
        evaluations = hub_stats()["default"]["filter_evaluations"] - before
    finally:
        for client in [plain, *clients]:
            client.close()
    assert evaluations == len(entries) * 2
    fours = [i for i, f in entries.items() if customer_is(4)(f)]
    refunds = [i for i, f in entries.items() if "refund" in data(f)]
    assert [ids_in(frames) for frames in received] == [fours, fours, fours, refunds, refunds]
    assert received[0] == received[1] == received[2] and received[3] == received[4]  # one frame per filter
    assert ids_in(everything) == list(entries)


def raw_until(client: RawClient, last_id: str) -> list[bytes]:
    """The entry frames (bytes as sent) a raw client receives until it has read past ``last_id``."""
    out: list[bytes] = []
    for _ in range(100_000):
        opcode, payload = client.raw_frame()
        if opcode != 0x1:
            continue
        message = json.loads(payload)
        if message["type"] in ("entry", "entries"):
            out.append(payload)
            if ids_in([payload])[-1] == last_id:
                return out
        elif message["type"] == "tested" and id_key(message["last_id"]) >= id_key(last_id):
            return out
    raise AssertionError("never reached the last entry")


def ids_in(frames: list[bytes]) -> list[str]:
    return [e["id"] for e in entries_of([json.loads(f) for f in frames])]
