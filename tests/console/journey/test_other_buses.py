"""Issue 30 item 1, "Done when", last line: the journey with a seed-module DLQ and with an OmniDaemon DLQ.

Neither bus writes an event ``id`` or metric events: their dead letters are found by what the console's
conventions read (the seed ``streams`` module's ``{stream}:dlq`` holds the original fields with
``_retries``; OmniDaemon's ``omni-dlq:{group}`` holds a JSON document naming ``original_id``), their
retries by their payload. Each bus's steps are played here with redis-py as that bus sends them
(XREADGROUP, XADD of a retry, XADD to the DLQ, XACK; OmniDaemon retries by XCLAIM of the same entry),
as ``eventbus/conventions.py`` describes; the requeue is the operator's, through the console's API. The
journey from the entry ID and from a payload expression shows, on the page, the API and the console's
command line: the publish, the retries, the dead letter (before the requeue: where it is, its
convention, its error), the requeue with its audit row, and each group's acknowledgement.
"""

from __future__ import annotations

import json

import redis
from django.test import Client

from streams_app.audit.models import AuditEvent
from tests.console.helpers import api, seg
from tests.console.journey.helpers import api_doc, surfaces


def _requeue(operator_client: Client, dlq: str, dlq_id: str) -> str:
    reply = operator_client.post(api(f"/c/default/dlq/{seg(dlq)}/requeue"), {"ids": [dlq_id]},
                                 content_type="application/json")  # fmt: skip
    assert reply.status_code == 200, reply.content
    return reply.json()["requeued"][0]["new_id"]


def _read_ack(r: redis.Redis, stream: str, group: str) -> list[str]:
    got = r.xreadgroup(group, "w1", {stream: ">"}, count=100) or [[stream, []]]
    ids = [i.decode() for i, _ in got[0][1]]
    if ids:
        r.xack(stream, group, *ids)
    return ids


def _check(shown: dict, kinds: list[tuple[str, str]], acked: dict[str, list[str]], operator: str) -> None:
    row = AuditEvent.objects.get(action="dlq.requeue")
    for surface, steps in shown.items():
        stories = [(s["kind"], s["entry_id"]) for s in steps if s["kind"] != "delivery"]
        assert stories == kinds, (surface, stories)
        for group, ids in acked.items():
            assert [(s["entry_id"], s["state"]) for s in steps if s["kind"] == "delivery" and s["group"] == group] \
                == [(i, "acked") for i in ids], (surface, group)  # fmt: skip
        [requeue] = [s for s in steps if s["kind"] == "requeue"]
        assert (f"audit row {row.pk}" in requeue["text"]) if surface == "page" else requeue["audit"]["id"] == row.pk
        assert (operator in requeue["text"]) if surface == "page" else requeue["audit"]["user"] == operator


def test_a_seed_module_dead_letter(r: redis.Redis, viewer_client: Client, operator_client: Client, operator,
                                   capsys) -> None:  # fmt: skip
    stream, dlq = "payments", "payments:dlq"
    fields = {"event_type": "payment.capture", "data": json.dumps({"order_id": 7})}
    r.xadd(stream, {"event_type": "payment.capture", "data": json.dumps({"order_id": 6})})
    first = r.xadd(stream, fields).decode()
    for group in ("billing", "ledger"):
        r.xgroup_create(stream, group, id="0")
    _read_ack(r, stream, "ledger")
    [[_, delivered]] = r.xreadgroup("billing", "w1", {stream: ">"}, count=2)
    r.xack(stream, "billing", delivered[0][0])  # order 6 handled
    failing, copies = first, []
    for attempt in (1, 2):  # billing fails: the module re-adds the event with _retries, acks the old one
        copies.append(r.xadd(stream, {**fields, "_retries": str(attempt)}).decode())
        r.xack(stream, "billing", failing)
        [[_, [(entry_id, _)]]] = r.xreadgroup("billing", "w1", {stream: ">"}, count=1)
        failing = entry_id.decode()
    last = failing
    dead = r.xadd(dlq, {**fields, "_retries": "2"}).decode()  # after its retries: to {stream}:dlq
    r.xack(stream, "billing", last)
    _read_ack(r, stream, "ledger")

    before = api_doc(viewer_client, first, stream)
    [letter] = [s for s in before["steps"] if s["kind"] == "dead_letter"]
    assert letter["entry_id"] == dead and letter["state"] == "present" and "(streams)" in letter["text"]
    assert "payments:dlq" in letter["text"] and "after 2 retries" in letter["text"]

    requeued = _requeue(operator_client, dlq, dead)
    _read_ack(r, stream, "billing")
    _read_ack(r, stream, "ledger")
    kinds = [("publish", first), ("copy", copies[0]), ("copy", copies[1]), ("dead_letter", dead),
             ("requeue", requeued)]  # fmt: skip
    everything = [first, *copies, requeued]
    for q in (first, "data.order_id == 7"):
        _check(surfaces(viewer_client, capsys, q, stream), kinds,
               {"billing": everything, "ledger": everything}, operator.username)  # fmt: skip


def test_an_omnidaemon_dead_letter(r: redis.Redis, viewer_client: Client, operator_client: Client, operator,
                                   capsys) -> None:  # fmt: skip
    topic = "order.placed"
    stream, billing, ledger = f"omni-stream:{topic}", f"group:{topic}:billing", f"group:{topic}:ledger"
    dlq = f"omni-dlq:{billing}"
    message = {"task_id": "t-7", "topic": topic, "content": {"order_id": 7}}
    r.xadd(stream, {"data": json.dumps({"task_id": "t-6", "topic": topic, "content": {"order_id": 6}})})
    first = r.xadd(stream, {"data": json.dumps(message)}).decode()
    for group in (billing, ledger):
        r.xgroup_create(stream, group, id="0")
    _read_ack(r, stream, ledger)
    r.xreadgroup(billing, "agent-1", {stream: ">"}, count=10)
    r.xack(stream, billing, r.xrange(stream, count=1)[0][0])  # order 6 handled
    for _ in range(2):  # OmniDaemon's reclaim loop retries the same entry: XCLAIM, delivery count up
        r.xclaim(stream, billing, "agent-2", 0, [first])
    doc = {"topic": topic, "original_stream": stream, "original_id": first, "failed_message": message,
           "error": "ValueError: no stock", "retry_count": 3, "failed_at": 1_700_000_000.5}  # fmt: skip
    dead = r.xadd(dlq, {"data": json.dumps(doc)}).decode()
    r.xack(stream, billing, first)

    before = api_doc(viewer_client, first, stream)
    [letter] = [s for s in before["steps"] if s["kind"] == "dead_letter"]
    assert letter["entry_id"] == dead and letter["group"] == billing and letter["error"] == "ValueError: no stock"
    assert "(omnidaemon)" in letter["text"] and dlq in letter["text"]

    requeued = _requeue(operator_client, dlq, dead)
    _read_ack(r, stream, billing)
    _read_ack(r, stream, ledger)
    kinds = [("publish", first), ("dead_letter", dead), ("requeue", requeued)]
    for q in (first, "data.content.order_id == 7"):
        _check(surfaces(viewer_client, capsys, q, stream), kinds,
               {billing: [first, requeued], ledger: [first, requeued]}, operator.username)  # fmt: skip
