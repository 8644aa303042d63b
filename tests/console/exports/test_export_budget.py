"""A direct download's query is bounded (docs/api.md#bounded-cost):

- before it runs: its cost by the expression alone (steps at 50 ns, :mod:`eventbus.search.cost`) times
  the range's entries must fit ``BUSCONSOLE_EXPORT_STREAM_BUDGET_S``, or a 400 says so and points at a
  background export (cancellable, one per user);
- as it runs: entries whose own data makes the query dearer are caught once its evaluations have spent
  the budget; the download stops incomplete (an error, never a short file that looks whole) and its
  audit row says why.

The ranges are the test's own counts; the bounds it relies on are lower bounds spelled out here (10,000
iterations of a comparison are at least 10,000 steps).
"""

from __future__ import annotations

import json

import pytest
import redis
from django.test import Client

from streams_app.audit.models import AuditEvent
from streams_app.exports.reader import QueryOverBudget
from tests.console.helpers import seg

URL = f"/api/v1/c/default/streams/{seg('budget')}/export"
HUNDRED = "[" + ",".join(str(i) for i in range(100)) + "]"
LITERAL = f"{HUNDRED}.exists(a, {HUNDRED}.exists(b, a == b + 1000))"  # 10,000 iterations an entry, whatever it holds
DATA = "data.items.exists(x, data.items.exists(y, x == y + 100000))"  # as dear as each entry's list


def fill(r: redis.Redis, n: int, items: int = 2) -> None:
    pipe = r.pipeline()
    for i in range(n):
        pipe.xadd("budget", {"type": "t", "data": json.dumps({"items": list(range(i, i + items))})})
    pipe.execute()


def test_a_query_dear_by_itself_over_many_entries_is_refused_before_it_runs(settings, viewer_client, r) -> None:
    settings.BUSCONSOLE_EXPORT_STREAM_BUDGET_S = 1
    fill(r, 3000)  # at least 3,000 x 10,000 steps x 50 ns = 1.5 s
    response = viewer_client.get(URL, {"format": "ndjson", "q": LITERAL})
    assert response.status_code == 400, response.content[:300]
    message = response.json()["error"]["message"]
    assert "3000 entries" in message and "background export" in message
    assert AuditEvent.objects.filter(action="export").latest("pk").outcome == AuditEvent.Outcome.ERROR
    started = viewer_client.post(URL, json.dumps({"format": "ndjson", "q": LITERAL}), content_type="application/json")
    assert started.status_code == 202, started.content  # the background export takes it


@pytest.mark.parametrize("query", ['type == "t"', "data", None])
def test_a_cheap_query_or_none_streams_the_same_range(query, settings, viewer_client: Client, r) -> None:
    settings.BUSCONSOLE_EXPORT_STREAM_BUDGET_S = 1
    fill(r, 3000)
    response = viewer_client.get(URL, {"format": "ndjson", **({"q": query} if query else {})})
    assert response.status_code == 200, (query, response.content[:200])
    assert len(b"".join(response.streaming_content).splitlines()) == 3000  # type: ignore[attr-defined]  # a streaming response: django-stubs type the test client's answer without streaming_content


def test_data_that_makes_the_query_dear_stops_the_download_at_its_budget(settings, viewer_client, r) -> None:
    settings.BUSCONSOLE_EXPORT_STREAM_BUDGET_S = 0.05
    fill(r, 200, items=100)  # 10,000 iterations an entry (under the per-entry bound): far over 50 ms in all
    response = viewer_client.get(URL, {"format": "ndjson", "q": DATA})
    assert response.status_code == 200  # its cost by the expression alone is small: it starts
    with pytest.raises(QueryOverBudget):
        b"".join(response.streaming_content)
    row = AuditEvent.objects.filter(action="export").latest("pk")
    assert row.outcome == AuditEvent.Outcome.ERROR and "took more than" in row.error
    assert row.parameters["scanned"] < 200
