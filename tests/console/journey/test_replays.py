"""Replay copies on an event's journey: the ``_requeued_from`` chain both ways,
and replay copies.

A replay is always a background job (a range, or the entries of a range a search matches); its
``replay.finished`` audit row names what it made: the target, how many copies, their ID range and, per
batch, the source IDs it copied and the copies' IDs (a batch's copies are contiguous in the target: one
script adds them). The journey of an event shows each of its copies (stream, new entry ID, time, who
replayed it and the audit row) and, started from a copy, leads back to the original. Expected values come
from XRANGE of the streams and the rows in the database.
"""

from __future__ import annotations

import json

import redis
from django.test import Client

from eventbus.journey.timeline import when
from streams_app import services
from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner
from tests.console.helpers import api
from tests.console.journey.helpers import api_doc, page_steps


def _orders(r: redis.Redis, n: int) -> list[str]:
    return [r.xadd("orders", {"type": "order.created", "data": json.dumps({"order_id": i}),
                              "id": f"{i:032x}"}).decode() for i in range(n)]  # fmt: skip


def _ms(entry_id: str) -> int:
    return int(entry_id.split("-")[0])


def _replays(doc: dict) -> list[dict]:
    return [s for s in doc["steps"] if s["kind"] == "replay"]


def test_a_replay_into_another_stream_and_one_into_the_same(r: redis.Redis, viewer_client: Client,
                                                            operator_client: Client, operator) -> None:  # fmt: skip
    ids = _orders(r, 6)
    reply = operator_client.post(api("/c/default/streams/orders/replay"),
                                 {"start": ids[1], "end": ids[4], "target": "orders-replayed", "batch": 2},
                                 content_type="application/json")  # fmt: skip
    assert reply.status_code == 202, reply.content
    runner.job_run(reply.json()["job"])
    other = {f[b"_replayed_from"].decode(): i.decode() for i, f in r.xrange("orders-replayed")}
    assert sorted(other) == ids[1:5]
    job = services.stream_replay(user=operator, conn="default", key=b"orders", start=ids[0], end=ids[-1],
                                 target=b"orders", query="data.order_id == 2")  # fmt: skip
    runner.job_run(job.pk)
    [(same_id, same)] = [(i.decode(), f) for i, f in r.xrange("orders") if b"_replayed_from" in f]
    assert same[b"_replayed_from"].decode() == ids[2]

    # the rows name what each job made: target, count, the copies' range, each batch's source and copies
    ranged, matching = AuditEvent.objects.filter(action="replay.finished").order_by("pk")
    made = ranged.parameters["replayed"]
    copies = sorted(other.values(), key=lambda i: tuple(map(int, i.split("-"))))
    assert made["target"] == "orders-replayed" and made["count"] == 4 and made["copy_range"] == [copies[0], copies[-1]]
    assert made["batches"] == [[ids[1], ids[2], copies[0], copies[1], 2], [ids[3], ids[4], copies[2], copies[3], 2]]
    assert matching.parameters["replayed"]["target"] == "orders" and matching.parameters["replayed"]["count"] == 1
    assert matching.parameters["replayed"]["copy_range"] == [same_id, same_id]

    # from the original, and from each copy: the journey of order 2 holds both copies, with who made them
    for q, stream in ((ids[2], "orders"), (other[ids[2]], "orders-replayed"), (same_id, "orders")):
        doc = api_doc(viewer_client, q, stream)
        assert doc["stream"] == "orders" and doc["first_id"] == ids[2], (q, doc["notes"])
        shown = {(s["key"], s["entry_id"]): s for s in _replays(doc)}
        assert set(shown) == {("orders-replayed", other[ids[2]]), ("orders", same_id)}, (q, doc["steps"])
        for (_key, copy_id), step in shown.items():
            assert step["at"] == when(_ms(copy_id))
            assert step["audit"]["user"] == operator.username and step["audit"]["action"] == "replay.finished"
        assert shown[("orders-replayed", other[ids[2]])]["audit"]["id"] == ranged.pk
        assert shown[("orders", same_id)]["audit"]["id"] == matching.pk
    steps, _ = page_steps(viewer_client, other[ids[2]], "orders-replayed")
    [text] = [s["text"] for s in steps if s["kind"] == "replay" and s["entry_id"] == other[ids[2]]]
    assert "orders-replayed" in text and f"by {operator.username}" in text and f"audit row {ranged.pk}" in text
    # another event of the same replay: its own copy, not order 2's
    doc = api_doc(viewer_client, ids[4], "orders")
    assert [(s["key"], s["entry_id"]) for s in _replays(doc)] == [("orders-replayed", other[ids[4]])]
