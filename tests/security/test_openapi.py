"""The OpenAPI 3.1 description of ``/api/v1/``: valid, complete, true, and readable under the CSP.

- The document passes openapi-spec-validator.
- Every route under ``/api/v1/`` that Django's URL resolver holds appears in ``paths`` (walked here,
  independently of the code that writes the document), and nothing else does; each operation's method
  is the one the route serves (the other method is a 405).
- Every operation is called for real against the orders bus and each reply, success or refusal, is
  checked against the schema the document gives for its status (``jsonschema``, OpenAPI 3.1 dialect);
  an operation not exercised here fails the test, so a new endpoint cannot go unchecked.
- ``/api/v1/openapi.json`` and ``/api/v1/docs/`` need a login like the rest of the API; the reference
  page loads only static scripts, and renders every operation in Chromium without a CSP violation.
"""

from __future__ import annotations

import json
import re
from collections.abc import Iterator
from types import SimpleNamespace
from typing import Any

import pytest
import redis
from django.contrib.staticfiles import finders
from django.test import Client
from django.urls import URLPattern, URLResolver, get_resolver
from openapi_schema_validator import OAS31Validator
from openapi_spec_validator import validate

from streams_app.jobs.models import Job
from streams_app.views.api.openapi import openapi_document
from tests.console.helpers import bearer, seg
from tests.console.services.helpers import orders_bus

# Values for the path parameters when a route is called: they name the orders bus.
PATH_VALUES = {"conn": "default", "key": seg("orders"), "family": seg("orders"), "group": "billing", "consumer": "worker-1", "job_id": "1", "view_id": "1"}


def _api_routes() -> Iterator[tuple[str, URLPattern]]:
    def walk(patterns: list[Any], prefix: str) -> Iterator[tuple[str, URLPattern]]:
        for pattern in patterns:
            route = prefix + str(pattern.pattern)
            if isinstance(pattern, URLResolver):
                yield from walk(pattern.url_patterns, route)
            elif route.startswith("api/v1/"):
                yield route, pattern

    found = list(walk(get_resolver().url_patterns, ""))
    # an action's twin with a trailing slash (the same view) is said once in the description, not listed
    plain = {route: pattern.callback for route, pattern in found}
    yield from ((route, p) for route, p in found if not (route.endswith("/") and plain.get(route[:-1]) is p.callback))


def _as_openapi(route: str) -> str:
    return "/" + re.sub(r"<(?:\w+:)?(\w+)>", r"{\1}", route)


def _fill(path: str, **values: str) -> str:
    return re.sub(r"\{(\w+)\}", lambda m: {**PATH_VALUES, **values}[m.group(1)], path)


@pytest.fixture(scope="module")
def doc() -> dict[str, Any]:
    return openapi_document()


# ---------------------------------------------------------------------------------- the document


def test_the_document_is_valid_openapi_3_1(doc) -> None:
    validate(doc)
    assert doc["openapi"].startswith("3.1")
    bearer_scheme = doc["components"]["securitySchemes"]["bearerToken"]
    assert (bearer_scheme["type"], bearer_scheme["scheme"]) == ("http", "bearer")
    assert {"bearerToken": []} in doc["security"]


def test_every_api_route_is_described_and_nothing_else(doc) -> None:
    routes = {_as_openapi(route) for route, _ in _api_routes()}
    assert len(routes) >= 29
    assert routes == set(doc["paths"])


def test_operations_document_their_inputs_and_errors(doc) -> None:
    for path, operations in doc["paths"].items():
        for method, op in operations.items():
            declared = {p["name"] for p in op["parameters"] if p["in"] == "path"}
            assert declared == set(re.findall(r"\{(\w+)\}", path)), (path, method)
            assert "401" in op["responses"], (path, method)
            if method == "post" and "requestBody" in op:
                assert {"400", "403", "413"} <= set(op["responses"]), path
                assert op["requestBody"]["content"]["application/json"]["examples"], path
            if "{conn}" in path:
                assert {"400", "404", "503"} <= set(op["responses"]), path
    consumer_delete = doc["paths"]["/api/v1/c/{conn}/streams/{key}/groups/{group}/consumers/{consumer}/delete"]["post"]
    assert "409" in consumer_delete["responses"]
    force = doc["components"]["schemas"]["ConsumerDeleteBody"]["properties"]["force"]
    assert force["type"] == "boolean"


