"""Adding an entry from the console: the form, its POST and ``POST .../entries/``.

What was added is read back with XRANGE; who may add, read-only mode, bad input and the audit row
are checked on both interfaces.
"""

from __future__ import annotations

import json

import pytest
import redis
from django.test import Client

from streams_app.audit.models import AuditEvent
from tests.console.helpers import post_json, stream_api, stream_url

BINARY_KEY = b"bin\xff\x00key/1"


@pytest.fixture
def orders(r: redis.Redis) -> str:
    """A stream whose newest entry is the form's template."""
    r.xadd("orders", {"type": "order.paid", "data": '{"order_id": 1}'})
    return r.xadd(
        "orders", {"type": "order.created", "data": '{"order_id": 2}', "blob": b"\x00\xff"}
    ).decode()


def _newest(r: redis.Redis, key: str | bytes) -> tuple[str, list[tuple[bytes, bytes]]]:
    """The newest entry, its fields in order as Redis holds them (repeated names kept)."""
    # A pool of r's own settings (redis-py 8's connection_kwargs hold pool-only keys Redis() refuses).
    raw = redis.Redis(connection_pool=redis.ConnectionPool(**r.connection_pool.connection_kwargs))
    raw.set_response_callback("XREVRANGE", lambda response, **options: response)  # flat, repeats kept
    try:
        [(entry_id, flat)] = raw.execute_command("XREVRANGE", key, "+", "-", "COUNT", 1)
    finally:
        raw.connection_pool.disconnect()
    return entry_id.decode(), [(flat[i], flat[i + 1]) for i in range(0, len(flat), 2)]


def test_the_form_is_prefilled_from_the_newest_entry(
    viewer_client: Client, r: redis.Redis, orders: str
) -> None:
    body = viewer_client.get(stream_url("orders", "add/")).content.decode()
    assert 'name="name" value="type"' in body and "order.created" in body
    assert "{&quot;order_id&quot;: 2}" in body  # the template's value, escaped
    assert "not copied" in body  # the binary value is not put in a text box
    assert "adding an entry needs the operator role" in body


def test_a_viewer_is_refused(viewer_client: Client, r: redis.Redis, orders: str) -> None:
    response = viewer_client.post(
        stream_url("orders", "add/"), {"mode": "fields", "name": ["a"], "value": ["1"]}
    )
    assert response.status_code == 403
    assert r.xlen("orders") == 2
    event = AuditEvent.objects.get()
    assert (event.action, event.outcome) == ("entry.add", "denied")


def test_an_operator_adds_name_value_rows(
    operator_client: Client, operator, r: redis.Redis, orders: str
) -> None:
    response = operator_client.post(
        stream_url("orders", "add/"),
        {
            "mode": "fields",
            "name": ["type", "data", "", "type"],
            "value": ["order.created", '{"a":\r\n1}', "", "dup"],
        },
    )
    new_id, fields = _newest(r, "orders")
    assert new_id != orders
    assert fields == [(b"type", b"order.created"), (b"data", b'{"a":\n1}'), (b"type", b"dup")]
    assert response.status_code == 302
    assert response["Location"] == stream_url("orders", f"entries/{new_id}/")
    page = operator_client.get(response["Location"]).content.decode()
    assert f"Added entry {new_id} to orders." in page
    event = AuditEvent.objects.get()
    assert (event.action, event.outcome, event.username, event.affected) == (
        "entry.add",
        "ok",
        operator.username,
        1,
    )
    assert event.target_ids == [new_id]
    assert bytes(event.target_stream) == b"orders"


def test_an_operator_adds_a_json_object(operator_client: Client, r: redis.Redis, orders: str) -> None:
    doc = '{"type": "order.created", "data": {"order_id": 7}, "n": 3, "note": "<b>é</b>"}'
    response = operator_client.post(stream_url("orders", "add/"), {"mode": "json", "json": doc})
    assert response.status_code == 302
    _, fields = _newest(r, "orders")
    assert fields == [
        (b"type", b"order.created"),
        (b"data", b'{"order_id":7}'),
        (b"n", b"3"),
        (b"note", "<b>é</b>".encode()),
    ]


@pytest.mark.parametrize(
    ("data", "message"),
    [
        ({"mode": "json", "json": "{not json"}, "The JSON is not valid"),
        ({"mode": "json", "json": "[1, 2]"}, "The JSON must be an object"),
        ({"mode": "json", "json": '{"": "x"}'}, "empty key"),
        ({"mode": "json", "json": "{}"}, "at least one field"),
        ({"mode": "fields", "name": ["a", ""], "value": ["1", "2"]}, "Row 2 has a value but no field name"),
        ({"mode": "fields", "name": ["", ""], "value": ["", ""]}, "at least one field"),
    ],
)
def test_bad_input_is_a_400_with_the_reason(
    operator_client: Client, r: redis.Redis, orders: str, data, message
) -> None:
    response = operator_client.post(stream_url("orders", "add/"), data)
    assert response.status_code == 400
    assert message in response.content.decode()
    assert r.xlen("orders") == 2
    event = AuditEvent.objects.get()
    assert (event.action, event.outcome) == ("entry.add", "error")


def test_an_entry_over_the_size_bound_is_refused(
    operator_client: Client, settings, r: redis.Redis, orders
) -> None:
    settings.BUSCONSOLE_ENTRY_MAX_BYTES = 1000
    response = operator_client.post(
        stream_url("orders", "add/"), {"mode": "fields", "name": ["v"], "value": ["x" * 1000]}
    )
    assert response.status_code == 400
    assert "at most 1000 bytes" in response.content.decode()
    assert r.xlen("orders") == 2


