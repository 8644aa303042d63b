"""The progress SSE endpoint masks: a viewer's ``GET /c/<conn>/progress/<key>/events/``
gets every event's data masked as the entries API shows it, for a progress stream and for any other key,
a DLQ (masked by its origin's rules too) included.

Served over real HTTP by uvicorn; the events are written with the event bus and with XADD; the secret and
its masked form are the test's own constants.
"""

from __future__ import annotations

import json
import os

import httpx
import pytest
import redis

from busconsole.env import parse_mask_rules
from eventbus import Bus
from tests.conftest import session_cookie
from tests.console.helpers import seg
from tests.console.views.test_progress_sse import TIMEOUT, events_url, messages

SECRET = "sse.secret@example.com"
MASK = "••••"


@pytest.fixture
def rules(settings) -> None:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(
        json.dumps(
            [
                {"stream": "progress:*", "field": "data.customer.email", "action": "mask"},
                {"stream": "orders", "field": "data.customer.email", "action": "mask"},
            ]
        )
    )


@pytest.fixture
def http(asgi_server, viewer) -> httpx.Client:
    with httpx.Client(cookies=session_cookie(viewer), timeout=TIMEOUT) as client:
        yield client


def test_a_progress_stream_is_sent_masked(rules, asgi_server, http: httpx.Client, r: redis.Redis) -> None:
    bus = Bus.from_url(os.environ["BUS_REDIS_URL"])
    try:
        with bus.progress("report-9") as task:
            task.delta({"customer": {"email": SECRET, "name": "Ann"}, "step": 1})
    finally:
        bus.close()
    with http.stream("GET", events_url(asgi_server, b"progress:report-9")) as response:
        assert response.status_code == 200
        body = list(messages(response))
    assert [m.event for m in body] == [f[b"event"].decode() for _, f in r.xrange("progress:report-9")]
    assert all(SECRET not in m.data for m in body)
    delta = next(json.loads(m.data) for m in body if m.event == "delta")
    assert delta == {"customer": {"email": MASK, "name": "Ann"}, "step": 1}
    api = http.get(f"{asgi_server.url}/api/v1/c/default/streams/{seg('progress:report-9')}/entries/?order=asc")
    shown = [json.loads(e["fields"]["data"]) for e in api.json()["entries"]]
    assert delta in shown  # what the API shows of the same entry


def test_a_dead_letter_is_sent_masked_by_its_origins_rules(rules, asgi_server, http: httpx.Client, r) -> None:
    r.xadd(
        "orders:dlq",
        {
            "event": "error",  # a terminal name, so the response ends after it
            "data": json.dumps({"customer": {"email": SECRET}}),
            "dlq_original_stream": "orders",
            "dlq_original_id": "1-0",
            "dlq_error": "boom",
        },
    )
    with http.stream("GET", events_url(asgi_server, b"orders:dlq")) as response:
        assert response.status_code == 200
        got = list(messages(response))
    assert len(got) == 1 and SECRET not in got[0].data
    assert json.loads(got[0].data) == {"customer": {"email": MASK}}