def test_each_route_serves_the_documented_method_only(doc, admin_user, api_token, r: redis.Redis) -> None:
    orders_bus(r)
    headers = bearer(api_token(admin_user))
    web = Client()
    for path, operations in doc["paths"].items():
        url = _fill(path)
        for method in ("get", "post"):
            if method == "post":  # a body that is not an object: refused before any action runs
                reply = web.post(url, "[]", content_type="application/json", **headers)
            else:
                reply = web.get(url, **headers)
            if method in operations:
                assert reply.status_code != 405, (method, url)
            else:
                assert reply.status_code == 405, (method, url)
    assert r.xlen("orders") == 10 and r.xlen("orders:dlq") == 3


# ------------------------------------------------------------------------------ replies are true


class Checker:
    """Calls operations and checks each reply against the document; remembers what it exercised."""

    def __init__(self, doc: dict[str, Any], token: str) -> None:
        self.doc = doc
        self.headers = bearer(token)
        self.web = Client()
        self.seen: set[tuple[str, str]] = set()

    def schema_for(self, path: str, method: str, status: int, content_type: str) -> dict[str, Any]:
        response = self.doc["paths"][path][method]["responses"].get(str(status))
        assert response is not None, f"{method.upper()} {path}: status {status} is not documented"
        if "$ref" in response:
            response = self.doc["components"]["responses"][response["$ref"].rsplit("/", 1)[-1]]
        return response["content"][content_type]["schema"]

    def call(self, method: str, path: str, body: Any = None, *, status: int, query: str = "", anonymous: bool = False,
             **values: str) -> Any:
        url = _fill(path, **values) + query
        headers = {} if anonymous else self.headers
        if method == "post":
            reply = self.web.post(url, json.dumps(body if body is not None else {}), content_type="application/json",
                                  **headers)
        else:
            reply = self.web.get(url, **headers)
        assert reply.status_code == status, (method, url, reply.content[:300])
        content_type = reply["Content-Type"].split(";")[0]
        schema = self.schema_for(path, method, status, content_type)
        if content_type == "application/json":
            data = reply.json()
            OAS31Validator({**schema, "components": self.doc["components"]}).validate(data)
        else:
            data = reply.content.decode()
        if status < 400:
            self.seen.add((path, method))
        return data


@pytest.fixture
def bus(r: redis.Redis) -> SimpleNamespace:
    return orders_bus(r)


