"""Bulk actions record enough in their audit rows for a journey to find them: the
requeue-all job its DLQ range and when its copies were made, the search-driven requeue each dead letter
and its copy, the search-driven ack the range it acked, a selection too big for a row its ID range. Each
is checked against the IDs Redis holds, then on the journey of one of the events they touched."""

from __future__ import annotations

import json

import redis
from django.test import Client

from streams_app.audit.models import AuditEvent
from streams_app.audit.records import AUDIT_MAX_IDS, ActionRecord, audit_write
from streams_app.jobs import runner
from tests.console.helpers import api, group_url, seg

DLQ = "{orders}:dlq"


def _dead_letters(r: redis.Redis, n: int) -> tuple[list[str], list[str]]:
    """``n`` events of orders and their dead letters, as the bus files them."""
    firsts, dead = [], []
    for i in range(n):
        fields = {"type": "order.created", "data": json.dumps({"order_id": i}), "id": f"{i:032x}"}
        firsts.append(r.xadd("orders", fields).decode())
        dead.append(r.xadd(DLQ, {**fields, "dlq_original_stream": "orders", "dlq_original_id": firsts[-1],
                                 "dlq_group": "billing", "dlq_error": "ValueError: no", "dlq_retries": "0"}).decode())  # fmt: skip
    return firsts, dead


def _ms(entry_id: str) -> int:
    return int(entry_id.split("-")[0])


def test_requeue_all_records_its_range_and_the_journey_shows_it(r: redis.Redis, operator_client: Client,
                                                                viewer_client: Client, operator) -> None:  # fmt: skip
    firsts, dead = _dead_letters(r, 3)
    reply = operator_client.post(api(f"/c/default/dlq/{seg(DLQ)}/requeue"), {"all": True, "up_to": dead[-1]},
                                 content_type="application/json")  # fmt: skip
    assert reply.status_code == 202, reply.content
    runner.job_run(reply.json()["job"])
    copies = [(i.decode(), f) for i, f in r.xrange("orders") if b"_requeued_from" in f]
    assert [f[b"_requeued_from"].decode() for _, f in copies] == dead
    finished = AuditEvent.objects.get(action="dlq.requeue_all.finished")
    low, high = finished.parameters["dlq_range"]
    assert _ms(low) <= _ms(dead[0]) and _ms(dead[-1]) <= _ms(high) and finished.parameters["moved"] == 3
    start_ms, end_ms = finished.parameters["copies_ms"]
    assert all(start_ms <= _ms(i) <= end_ms for i, _ in copies)

    doc = viewer_client.get(api("/c/default/journey/"), {"q": firsts[1], "stream": "orders"}).json()
    [requeue] = [s for s in doc["steps"] if s["kind"] == "requeue"]
    assert requeue["entry_id"] == copies[1][0] and requeue["audit"]["action"] == "dlq.requeue_all"
    assert requeue["audit"]["user"] == operator.username and requeue["audit"]["ids"] == [dead[1]]
    [operator_step] = [s for s in doc["steps"] if s["kind"] == "operator"]
    assert operator_step["audit"]["id"] == finished.pk


def test_requeue_matching_records_each_copy(r: redis.Redis, operator_client: Client) -> None:
    _, dead = _dead_letters(r, 4)
    reply = operator_client.post(api(f"/c/default/dlq/{seg(DLQ)}/search/requeue"),
                                 {"q": "data.order_id >= 2", "up_to": dead[-1]}, content_type="application/json")  # fmt: skip
    assert reply.status_code == 202, reply.content
    runner.job_run(reply.json()["job"])
    made = {f[b"_requeued_from"].decode(): i.decode() for i, f in r.xrange("orders") if b"_requeued_from" in f}
    finished = AuditEvent.objects.get(action="dlq.requeue_matching.finished")
    assert finished.parameters["requeued"] == [[d, "orders", made[d]] for d in dead[2:]]
    assert finished.parameters["dlq_range"] == [dead[2], dead[3]]


def test_ack_matching_records_its_range(r: redis.Redis, operator_client: Client) -> None:
    ids = [r.xadd("orders", {"type": "t", "data": json.dumps({"n": n})}).decode() for n in range(6)]
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "w1", {"orders": ">"}, count=10)
    response = operator_client.post(group_url("orders", "billing") + "search/ack/",
                                    {"q": "data.n >= 2 && data.n <= 4", "up_to": ids[-1]})  # fmt: skip
    assert response.status_code == 302
    row = AuditEvent.objects.get(action="ack")
    assert row.parameters["acked_range"] == [ids[2], ids[4]] and row.affected == 3
    assert [p["message_id"].decode() for p in r.xpending_range("orders", "billing", "-", "+", 10)] == \
        [ids[0], ids[1], ids[5]]  # fmt: skip


def test_a_selection_bigger_than_a_row_keeps_its_range(db) -> None:
    ids = [f"{1000 + n}-{n % 3}" for n in range(AUDIT_MAX_IDS + 500)]
    row = audit_write(user=None, record=ActionRecord(action="ack", conn="default", stream=b"orders", ids=ids),
                      outcome="ok", error="")  # fmt: skip
    assert row.parameters["ids_count"] == len(ids) and len(row.target_ids) == AUDIT_MAX_IDS
    assert row.parameters["ids_range"] == [ids[0], ids[-1]]


