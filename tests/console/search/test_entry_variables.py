"""The entry's own variables never hide a field.

On a bus DLQ every dead letter carries the event's ``id`` field; ``id == "8639cf…"`` used to compare the
entry ID and find nothing. A field now always wins over a built-in name; ``entry.id`` and ``entry.time``
name the entry's ID and time whatever its fields; ``id`` and ``time`` still name them where no field
does. Expected IDs are the ones XADD returned; the documentation is read off the page and the API's
OpenAPI document.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime

import redis
from django.test import Client

from eventbus.search.cost import MAX_STEPS
from eventbus.search.syntax import MAX_DEPTH
from tests.console.helpers import api, dlq_url, stream_api, stream_url

DLQ = "{orders}:dlq"
EVENT_ID = "8639cf0a5c7e4b1d9f3e2a1b0c9d8e7f"


def _ids(client: Client, key: str, q: str) -> list[str]:
    response = client.get(stream_api(key, "search/"), {"q": q, "limit": 1000})
    assert response.status_code == 200, response.content[:300]
    return [m["id"] for m in response.json()["matches"]]


def _dead_letter(r: redis.Redis, event_id: str, error: str) -> str:
    return r.xadd(DLQ, {
        "id": event_id, "ts": "1700000000000", "type": "order.created", "data": '{"order_id": 7}',
        "dlq_original_stream": "orders", "dlq_original_id": "1700000000000-0", "dlq_group": "billing",
        "dlq_error": error, "dlq_retries": "5", "dlq_failed_at": "1700000000500",
    }).decode()  # fmt: skip


def test_a_bus_dlq_is_searched_by_the_events_id_field(r: redis.Redis, viewer_client: Client) -> None:
    wanted = _dead_letter(r, EVENT_ID, "TimeoutError")
    other = _dead_letter(r, "0" * 32, "ValueError")
    assert _ids(viewer_client, DLQ, f'id == "{EVENT_ID}"') == [wanted]
    assert _ids(viewer_client, DLQ, f'fields["id"] == "{EVENT_ID}"') == [wanted]
    assert _ids(viewer_client, DLQ, f'entry.id == "{other}"') == [other]
    assert _ids(viewer_client, DLQ, f'id == "{other}"') == []  # the field, not the entry ID
    # the DLQ page's own search (the htmx step) says the same
    step = viewer_client.get(dlq_url(DLQ) + "search/", {"q": f'id == "{EVENT_ID}"'}, HTTP_HX_REQUEST="true")
    assert f">{wanted}</a>" in step.content.decode() and f">{other}</a>" not in step.content.decode()


def test_entry_id_and_time_whatever_the_fields(r: redis.Redis, viewer_client: Client) -> None:
    plain = [
        r.xadd("orders", {"type": "order.paid", "data": json.dumps({"n": i})}).decode() for i in range(4)
    ]
    named = r.xadd("orders", {"id": "evt-1", "time": "noon", "entry": '{"id": "mine"}'}).decode()
    ids = [*plain, named]
    middle = ids[2]
    ms = int(middle.split("-")[0])
    moment = datetime.fromtimestamp(ms / 1000, UTC).isoformat(timespec="milliseconds")
    # where no field is called id/time, they are the entry's, as before (backward compatible)
    assert _ids(viewer_client, "orders", f'id == "{middle}"') == [middle]
    assert _ids(viewer_client, "orders", f'time >= timestamp("{moment}") && has(data.n)') == [
        i for i in plain if int(i.split("-")[0]) >= ms
    ]
    # a field of that name wins: id, time and entry are the fields on the last entry
    assert _ids(viewer_client, "orders", 'id == "evt-1"') == [named]
    assert _ids(viewer_client, "orders", 'time == "noon"') == [named]
    assert _ids(viewer_client, "orders", 'entry.id == "mine"') == [named]
    # entry.id and entry.time on every entry without a field called entry
    assert _ids(viewer_client, "orders", f'entry.id == "{middle}"') == [middle]
    assert _ids(viewer_client, "orders", f'entry.time >= timestamp("{moment}")') == [
        i for i in plain if int(i.split("-")[0]) >= ms
    ]


def test_the_syntax_box_and_the_api_description_say_so(r: redis.Redis, viewer_client: Client) -> None:
    r.xadd("orders", {"type": "order.paid"})
    page = viewer_client.get(stream_url("orders")).content.decode()
    assert "<code>entry.id</code>" in page and "A field always wins" in page
    assert f"{MAX_STEPS:,} steps" in page and f"{MAX_DEPTH} levels" in page
    spec = viewer_client.get(api("/openapi.json")).json()
    [operation] = [
        item["get"] for path, item in spec["paths"].items() if path.endswith("/search/") and "get" in item
    ]
    description = operation["description"]
    assert "``entry.id``" in description and "a field always wins" in description
    assert f"{MAX_STEPS:,} steps" in description and f"{MAX_DEPTH} levels" in description
    assert "too_costly" in json.dumps(spec["components"])  # the reply says how many entries were left out