def test_every_operation_answers_as_documented(doc, admin_user, api_token, bus, settings) -> None:
    settings.BUSCONSOLE_JOBS_PER_USER = 20  # every job-starting operation once (no worker runs them here)
    c = Checker(doc, api_token(admin_user))
    S = "/api/v1/c/{conn}/streams/"
    K = S + "{key}/"
    G = K + "groups/{group}/"
    D = "/api/v1/c/{conn}/dlq/"
    dlq = {"key": seg("orders:dlq")}

    c.call("get", "/api/v1/connections/", status=200)
    c.call("get", S, status=200)
    c.call("get", S, status=200, query="?sort=length&count=1")
    # stream families: the snapshot's rows (none yet), the rows of one pass, a family's members, a bad count
    assert c.call("get", "/api/v1/c/{conn}/families/", status=200)["source"] == "none"
    families = c.call("get", "/api/v1/c/{conn}/families/", status=200, query="?now=1")
    assert any(row["pattern"] == "orders" for row in families["families"])
    c.call("get", "/api/v1/c/{conn}/families/{family}/", status=200, query="?count=5")
    c.call("get", "/api/v1/c/{conn}/families/", status=400, query="?count=0")
    c.call("get", K, status=200)
    c.call("get", K + "entries/", status=200, query="?count=3")
    c.call("post", K + "entries/", {"fields": {"type": "order.created", "data": {"order_id": 99}}}, status=201)
    c.call("get", K + "groups/", status=200)
    # payload search: matches, a bad expression's 400
    found = c.call("get", K + "search/", status=200, query="?q=type%20%3D%3D%20%22order.created%22&limit=2")
    assert found["matches"] and found["scanned"] >= len(found["matches"])
    c.call("get", K + "search/", status=400, query="?q=type%20%3D%3D")
    # the journey of one event: from a search of the stream; an entry ID without its one stream is a 400
    trip = c.call("get", "/api/v1/c/{conn}/journey/", status=200, query="?q=order.created&stream=orders")
    assert trip["found"] and trip["steps"][0]["kind"] == "publish"
    c.call("get", "/api/v1/c/{conn}/journey/", status=400, query="?q=1-1&stream=orders&stream=x")
    # export: the GET's body is a streamed file, read here rather than by call()
    exported = c.web.get(_fill(K + "export") + "?format=csv", **c.headers)
    assert exported.status_code == 200
    assert exported["Content-Type"] == "text/csv; charset=utf-8"
    assert b"".join(exported.streaming_content).startswith(b'"id","time","fields.')  # type: ignore[attr-defined]  # a streaming response: django-stubs type the test client's answer without streaming_content
    c.seen.add((K + "export", "get"))
    c.call("get", K + "export", status=400, query="?format=xml")
    c.call("post", K + "export", {"format": "parquet", "from": "-", "to": "+"}, status=202)
    c.call("get", G + "pending/", status=200)
    c.call("get", G + "consumers/", status=200)
    c.call("post", G + "claim", {"ids": bus.ids[:2], "consumer": "w2", "min_idle_ms": 0}, status=200)
    c.call("post", G + "autoclaim", {"consumer": "w3", "min_idle_ms": 0, "count": 1}, status=200)
    c.call("post", G + "ack", {"ids": [bus.ids[0]]}, status=200)
    c.call("post", G + "rewind", {"to": "0", "dry_run": True}, status=200)
    c.call("post", G + "rewind", {"to": bus.ids[5]}, status=200)
    c.call("post", K + "replay", {"start": "-", "end": "+", "dry_run": True}, status=200)
    replay_job = c.call("post", K + "replay", {"start": bus.ids[0], "end": bus.ids[1], "target": "copy"}, status=202)
    c.call("get", D, status=200)
    c.call("get", D + "{key}/", status=200, **dlq)
    c.call("post", D + "{key}/requeue", {"ids": [bus.dlq_ids[0]]}, status=200, **dlq)
    c.call("post", D + "{key}/requeue", {"all": True, "up_to": bus.dlq_ids[0]}, status=202, **dlq)
    # requeue the dead letters a search matches: the count, the job, a bad expression
    counted = c.call("post", D + "{key}/search/requeue", {"q": "order", "dry_run": True}, status=200, **dlq)
    nothing = {"q": "matches-no-dead-letter", "up_to": counted["up_to"] or bus.dlq_ids[0]}  # moves none
    c.call("post", D + "{key}/search/requeue", nothing, status=202, **dlq)
    c.call("post", D + "{key}/search/requeue", {"q": "type ==", "dry_run": True}, status=400, **dlq)
    # DLQ triage: the counts, one count's dead letters listed and requeued (a dry run, a job), bad filters
    triage = c.call("get", D + "{key}/triage/", status=200, query="?limit=100", **dlq)
    first = triage["signatures"][0]["filter"]
    c.call("get", D + "{key}/", status=200, query="?no_group=true", **dlq)
    counted = c.call("post", D + "{key}/triage/requeue", {**first, "dry_run": True}, status=200, **dlq)
    nothing = {"signature": "matches-no-dead-letter", "up_to": counted["up_to"] or bus.dlq_ids[0]}
    c.call("post", D + "{key}/triage/requeue", nothing, status=202, **dlq)
    c.call("post", D + "{key}/triage/requeue", {"group": "x", "no_group": True, "dry_run": True}, status=400, **dlq)
    c.call("get", D + "{key}/triage/", status=400, query="?before=x", **dlq)
    c.call("post", D + "{key}/delete", {"ids": [bus.dlq_ids[1]]}, status=200, **dlq)
    c.call("post", D + "{key}/purge", {"up_to": bus.dlq_ids[2], "confirm": "orders:dlq"}, status=200, **dlq)

    # the event bus's delayed retries: one member as the bus packs it
    import hashlib

    import msgpack

    member = msgpack.packb([b"type", b"order.created", b"id", b"evt-9", b"_retries", b"1", b"_group", b"billing"])
    bus.r.zadd("{orders}:retry", {member: 1_700_000_000_000})
    retry_ref = "1700000000000-" + hashlib.sha1(member).hexdigest()
    c.call("get", "/api/v1/c/{conn}/retries/", status=200)
    c.call("get", K + "retries/", status=200)
    c.call("post", K + "retries/retry", {"all": True, "up_to": 1_700_000_000_000, "dry_run": True}, status=200)
    c.call("post", K + "retries/dead-letter", {"refs": [retry_ref]}, status=200)
    c.call("post", K + "retries/retry", {"refs": [retry_ref]}, status=200)
    c.call("post", K + "retries/delete", {"refs": [retry_ref]}, status=200)

    job_id = str(replay_job["job"])
    c.call("get", "/api/v1/jobs/", status=200)
    c.call("get", "/api/v1/jobs/{job_id}", status=200, job_id=job_id)
    c.call("post", "/api/v1/jobs/{job_id}/cancel", status=200, job_id=job_id)
    c.call("post", "/api/v1/jobs/{job_id}/resume", status=200, job_id=job_id)
    c.call("get", "/api/v1/audit/", status=200)
    # saved views
    saved = c.call("post", "/api/v1/views/", {"name": "orders, oldest first", "url": "/c/default/streams/orders/?order=asc",
                                              "shared": True}, status=201)
    c.call("get", "/api/v1/views/", status=200, query="?mine=true")
    c.call("post", "/api/v1/views/{view_id}/delete", status=200, view_id=str(saved["id"]))
    c.call("post", "/api/v1/views/", {"name": "away", "url": "https://evil.example/"}, status=400)
    c.call("post", "/api/v1/views/{view_id}/delete", status=404, view_id=str(saved["id"]))
    # annotations: a deploy marker on a stream, the list, a refusal
    c.call("post", "/api/v1/annotations", {"text": "deploy v1.4", "tags": ["deploy"], "connection": "default",
                                           "stream": "orders", "time": 1_795_350_600_000}, status=201)
    c.call("get", "/api/v1/annotations", status=200, query="?connection=default&from=2026-11-22T10:00:00Z")
    c.call("post", "/api/v1/annotations", {"text": ""}, status=400)

    c.call("post", K + "trim", {"maxlen": 8, "dry_run": True}, status=200)
    c.call("post", K + "trim", {"minid": bus.ids[1]}, status=200)
    c.call("post", K + "delete", {"ids": [bus.ids[2], "1-1"], "dry_run": True}, status=200)
    c.call("post", K + "delete", {"ids": [bus.ids[2]]}, status=200)
    consumer = G + "consumers/{consumer}/delete"
    owner = next(c["name"].decode() for c in bus.r.xinfo_consumers("orders", "billing") if c["pending"])
    c.call("post", consumer, {}, status=409, consumer=seg(owner))  # it still owns pending entries
    c.call("post", consumer, {"force": True}, status=200, consumer=seg(owner))
    c.call("post", G + "delete", {"confirm": "billing"}, status=200)
    c.call("get", "/api/v1/openapi.json", status=200)
    c.call("get", "/api/v1/docs/", status=200)

    # Refusals have the documented error shape too.
    c.call("get", "/api/v1/connections/", status=401, anonymous=True)
    c.call("get", K, status=404, key="missing")
    c.call("get", "/api/v1/jobs/{job_id}", status=404, job_id="999999999")
    c.call("get", K + "entries/", status=400, query="?count=0")
    c.call("post", G + "ack", {"ids": "all"}, status=400)
    c.call("post", G + "ack", {"ids": ["1-0"], "padding": "x" * 300_000}, status=413)
    settings.BUSCONSOLE_JOBS_PER_USER = 1  # the user's jobs are still queued: one more is a 409
    c.call("post", K + "export", {"format": "csv", "from": "-", "to": "+"}, status=409)

    documented = {(path, method) for path, operations in doc["paths"].items() for method in operations}
    assert documented - c.seen == set(), "operations this test does not exercise yet"
    assert Job.objects.filter(kind="dlq.requeue_all").exists()


