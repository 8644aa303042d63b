"""API bodies are typed like JSON, sized before they are read, and parsed without recursion.

A JSON flag is ``true`` or ``false``: ``"no"``, ``"off"``, ``"0"``, ``1`` and ``"false"`` are not flags
(an HTML checkbox reads any value as "on", which made ``{"force": "no"}`` delete a consumer and
``{"all": "no"}`` empty a DLQ). A count is an integer in range, an entry ID is ``<ms>-<seq>`` in ASCII
digits, an unknown field is a mistake. Each such body is a 400 naming the field, leaves Redis as it
was (read back with XINFO, XLEN, XPENDING) and leaves one ``error`` audit row.

Sizes are checked before content: a list over 1000 IDs is refused before any ID is parsed or
de-duplicated, a body over the API's limit is a 413 before it is read (with or without a
Content-Length), and a 5000-deep array is a 400, not Python's RecursionError.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from types import SimpleNamespace

import httpx
import pytest
import redis
from django.test import Client

from streams_app.accounts.tokens import token_create
from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from tests.console.helpers import api, bearer, consumer_url, dlq_url, group_url, post_json, stream_url
from tests.console.services.helpers import consumers, orders_bus, snapshot


@pytest.fixture
def bus(r: redis.Redis) -> SimpleNamespace:
    """``orders`` (10 entries), group ``billing`` (worker-1 owns 4 pending), DLQ ``orders:dlq`` (3)."""
    return orders_bus(r)


def _refused(reply, field: str) -> None:
    """A JSON 400 whose message names ``field``."""
    assert reply.status_code == 400, reply.content
    assert reply["Content-Type"] == "application/json"
    error = reply.json()["error"]
    assert error["code"] == "bad_request"
    assert field in error["message"], error["message"]


def _run_any_jobs() -> None:
    """Run whatever job a request queued, as the worker would: a wrongly started job shows its damage."""
    for job in Job.objects.all():
        jobs.job_run(job.pk)


NOT_BOOLEANS = ["no", "off", "0", "false", 1, 0, None, [], {}]


# ------------------------------------------------------------------------------------------ flags


@pytest.mark.parametrize("value", NOT_BOOLEANS, ids=repr)
def test_consumer_delete_force_must_be_a_json_boolean(admin_user, api_token, bus, value) -> None:
    url = api(consumer_url("orders", "billing", "worker-1") + "delete")
    reply = post_json(url, {"force": value}, api_token(admin_user))
    _refused(reply, "force")
    assert consumers(bus.r)["worker-1"] == 4  # XINFO CONSUMERS: still there, still owning its entries
    event = AuditEvent.objects.get()
    assert (event.action, event.outcome) == ("consumer.delete", "error")


@pytest.mark.parametrize("value", ["0", "no", "off", "yes", 1, "true"], ids=repr)
def test_requeue_all_must_be_a_json_boolean(operator, api_token, bus, value) -> None:
    reply = post_json(api(dlq_url("orders:dlq") + "requeue"), {"all": value, "up_to": bus.dlq_ids[-1]},
                      api_token(operator))
    _refused(reply, "all")
    _run_any_jobs()
    assert bus.r.xlen("orders:dlq") == 3
    assert bus.r.xlen("orders") == 10
    assert not Job.objects.exists()
    assert AuditEvent.objects.get().outcome == "error"


@pytest.mark.parametrize("value", ["yes", "false", "1", 1], ids=repr)
def test_dry_run_must_be_a_json_boolean(admin_user, api_token, bus, value) -> None:
    """A dry run that is not ``true`` is not a dry run, and not a deletion either: it is refused."""
    token = api_token(admin_user)
    before = snapshot(bus.r)
    _refused(post_json(api(stream_url("orders") + "delete"), {"ids": bus.ids[:2], "dry_run": value}, token), "dry_run")
    _refused(post_json(api(stream_url("orders") + "trim"), {"maxlen": 1, "dry_run": value}, token), "dry_run")
    _refused(post_json(api(group_url("orders", "billing") + "rewind"), {"to": "0", "dry_run": value}, token), "dry_run")
    _refused(post_json(api(stream_url("orders") + "replay"), {"start": "-", "end": "+", "dry_run": value}, token),
             "dry_run")
    _run_any_jobs()
    assert snapshot(bus.r) == before
    assert bus.r.xlen("orders") == 10
    assert list(AuditEvent.objects.values_list("outcome", flat=True)) == ["error"] * 4


# ------------------------------------------------------------------------------ counts, IDs, names


@pytest.mark.parametrize(
    "body,field",
    [
        ({"consumer": "w2", "min_idle_ms": "0", "count": 10}, "min_idle_ms"),
        ({"consumer": "w2", "min_idle_ms": True, "count": 10}, "min_idle_ms"),
        ({"consumer": "w2", "min_idle_ms": 0.5, "count": 10}, "min_idle_ms"),
        ({"consumer": "w2", "min_idle_ms": -1, "count": 10}, "min_idle_ms"),
        ({"consumer": "w2", "min_idle_ms": 0, "count": "10"}, "count"),
        ({"consumer": "w2", "min_idle_ms": 0, "count": 10_000}, "count"),
        ({"consumer": 7, "min_idle_ms": 0, "count": 10}, "consumer"),
        ({"consumer": "", "min_idle_ms": 0, "count": 10}, "consumer"),
        ({"consumer": "w2", "min_idle_ms": 0, "cuont": 10}, "cuont"),
    ],
    ids=lambda v: json.dumps(v) if isinstance(v, dict) else v,
)
def test_autoclaim_counts_and_names_are_typed(operator, api_token, bus, body: dict, field: str) -> None:
    before = snapshot(bus.r)
    _refused(post_json(api(group_url("orders", "billing") + "autoclaim"), body, api_token(operator)), field)
    assert snapshot(bus.r) == before


@pytest.mark.parametrize(
    "ids",
    [["\u0661\u0662-0"], [" 1-0"], ["1-0\n"], ["1"], [1], "1-0", [["1-0"]], ["18446744073709551616-0"]],
    ids=repr,
)
def test_entry_ids_are_ascii_ms_seq(operator, api_token, bus, ids) -> None:
    before = snapshot(bus.r)
    _refused(post_json(api(group_url("orders", "billing") + "ack"), {"ids": ids}, api_token(operator)), "ids")
    assert snapshot(bus.r) == before


def test_unknown_fields_are_refused_not_ignored(admin_user, api_token, bus) -> None:
    """``forse`` is a typo of ``force``: ignoring it would answer 409 and hide the mistake."""
    reply = post_json(api(consumer_url("orders", "billing", "worker-1") + "delete"), {"forse": True},
                      api_token(admin_user))
    _refused(reply, "forse")
    assert consumers(bus.r)["worker-1"] == 4


def test_typed_bodies_still_work(admin_user, api_token, bus) -> None:
    token = api_token(admin_user)
    url = api(consumer_url("orders", "billing", "worker-1") + "delete")
    assert post_json(url, {"force": False}, token).status_code == 409
    assert consumers(bus.r)["worker-1"] == 4
    done = post_json(url, {"force": True}, token)
    assert done.json() == {"consumer": "worker-1", "deleted": True, "pending_dropped": 4}
    assert "worker-1" not in consumers(bus.r)
    reply = post_json(api(dlq_url("orders:dlq") + "requeue"), {"all": False, "ids": [bus.dlq_ids[0]]}, token)
    assert reply.status_code == 200 and bus.r.xlen("orders:dlq") == 2


# ---------------------------------------------------------------------------------------- sizes


def test_a_list_over_the_limit_is_refused_before_its_ids_are_read(operator, api_token, bus) -> None:
    """10,000 copies of one pending ID: de-duplicated first, it would be one ID and be acked."""
    pending_before = bus.r.xpending("orders", "billing")["pending"]
    reply = post_json(api(group_url("orders", "billing") + "ack"), {"ids": [bus.ids[0]] * 10_000}, api_token(operator))
    _refused(reply, "ids")
    assert "1000" in reply.json()["error"]["message"]
    assert bus.r.xpending("orders", "billing")["pending"] == pending_before == 4


def test_the_html_form_checks_the_list_size_first_too(admin_client_, bus) -> None:
    typed = " ".join([bus.ids[0]] * 3000)  # one ID 3000 times: one entry, were it de-duplicated first
    page = admin_client_.post(stream_url("orders") + "delete/", {"ids_text": typed}, follow=True)
    assert "At most 1000 entry IDs" in page.content.decode()
    assert bus.r.xlen("orders") == 10


def test_100k_ids_are_refused_as_too_large_and_change_nothing(operator, api_token, bus) -> None:
    ids = [f"{i}-0" for i in range(1, 100_001)]
    before = snapshot(bus.r)
    reply = post_json(api(group_url("orders", "billing") + "ack"), {"ids": ids}, api_token(operator))
    assert reply.status_code == 413
    assert reply.json()["error"]["code"] == "too_large"
    assert snapshot(bus.r) == before
    assert not AuditEvent.objects.exists()  # refused before the action was known


def test_a_2mb_body_is_a_413_json_error(operator, api_token, bus) -> None:
    body = {"ids": [bus.ids[0]], "padding": "x" * (2 * 1024 * 1024)}
    reply = post_json(api(group_url("orders", "billing") + "ack"), body, api_token(operator))
    assert reply.status_code == 413
    assert reply["Content-Type"] == "application/json"
    assert reply.json()["error"]["code"] == "too_large"
    assert bus.r.xpending("orders", "billing")["pending"] == 4


@pytest.fixture
def live_bus(asgi_server, r: redis.Redis) -> Iterator[SimpleNamespace]:
    yield orders_bus(r)


def test_a_chunked_body_without_length_is_measured_as_it_arrives(asgi_server, operator, live_bus) -> None:
    """Through a real server, a body sent in chunks (no Content-Length) is cut off at the limit."""
    raw = token_create(user=operator, name="chunked")[1]
    payload = json.dumps({"ids": [live_bus.ids[0]], "padding": "x" * (2 * 1024 * 1024)}).encode()

    def chunks() -> Iterator[bytes]:
        for start in range(0, len(payload), 64 * 1024):
            yield payload[start : start + 64 * 1024]

    with httpx.Client(base_url=asgi_server.url, headers={"Authorization": f"Bearer {raw}"}, timeout=30) as http:
        reply = http.post(api(group_url("orders", "billing") + "ack"), content=chunks(),
                          headers={"Content-Type": "application/json"})
    assert reply.status_code == 413, reply.text
    assert reply.json()["error"]["code"] == "too_large"
    assert live_bus.r.xpending("orders", "billing")["pending"] == 4


# --------------------------------------------------------------------------------------- nesting


@pytest.mark.parametrize(
    "body",
    [b"[" * 5000 + b"]" * 5000, b'{"ids": ' + b"[" * 5000 + b"]" * 5000 + b"}", b'{"a": ' * 5000 + b"1" + b"}" * 5000],
    ids=["array", "inside-a-field", "objects"],
)
def test_deeply_nested_json_is_a_400_not_a_500(operator, api_token, bus, body: bytes) -> None:
    before = snapshot(bus.r)
    reply = Client().post(api(group_url("orders", "billing") + "ack"), body, content_type="application/json",
                          **bearer(api_token(operator)))
    assert reply.status_code == 400, reply.content[:200]
    assert reply.json()["error"]["code"] == "bad_request"
    assert snapshot(bus.r) == before


@pytest.mark.parametrize("body", [b'{"ids": ["1-0"], "n": NaN}', b'{"ids": ["1-0"]} trailing', b"\xff"], ids=repr)
def test_malformed_json_is_a_400(operator, api_token, bus, body: bytes) -> None:
    reply = Client().post(api(group_url("orders", "billing") + "ack"), body, content_type="application/json",
                          **bearer(api_token(operator)))
    assert reply.status_code == 400
    assert reply.json()["error"]["code"] == "bad_request"


# ---------------------------------------------------------------------------------- query strings


@pytest.mark.parametrize(
    "path",
    ["audit/?before=99999999999999999999", "jobs/?before=99999999999999999999", "jobs/99999999999999999999",
     "audit/?count=1e3", "jobs/?state=sideways"],
)
def test_out_of_range_query_values_are_4xx_not_500(viewer_client, db, path: str) -> None:
    reply = viewer_client.get(api("/" + path))
    assert reply.status_code in (400, 404), reply.content
    assert reply.json()["error"]["code"] in ("bad_request", "not_found")


def test_query_flags_and_counts_read_as_text(viewer_client, bus) -> None:
    ok = viewer_client.get(api(stream_url("orders") + "entries/?count=3&order=asc"))
    assert [e["id"] for e in ok.json()["entries"]] == bus.ids[:3]
    _refused(viewer_client.get(api(stream_url("orders") + "entries/?count=three")), "count")
    _refused(viewer_client.get(api(stream_url("orders") + "entries/?count=")), "count")  # empty is not absent
    _refused(viewer_client.get(api(stream_url("orders") + "entries/?count=+5")), "count")
    _refused(viewer_client.get(api(stream_url("orders") + "entries/?after=\u0661-0")), "after")