def test_a_dlq_range_covers_only_the_dlq_s_ids(r: redis.Redis, operator_client: Client, viewer_client: Client) -> None:
    """A requeue-all's DLQ range is of the DLQ's IDs: a stream entry whose ID falls inside it (the two keys'
    IDs come from one clock) is not touched by it."""
    event = r.xadd("orders", {"type": "order.created", "id": "a" * 32}, id="100-0").decode()
    others = [r.xadd("orders", {"type": "order.created", "id": f"{n:032x}"}, id=f"{n}-0").decode() for n in (300, 301)]
    for dlq_id, original in zip(("50-0", "150-0"), others, strict=True):
        r.xadd(DLQ, {"type": "order.created", "dlq_original_stream": "orders", "dlq_original_id": original,
                     "dlq_group": "billing", "dlq_error": "ValueError: no"}, id=dlq_id)  # fmt: skip
    reply = operator_client.post(api(f"/c/default/dlq/{seg(DLQ)}/requeue"), {"all": True, "up_to": "150-0"},
                                 content_type="application/json")  # fmt: skip
    assert reply.status_code == 202, reply.content
    runner.job_run(reply.json()["job"])
    assert AuditEvent.objects.get(action="dlq.requeue_all.finished").parameters["dlq_range"] == ["50-0", "150-0"]
    doc = viewer_client.get(api("/c/default/journey/"), {"q": event, "stream": "orders"}).json()
    assert [s["kind"] for s in doc["steps"]] == ["publish"], doc["steps"]


def test_requeue_all_counts_its_copies_per_target_stream(r: redis.Redis, operator_client: Client) -> None:
    """A DLQ holds dead letters of several streams: the finished row counts the copies per target, the
    :data:`~streams_app.jobs.kinds.AUDIT_TARGETS` biggest by name and the rest as "others"."""
    from streams_app.jobs.kinds import AUDIT_TARGETS

    streams = [f"t{i:02}" for i in range(AUDIT_TARGETS + 2)]
    for n, stream in enumerate(streams):
        for _ in range(len(streams) - n):  # t00 the most, the last two the fewest
            r.xadd(DLQ, {"type": "x", "dlq_original_stream": stream, "dlq_original_id": "1-0", "dlq_group": "g",
                         "dlq_error": "E"})  # fmt: skip
    up_to = r.xrevrange(DLQ, count=1)[0][0].decode()
    reply = operator_client.post(api(f"/c/default/dlq/{seg(DLQ)}/requeue"), {"all": True, "up_to": up_to, "batch": 7},
                                 content_type="application/json")  # fmt: skip
    assert reply.status_code == 202, reply.content
    runner.job_run(reply.json()["job"])
    made = {s: sum(1 for _, f in r.xrange(s) if b"_requeued_from" in f) for s in streams}
    finished = AuditEvent.objects.get(action="dlq.requeue_all.finished")
    assert finished.parameters["per_target"] == {s: made[s] for s in streams[:AUDIT_TARGETS]}
    rest = streams[AUDIT_TARGETS:]
    assert finished.parameters["per_target_others"] == {"streams": len(rest), "entries": sum(made[s] for s in rest)}
    assert finished.parameters["moved"] == sum(made.values()) > 0 and r.xlen(DLQ) == 0


def test_an_autoclaim_sweep_records_what_it_claimed(r: redis.Redis, operator_client: Client, viewer_client: Client,
                                                    operator) -> None:  # fmt: skip
    """The sweep's row names each entry it claimed (the first AUDIT_MAX_IDS, and the range of all), so the
    journey of any of them says who claimed it, and to whom."""
    pipe = r.pipeline()
    for n in range(AUDIT_MAX_IDS + 5):
        pipe.xadd("orders", {"type": "t", "n": str(n)})
    ids = [i.decode() for i in pipe.execute()]
    r.xgroup_create("orders", "billing", id="0")
    r.xreadgroup("billing", "w1", {"orders": ">"}, count=len(ids))
    reply = operator_client.post(api("/c/default/streams/orders/groups/billing/autoclaim"),
                                 {"consumer": "rescuer", "min_idle_ms": 0, "count": 1000},
                                 content_type="application/json")  # fmt: skip
    assert reply.status_code == 200, reply.content
    claimed = [p["message_id"].decode() for p in r.xpending_range("orders", "billing", "-", "+", len(ids) + 1,
                                                                  consumername="rescuer")]  # fmt: skip
    assert claimed == ids
    row = AuditEvent.objects.get(action="autoclaim")
    assert row.target_ids == claimed[:AUDIT_MAX_IDS] and row.parameters["ids_count"] == len(claimed)
    assert row.parameters["ids_range"] == [claimed[0], claimed[-1]]
    for entry_id in (claimed[0], claimed[-1]):
        doc = viewer_client.get(api("/c/default/journey/"), {"q": entry_id, "stream": "orders"}).json()
        [step] = [s for s in doc["steps"] if s["kind"] == "operator"]
        assert f"claimed by {operator.username} to rescuer" in step["text"] and step["audit"]["id"] == row.pk
        [pending] = [s for s in doc["steps"] if s["kind"] == "delivery"]
        assert pending["consumer"] == "rescuer"


def test_an_action_in_the_publish_s_millisecond_comes_after_it(r: redis.Redis, viewer_client: Client) -> None:
    """Both clocks count milliseconds: an action on an entry written in the millisecond it was added in
    (an operator's add, a sweep right after) sits after it, not before."""
    from datetime import UTC, datetime

    entry_id = r.xadd("orders", {"type": "t"}, id="1700000000000-5").decode()
    row = audit_write(user=None, record=ActionRecord(action="ack", conn="default", stream=b"orders", ids=[entry_id]),
                      outcome="ok", error="")  # fmt: skip
    AuditEvent.objects.filter(pk=row.pk).update(at=datetime.fromtimestamp(1_700_000_000, UTC))
    doc = viewer_client.get(api("/c/default/journey/"), {"q": entry_id, "stream": "orders"}).json()
    assert [s["kind"] for s in doc["steps"]] == ["publish", "operator"]