def test_the_default_bound_is_one_mib(operator_client: Client, r: redis.Redis, orders: str) -> None:
    response = operator_client.post(
        stream_url("orders", "add/"), {"mode": "fields", "name": ["v"], "value": ["x" * (1 << 20)]}
    )
    assert response.status_code == 400
    response = operator_client.post(
        stream_url("orders", "add/"), {"mode": "fields", "name": ["v"], "value": ["x" * ((1 << 20) - 1)]}
    )
    assert response.status_code == 302
    assert r.xlen("orders") == 3


def test_read_only_mode_refuses_even_admins(
    admin_client_: Client, settings, r: redis.Redis, orders: str
) -> None:
    settings.BUSCONSOLE_READ_ONLY = True
    response = admin_client_.post(
        stream_url("orders", "add/"), {"mode": "fields", "name": ["a"], "value": ["1"]}
    )
    assert response.status_code == 403
    assert "read-only" in response.content.decode()
    assert r.xlen("orders") == 2
    assert (
        "Read-only mode: entries cannot be added."
        in admin_client_.get(stream_url("orders", "add/")).content.decode()
    )


def test_maxlen_trims_and_needs_the_admin_role(
    operator_client: Client, admin_client_: Client, r: redis.Redis
) -> None:
    for i in range(300):
        r.xadd("orders", {"n": str(i)})
    response = operator_client.post(
        stream_url("orders", "add/"), {"mode": "fields", "name": ["a"], "value": ["1"], "maxlen": "10"}
    )
    assert response.status_code == 403
    assert r.xlen("orders") == 300
    response = admin_client_.post(
        stream_url("orders", "add/"), {"mode": "fields", "name": ["a"], "value": ["1"], "maxlen": "10"}
    )
    assert response.status_code == 302
    assert 10 <= r.xlen("orders") < 301  # MAXLEN ~ removes whole nodes only
    assert _newest(r, "orders")[1] == [(b"a", b"1")]
    assert AuditEvent.objects.filter(action="entry.add.trim", outcome="ok").count() == 1


def test_a_stream_with_a_binary_key(operator_client: Client, r: redis.Redis) -> None:
    r.xadd(BINARY_KEY, {b"k\xfe": b"v"})
    url = stream_url(BINARY_KEY, "add/")
    # The test client has no raw path: REQUEST_URI carries the "/" of the key as a server would.
    assert operator_client.get(url, REQUEST_URI=url).status_code == 200
    response = operator_client.post(url, {"mode": "fields", "name": ["x"], "value": ["1"]}, REQUEST_URI=url)
    new_id, fields = _newest(r, BINARY_KEY)
    assert response.status_code == 302
    assert response["Location"] == stream_url(BINARY_KEY, f"entries/{new_id}/")
    assert fields == [(b"x", b"1")]
    assert bytes(AuditEvent.objects.get().target_stream) == BINARY_KEY


def test_no_stream_is_created_by_a_typo(operator_client: Client, r: redis.Redis) -> None:
    response = operator_client.post(
        stream_url("ordres", "add/"), {"mode": "fields", "name": ["a"], "value": ["1"]}
    )
    assert response.status_code == 404
    assert r.exists("ordres") == 0
    assert operator_client.get(stream_url("ordres", "add/")).status_code == 404


def test_the_stream_page_links_to_the_form(viewer_client: Client, r: redis.Redis, orders: str) -> None:
    body = viewer_client.get(stream_url("orders")).content.decode()
    assert f'href="{stream_url("orders", "add/")}"' in body


# ---------------------------------------------------------------------------------------- the API


def test_api_adds_an_entry(api_token, operator, r: redis.Redis, orders: str) -> None:
    response = post_json(
        stream_api("orders", "entries/"), {"fields": {"type": "t", "data": {"x": [1]}}}, api_token(operator)
    )
    assert response.status_code == 201, response.content
    new_id, fields = _newest(r, "orders")
    assert response.json() == {"id": new_id, "url": stream_url("orders", f"entries/{new_id}/")}
    assert fields == [(b"type", b"t"), (b"data", b'{"x":[1]}')]
    event = AuditEvent.objects.get()
    assert (event.action, event.outcome, event.target_ids) == ("entry.add", "ok", [new_id])


def test_api_refusals_and_bad_bodies(api_token, viewer, operator, r: redis.Redis, orders: str) -> None:
    url = stream_api("orders", "entries/")
    assert post_json(url, {"fields": {"a": "1"}}, api_token(viewer)).status_code == 403
    token = api_token(operator, name="op")
    for body in (
        {},
        {"fields": {}},
        {"fields": {"": "x"}},
        {"fields": "a=1"},
        {"fields": {"a": "1"}, "extra": 1},
    ):
        response = post_json(url, body, token)
        assert response.status_code == 400, body
        assert response.json()["error"]["code"] == "bad_request"
    assert post_json(url, {"fields": {"a": "1"}, "maxlen": 5}, token).status_code == 403
    assert r.xlen("orders") == 2
    assert AuditEvent.objects.count() == 7
    assert post_json(stream_api("nothing-here", "entries/"), {"fields": {"a": "1"}}, token).status_code == 404


def test_api_get_of_the_same_address_still_reads(api_token, viewer, r: redis.Redis, orders: str) -> None:
    response = Client().get(
        stream_api("orders", "entries/"), HTTP_AUTHORIZATION=f"Bearer {api_token(viewer)}"
    )
    assert response.status_code == 200
    assert [e["id"] for e in response.json()["entries"]][0] == orders
    put = Client().put(
        stream_api("orders", "entries/"), "{}", HTTP_AUTHORIZATION=f"Bearer {api_token(viewer, name='2')}"
    )
    assert put.status_code == 405
    assert json.loads(put.content)["error"]["code"]
