"""Adding an entry never copies the newest entry's event id or time.

The form is prefilled from the newest entry, which the real event bus published. An operator who edits only
``data`` must publish a new event, not a second one under an existing event id that idempotent handlers
drop. Expected values come from the stream itself (XRANGE) and the test's own clock.
"""

from __future__ import annotations

import html
import json
import re
import time

import redis
from django.test import Client

from eventbus import Bus
from tests.console.helpers import stream_url

ADD = stream_url("orders", "add/")


def form_rows(body: str) -> list[tuple[str, str]]:
    """The name/value rows of the fields form, as the browser would send them (blank rows included)."""
    form = body.split('id="add-fields-form"', 1)[1].split("</form>", 1)[0]
    names = [html.unescape(n) for n in re.findall(r'<input type="text" name="name" value="([^"]*)"', form)]
    values = [html.unescape(v) for v in re.findall(r'<textarea name="value"[^>]*>\n(.*?)</textarea>', form, re.S)]
    assert len(names) == len(values)
    return list(zip(names, values, strict=True))


def json_form(body: str) -> dict:
    text = body.split('id="add-json-form"', 1)[1].split('<textarea name="json"', 1)[1]
    return json.loads(html.unescape(text.split(">\n", 1)[1].split("</textarea>", 1)[0]))


def publish(redis_server) -> None:
    bus = Bus.from_url(redis_server.url(0), maxlen=None)
    try:
        for order_id in (1, 2):
            bus.publish("orders", "order.created", {"order_id": order_id})
    finally:
        bus.close()


def test_the_form_offers_a_fresh_event_id_and_time(redis_server, r: redis.Redis, operator_client: Client) -> None:
    publish(redis_server)
    event_ids = {fields[b"id"].decode() for _, fields in r.xrange("orders")}
    newest = r.xrevrange("orders", count=1)[0][1]
    before = int(time.time() * 1000)
    body = operator_client.get(ADD).content.decode()
    after = int(time.time() * 1000)
    rows = dict(row for row in form_rows(body) if row[0])
    assert rows["type"] == "order.created" and json.loads(rows["data"]) == {"order_id": 2}
    assert re.fullmatch(r"[0-9a-f]{32}", rows["id"]) and rows["id"] not in event_ids
    assert before <= int(rows["ts"]) <= after and rows["ts"] != newest[b"ts"].decode()
    from_json = json_form(body)
    assert from_json["id"] not in event_ids and before <= int(from_json["ts"]) <= after
    names = body.split('id="bus-fields"', 1)[1].split("</p>", 1)[0]
    assert "<code>id</code>" in names and "<code>ts</code>" in names  # the page names what the bus fills

    # The operator edits only data and sends the form as it is: a new event, not a duplicate id.
    sent = form_rows(body)
    names_sent = [n for n, _ in sent]
    values_sent = [json.dumps({"order_id": 3}) if n == "data" else v for n, v in sent]
    response = operator_client.post(ADD, {"mode": "fields", "name": names_sent, "value": values_sent})
    assert response.status_code == 302
    added = r.xrevrange("orders", count=1)[0][1]
    assert added[b"id"].decode() not in event_ids


def test_the_bus_bookkeeping_of_a_retry_is_not_copied(r: redis.Redis, operator_client: Client) -> None:
    """A retry copy is the newest entry: its _retries, _group, _first_id, _failed_id and _failed_at are the
    bus's own, and a new entry carrying them would be taken for a retry (only _group's group would run it)."""
    bookkeeping = {"_retries": "2", "_group": "billing", "_first_id": "1-1", "_failed_id": "2-1",
                   "_failed_at": "3", "_requeued_from": "4-1", "_replayed_from": "5-1"}  # fmt: skip
    r.xadd("orders", {"type": "order.created", "data": "{}", "id": "e" * 32, "ts": "1", **bookkeeping})
    body = operator_client.get(ADD).content.decode()
    names = {n for n, _ in form_rows(body) if n}
    assert names == {"type", "data", "id", "ts"}
    assert not set(json_form(body)) & set(bookkeeping)
    note = body.split('id="bus-fields"', 1)[1].split("</p>", 1)[0]
    assert "<code>_retries</code>" in note and "<code>_group</code>" in note


def test_a_stream_that_is_not_the_bus_keeps_its_fields(r: redis.Redis, operator_client: Client) -> None:
    """No ``type``/``id``/``ts`` triple: nothing is replaced, and no note about the bus's fields."""
    r.xadd("sensors", {"id": "7", "temp": "21.5"})
    body = operator_client.get(stream_url("sensors", "add/")).content.decode()
    assert dict(row for row in form_rows(body) if row[0]) == {"id": "7", "temp": "21.5"}
    assert 'id="bus-fields"' not in body
