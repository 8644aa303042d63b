"""The journey of one event on the page, the API and ``manage.py bus``.

Order 7 is published through the real event bus, fails in ``billing``, is retried twice, dead-lettered,
requeued by an operator through the console's API (an audit row) and then handled; ``ledger`` acks it at
once (:mod:`tests.journey_scenario`). The journey from the event id, from the entry ID and from a payload
expression shows exactly that, in order, on each surface, with the operator and the audit row on the
requeue; the same on the 3-node cluster. Expected IDs come from XRANGE of the stream, the audit row from
the database.
"""

from __future__ import annotations

from typing import Any

import pytest
import redis
from django.test import Client

from streams_app.audit.models import AuditEvent
from tests import journey_scenario as scenario
from tests.console.helpers import api, seg
from tests.console.journey.helpers import surfaces

STARTS = ("event id", "entry ID", "expression")


def _console_requeue(operator_client: Client):
    def requeue(dlq: str, dlq_id: str) -> None:
        reply = operator_client.post(api(f"/c/default/dlq/{seg(dlq)}/requeue"), {"ids": [dlq_id]},
                                     content_type="application/json")  # fmt: skip
        assert reply.status_code == 200, reply.content

    return requeue


def _start(want: scenario.Expected, which: str) -> str:
    return {"event id": want.event_id, "entry ID": want.first, "expression": "data.order_id == 7"}[which]


def _check(shown: dict[str, list[dict[str, Any]]], want: scenario.Expected, operator: str) -> None:
    row = AuditEvent.objects.get(action="dlq.requeue")
    assert row.target_ids == [want.dead] and row.username == operator
    for surface, steps in shown.items():
        scenario.check_steps(steps, want)
        [requeue] = [s for s in steps if s["kind"] == "requeue"]
        if surface == "page":
            assert f"by {operator}" in requeue["text"] and f"audit row {row.pk}" in requeue["text"], requeue
        else:
            assert requeue["audit"]["user"] == operator and requeue["audit"]["id"] == row.pk, (surface, requeue)
            assert requeue["audit"]["action"] == "dlq.requeue"


def test_the_journey_on_page_api_and_cli(redis_server, r: redis.Redis, viewer_client: Client,
                                         operator_client: Client, operator, capsys) -> None:  # fmt: skip
    want = scenario.run(redis_server.url(0), r, _console_requeue(operator_client))
    for which in STARTS:
        _check(surfaces(viewer_client, capsys, _start(want, which), scenario.STREAM), want, operator.username)


def test_the_journey_on_the_cluster(on_cluster: str, cluster, rc, viewer_client: Client, operator_client: Client,
                                    operator, capsys) -> None:  # fmt: skip
    want = scenario.run(cluster.url(), rc, _console_requeue(operator_client))
    for which in STARTS:
        _check(surfaces(viewer_client, capsys, _start(want, which), scenario.STREAM), want, operator.username)


@pytest.mark.parametrize("q", ["", "1-1"])
def test_the_form_and_its_refusals(q: str, r: redis.Redis, viewer_client: Client) -> None:
    """Without a start the page is the form; an entry ID without its stream is a 400 that says so."""
    response = viewer_client.get("/c/default/journey/", {"q": q} if q else {})
    assert response.status_code == (400 if q else 200)
    assert 'name="q"' in response.content.decode()
    reply = viewer_client.get(api("/c/default/journey/"), {"q": "1-1", "stream": ["a", "b"]})
    assert reply.status_code == 400 and "exactly one stream" in reply.json()["error"]["message"]