# ------------------------------------------------------------------------------- served, and read


def test_the_document_is_served_to_logged_in_callers_only(client: Client, viewer_client: Client, doc) -> None:
    anonymous = client.get("/api/v1/openapi.json")
    assert anonymous.status_code == 401
    assert anonymous.json()["error"]["code"] == "unauthorized"
    served = viewer_client.get("/api/v1/openapi.json")
    assert served.status_code == 200
    assert served.json() == json.loads(json.dumps(doc))


def test_the_reference_page_needs_a_login_and_loads_only_static_scripts(client: Client, viewer_client: Client) -> None:
    anonymous = client.get("/api/v1/docs/")
    assert anonymous.status_code == 302
    assert anonymous["Location"].startswith("/login/?next=/api/v1/docs/")
    served = viewer_client.get("/api/v1/docs/")
    assert served.status_code == 200
    html = served.content.decode()
    scripts = re.findall(r"<script\b([^>]*)>(.*?)</script>", html, flags=re.S)
    assert scripts and all('src="' in attrs and not body.strip() for attrs, body in scripts)
    assert not re.search(r"\son[a-z]+\s*=", html)  # no inline event handlers
    for url in re.findall(r'(?:src|href)="/static/([^"]+)"', html):
        assert finders.find(url), url
    policy = served.get("Content-Security-Policy", "")
    script_src = re.search(r"script-src ([^;]*)", policy)
    assert script_src and "unsafe" not in script_src.group(1), policy
