"""The journey with a seed-module DLQ and with an OmniDaemon DLQ.

Neither bus writes an event ``id`` or metric events: their dead letters are found by what the console's
conventions read (the seed ``streams`` module's ``{stream}:dlq`` holds the original fields with
``_retries``; OmniDaemon's ``omni-dlq:{group}`` holds a JSON document naming ``original_id``), their
retries and requeued copies by their payload (OmniDaemon's by the task id in it). The requeue is the
operator's, through the console's API. The journey from the entry ID and from a payload expression shows,
on the page, the API and the console's command line: the publish, the retries, the dead letter (before
the requeue: where it is, its convention, its error), the requeue with its audit row, and each group's
acknowledgement.

**OmniDaemon is the real library**: its ``RedisStreamEventBus`` runs in the interop venv
(``tests/console/interop/clients/omnidaemon_side.py``, the interop tests' fixtures), publishes, fails,
reclaims and dead-letters by itself, and consumes the requeued copy. (It found what hand-written entries
hid: OmniDaemon's dead letter counts ``delivery_attempts`` in its copy of the message, so the requeued
copy is not the original's bytes.)

**The seed ``streams`` module is played with redis-py** (XREADGROUP, XADD of a retry with ``_retries``,
XADD to ``{stream}:dlq``, XACK, as ``eventbus/conventions.py`` describes it), because no code of it
exists to run: the seed document (``../shared/seeds/001_7178cd3bb3a34ba8.txt``) describes its design in
3 KB of prose (producer, dispatcher, ARQ retries, the DLQ after 5 retries), the repository vendors none
of it, and no package of it is published; every other test of its convention
(``tests/console/redis_ops/test_requeue_plans.py``, ``tests/console/services/test_dlq.py``) writes its
entries by hand the same way.
"""

from __future__ import annotations

import json
from collections.abc import Callable

import redis
from django.test import Client

from streams_app.audit.models import AuditEvent
from tests.console.helpers import api, seg
from tests.console.interop.conftest import interop_python, library, run_library, url  # noqa: F401 - its fixtures
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


def test_an_omnidaemon_dead_letter(run_library: Callable, r: redis.Redis, viewer_client: Client,  # noqa: F811
                                   operator_client: Client, operator, capsys, tmp_path) -> None:  # fmt: skip
    """OmniDaemon itself (``clients/omnidaemon_side.py`` in the interop venv): its agent ``billing`` fails on
    order 7 until its reclaim loop dead-letters it, agent ``ledger`` handles it at once; the operator requeues
    it through the console's API and OmniDaemon's ``billing`` then consumes the copy."""
    topic, stream = "file.uploaded", "omni-stream:file.uploaded"
    billing, ledger = f"group:{topic}:file-processor", f"group:{topic}:ledger"
    dlq = f"omni-dlq:{billing}"
    env = {"JSON_STORAGE_DIR": str(tmp_path / "omnidaemon")}  # read by OmniDaemon at import time
    run_library("omnidaemon_side.py", "fail_then_dead_letter", env=env, error="no stock", dead=1, also=["ledger"],
                messages=[["t-6", {"order_id": 6}], ["t-7", {"order_id": 7, "fail": True}]])  # fmt: skip
    [first] = [i.decode() for i, f in r.xrange(stream) if json.loads(f[b"data"])["task_id"] == "t-7"]
    [(dead, doc)] = [(i.decode(), json.loads(f[b"data"])) for i, f in r.xrange(dlq)]
    assert doc["original_id"] == first

    before = api_doc(viewer_client, first, stream)
    [letter] = [s for s in before["steps"] if s["kind"] == "dead_letter"]
    assert letter["entry_id"] == dead and letter["group"] == billing and letter["error"] == doc["error"]
    assert "(omnidaemon)" in letter["text"] and dlq in letter["text"]

    requeued = _requeue(operator_client, dlq, dead)
    run_library("omnidaemon_side.py", "consume_requeued", env=env, count=1, last_id=requeued, also=["ledger"])
    kinds = [("publish", first), ("dead_letter", dead), ("requeue", requeued)]
    for q in (first, "data.content.order_id == 7"):
        _check(surfaces(viewer_client, capsys, q, stream), kinds,
               {billing: [first, requeued], ledger: [first, requeued]}, operator.username)  # fmt: skip
