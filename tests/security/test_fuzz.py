"""Property-based fuzzing of the JSON API with schemathesis, against a real console and a real Redis.

The OpenAPI document (:func:`streams_app.views.api.openapi.openapi_document`) drives the generation:
for every operation schemathesis sends the document's examples, then cases generated from its
schemas, valid ones and invalid ones, to the console served by uvicorn (``AsgiServer``) over real
HTTP. The monitored Redis holds real objects: the ``orders`` stream with a consumer group whose
consumer owns pending entries, an eventbus dead-letter queue, a stream and a group whose names need
escaping, and two jobs. Path parameters name those objects most of the time and random ones the
rest, and valid bodies often carry the real entry IDs and names (``real_objects_*`` below), so most
cases get past the 404s and do real work.

The run is repeated for each caller: anonymous, viewer, operator and admin (API tokens), and an
admin of a read-only console. Every reply must

- not be a 5xx, and answer with a status, content type, headers and body that the document gives
  for that operation (schemathesis's conformance checks), carrying no field the document leaves out;
- refuse invalid input (schemathesis's ``negative_data_rejection``), and another method with a 405
  that has an ``Allow`` header;
- if it is a refusal, be the documented ``{"error": {"code", "message"}}`` and nothing else;
- match the caller: an anonymous caller gets 401 (the reference page: a redirect to the login),
  a viewer and a read-only console never get a POST through.

Anonymous, viewer and read-only runs must leave the monitored Redis (db 0) byte-for-byte as it was:
``DUMP`` and ``PTTL`` of every key, compared after every request. Operator and admin runs change it
for real; whenever a request did, the seeded state is restored, so every case starts from the same
objects. The console's own Redis (db 1: sessions, cache, broker) may change and is not compared.

What the fuzzer found is kept at the end of the file as plain regression tests.

Bounded for the suite: :data:`EXAMPLES` generated cases per operation and caller on top of the
document's examples, and schemathesis's coverage phase (boundary values, missing fields, wrong types
and methods, about 50 cases per operation) for the admin, who reaches every code path; derandomized,
so a CI run is reproducible. ``make fuzz`` sets ``BUSCONSOLE_FUZZ_EXAMPLES`` much higher, which also
runs the coverage phase for every caller. ``BUSCONSOLE_FUZZ_VERBOSE=1`` prints requests per operation.
"""

from __future__ import annotations

import copy
import itertools
import os
import re
import time
from collections import Counter
from collections.abc import Iterator
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import hypothesis.strategies as st
import pytest
import redis
import requests
import schemathesis
from django.test import Client
from django.urls import Resolver404, resolve
from openapi_schema_validator import OAS31Validator
from schemathesis import Case, CheckContext, GenerationMode, Response
from schemathesis.checks import not_a_server_error
from schemathesis.config import HealthCheck
from schemathesis.core.parameters import ParameterLocation
from schemathesis.generation.meta import TestPhase
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from busconsole.celery import app as celery_app
from streams_app.views.api.openapi import openapi_document
from tests.conftest import AsgiServer
from tests.console.helpers import bearer, post_json
from tests.console.services.helpers import eventbus_dead_letter, orders_bus

DEFAULT_EXAMPLES = 20
#: Generated cases per operation and caller, on top of the document's examples.
EXAMPLES = int(os.environ.get("BUSCONSOLE_FUZZ_EXAMPLES", DEFAULT_EXAMPLES))
#: A longer run than the suite's (``make fuzz``) also runs the coverage phase for every caller.
THOROUGH = EXAMPLES > DEFAULT_EXAMPLES

ROLES = ["anonymous", "viewer", "operator", "admin", "read_only"]
#: Callers who must leave the monitored Redis exactly as it was.
READERS = {"anonymous", "viewer", "read_only"}

#: A stream and a group whose names need escaping in a path: a slash, a space, a percent sign, non-ASCII.
ODD_KEY = "odd/key 100%·ü"
ODD_GROUP = "g/1 ü"
#: A stream and a group whose names are not UTF-8 (with a NUL and a slash).
BINARY_KEY = b"bin\xff\x00/key"
BINARY_GROUP = b"g\xfe"
#: The largest entry ID Redis takes.
EDGE_ID = f"{2**64 - 1}-{2**64 - 1}"


# ------------------------------------------------------------------------------- the monitored Redis


Snapshot = dict[bytes, tuple[bytes, int]]


def redis_snapshot(r: redis.Redis) -> Snapshot:
    """Every key of the monitored database with its serialized value (DUMP) and time to live (PTTL).

    DUMP covers everything a key holds: a stream's entries, its groups with their last-delivered IDs
    and pending entries lists, its consumers."""
    keys = sorted(r.scan_iter(count=1000))
    with r.pipeline(transaction=False) as pipe:
        for key in keys:
            pipe.dump(key)
            pipe.pttl(key)
        replies = pipe.execute()
    return {key: (replies[2 * i], replies[2 * i + 1]) for i, key in enumerate(keys)}


def redis_restore(r: redis.Redis, snapshot: Snapshot) -> None:
    """Put the monitored database back to ``snapshot``: what a mutating case changed is undone."""
    with r.pipeline(transaction=True) as pipe:
        pipe.flushdb()
        for key, (dumped, ttl) in snapshot.items():
            pipe.restore(key, max(ttl, 0), dumped, replace=True)
        pipe.execute()


def describe_changes(before: Snapshot, after: Snapshot) -> str:
    changed = sorted(k for k in before.keys() & after.keys() if before[k] != after[k])
    return (f"added {sorted(after.keys() - before.keys())}, removed {sorted(before.keys() - after.keys())}, "
            f"changed {changed}")


# -------------------------------------------------------------------------------------- the bus


def seg(name: str | bytes) -> str:
    """A name as one path segment (every byte but the unreserved ones escaped, ``/`` included)."""
    return quote(name.encode() if isinstance(name, str) else name, safe="")


@dataclass
class Bus:
    """The real objects of the monitored Redis, and the inputs that name them."""

    stream_ids: list[str]
    dlq_ids: list[str]
    job_ids: list[int] = field(default_factory=list)

    def real_paths(self, path: str) -> list[dict[str, str]]:
        """Path parameters naming real objects for the operation at ``path`` (escaped, as sent)."""
        if "{job_id}" in path:
            return [{"job_id": str(job_id)} for job_id in self.job_ids]
        if "/dlq/" in path:
            return [{"conn": "default", "key": seg("orders:dlq")}, {"conn": "default", "key": seg(BINARY_KEY + b":dlq")}]
        if "{consumer}" in path:
            return [{"conn": "default", "key": "orders", "group": "billing", "consumer": name}
                    for name in ("worker-1", "idle-1")]
        return [{"conn": "default", "key": "orders", "group": "billing"},
                {"conn": "default", "key": "orders", "group": "billing"},  # the one the IDs are real in, twice
                {"conn": "default", "key": seg(ODD_KEY), "group": seg(ODD_GROUP)},
                {"conn": "default", "key": seg(BINARY_KEY), "group": seg(BINARY_GROUP)},
                {"conn": "default", "key": "edge", "group": "g"}]

    def real_bodies(self, path: str, body: dict[str, Any]) -> list[dict[str, Any]]:
        """``body`` with the fields it has set to real entry IDs and names, in two flavours."""
        dlq = "/dlq/" in path
        ids, stream = (self.dlq_ids if dlq else self.stream_ids), self.stream_ids
        swaps: dict[str, tuple[Any, Any]] = {
            "ids": (ids[:2], [*ids[:4], "0-1", EDGE_ID]),  # the first four stream entries are pending in ``billing``
            "up_to": (ids[-1], ids[0]),
            "confirm": ("orders:dlq" if dlq else "billing", "billing"),
            "consumer": ("worker-2", "worker-1"),
            "min_idle_ms": (0, 0),
            "start": (stream[2], "-"),
            "end": (stream[5], "+"),
            "to": (stream[3], EDGE_ID),
            "minid": (stream[4], EDGE_ID),
            "target": ("orders:copy", "orders"),
        }
        if not swaps.keys() & body.keys():
            return []
        return [{name: swaps[name][flavour] if name in swaps else value for name, value in body.items()}
                for flavour in (0, 1)]


def seed_bus(r: redis.Redis) -> Bus:
    """``orders`` (10 entries; group ``billing``: worker-1 owns 4 pending entries, idle-1 none) and its
    eventbus DLQ ``orders:dlq`` (3 dead letters); a stream and group with awkward names; a stream
    and group named in bytes that are not UTF-8, with a DLQ of binary dead letters; and a stream whose
    entry IDs sit at the edges (``0-1`` and the largest ID Redis takes), its group read to the end."""
    orders = orders_bus(r)
    r.xadd(ODD_KEY, {"type": "odd", "data": "{}"})
    r.xgroup_create(ODD_KEY, ODD_GROUP, id="0")
    r.xreadgroup(ODD_GROUP, "w ü", {ODD_KEY: ">"})
    original = r.xadd(BINARY_KEY, {b"\xff": b"\x00\xfe", "data": b"\x80not json"}).decode()
    r.xgroup_create(BINARY_KEY, BINARY_GROUP, id="0")
    r.xreadgroup(BINARY_GROUP, b"w\xff", {BINARY_KEY: ">"})
    r.xadd(BINARY_KEY + b":dlq", {**eventbus_dead_letter(0, original), "dlq_original_stream": BINARY_KEY,
                                  "dlq_error": b"\xffboom\x00", "data": b"\xfe"})
    for entry_id in ("0-1", "1-0", EDGE_ID):
        r.xadd("edge", {"n": entry_id}, id=entry_id)
    r.xgroup_create("edge", "g", id="0")
    r.xreadgroup("g", "w", {"edge": ">"})
    return Bus(stream_ids=orders.ids, dlq_ids=orders.dlq_ids)


def generated_valid(case: Case, location: ParameterLocation) -> bool:
    """Whether the case's ``location`` was generated valid: only those are swapped for real names
    (an invalid one, a job ID that is not a number, is the point of its case and stays)."""
    info = case.meta.components.get(location) if case.meta is not None else None
    return info is None or info.mode == GenerationMode.POSITIVE


def copy_case(case: Case) -> Case:
    """A copy of ``case`` with metadata of its own: schemathesis re-validates a changed case and
    records the result in its metadata, which ``Case.derive`` shares with the original."""
    variant = case.derive()
    object.__setattr__(variant, "_meta", copy.deepcopy(case.meta))
    return variant


def real_variants(bus: Bus, case: Case, *, bodies: bool) -> list[Case]:
    """Copies of ``case`` naming real objects: in the path, and with ``bodies`` in the body too."""
    variants: list[Case] = []
    if case.path_parameters and generated_valid(case, ParameterLocation.PATH):
        for params in bus.real_paths(case.operation.path):
            variant = copy_case(case)
            variant.path_parameters = {**case.path_parameters,
                                       **{k: v for k, v in params.items() if k in case.path_parameters}}
            variants.append(variant)
    if bodies and isinstance(case.body, dict) and generated_valid(case, ParameterLocation.BODY):
        for base in variants[:1] or [case]:
            for body in bus.real_bodies(case.operation.path, case.body):
                variant = copy_case(base)
                variant.body = body
                variants.append(variant)
    return variants


# ------------------------------------------------------------------------------------ the callers


@dataclass
class FuzzRun:
    """One caller's run over every operation: its HTTP session, and the figures the run reports."""

    role: str
    server: AsgiServer
    session: requests.Session
    r: redis.Redis
    bus: Bus
    seeded: Snapshot
    statuses: dict[str, Counter[int]] = field(default_factory=dict)
    started: float = field(default_factory=time.monotonic)
    waited: float = 0.0  # seconds spent waiting for the console's replies

    def call(self, case: Case) -> Response:
        sent = time.monotonic()
        response = case.call(base_url=self.server.url, session=self.session, timeout=30)
        self.waited += time.monotonic() - sent
        self.statuses.setdefault(case.operation.label, Counter())[response.status_code] += 1
        return response

    def after(self, case: Case, response: Response) -> None:
        """The monitored Redis after the call: unchanged for readers, back to the seed for the others."""
        now = redis_snapshot(self.r)
        if now == self.seeded:
            return
        redis_restore(self.r, self.seeded)  # the next case starts from the seeded objects either way
        if self.role in READERS:
            raise AssertionError(
                f"{self.role}: {case.method} {case.formatted_path} answered {response.status_code} and changed "
                f"the monitored Redis: {describe_changes(self.seeded, now)}"
            )


#: The run going on; the role check below reads it (schemathesis checks take no fixtures).
CURRENT: dict[str, FuzzRun] = {}


@schemathesis.check
def refusals_are_documented_errors(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """Every 4xx and 5xx is ``{"error": {"code": str, "message": str}}`` in JSON, nothing more."""
    if response.status_code < 400:
        return None
    content_type = response.headers.get("content-type", [""])[0].split(";")[0].strip()
    assert content_type == "application/json", f"a {response.status_code} answered {content_type!r}"
    body = response.json()
    assert isinstance(body, dict) and set(body) == {"error"}, body
    error = body["error"]
    assert isinstance(error, dict) and set(error) == {"code", "message"}, body
    assert isinstance(error["code"], str) and error["code"], body
    assert isinstance(error["message"], str) and error["message"], body
    return True


def _resolve(schema: dict[str, Any], components: dict[str, Any]) -> dict[str, Any]:
    while "$ref" in schema:
        schema = components["schemas"][schema["$ref"].rsplit("/", 1)[-1]]
    return schema


def undocumented(value: Any, schema: dict[str, Any], components: dict[str, Any], where: str = "") -> list[str]:
    """The fields of a reply that its schema does not name, as ``a.b[0].c`` paths.

    The reply models are open (a field may be added without breaking a client), so the schema
    check alone passes a reply carrying fields the document never mentions; this one does not.
    Of several ``anyOf``/``oneOf`` branches, the one the value matches is followed."""
    schema = _resolve(schema, components)
    branches = schema.get("anyOf") or schema.get("oneOf")
    if branches:
        matching = [b for b in branches if OAS31Validator({**b, "components": components}).is_valid(value)]
        found = [undocumented(value, b, components, where) for b in matching]
        return min(found, key=len) if found else []
    out: list[str] = []
    if isinstance(value, dict):
        properties = schema.get("properties")
        extra = schema.get("additionalProperties")
        for name, item in value.items():
            if properties is not None and name in properties:
                out += undocumented(item, properties[name], components, f"{where}.{name}")
            elif isinstance(extra, dict):
                out += undocumented(item, extra, components, f"{where}.{name}")
            elif properties is not None:
                out.append(f"{where}.{name}")
    elif isinstance(value, list) and isinstance(schema.get("items"), dict):
        for i, item in enumerate(value):
            out += undocumented(item, schema["items"], components, f"{where}[{i}]")
    return out


@schemathesis.check
def replies_are_fully_documented(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """Every field of a JSON reply is one the document describes for that operation and status."""
    content_type = response.headers.get("content-type", [""])[0].split(";")[0].strip()
    if content_type != "application/json" or case.method.upper() != case.operation.method.upper():
        return None  # another method's 405 is the refusal shape, checked above
    document = openapi_document()
    described = document["paths"][case.operation.path][case.method.lower()]["responses"].get(
        str(response.status_code))
    if described is None:
        return None  # status_code_conformance reports it
    if "$ref" in described:
        described = document["components"]["responses"][described["$ref"].rsplit("/", 1)[-1]]
    schema = described.get("content", {}).get("application/json", {}).get("schema")
    if schema is None:
        return None
    extra = undocumented(response.json(), schema, document["components"])
    assert not extra, f"{case.method} {case.path} {response.status_code}: undocumented fields {extra[:10]}"
    return True


def routed(response: Response) -> bool:
    """Whether the URL as sent reaches a view: one that does not (a job ID that is not a number)
    is a 404 for everyone, logged in or not, before any view or login check runs."""
    try:
        resolve(urlsplit(response.request.url).path)
    except Resolver404:
        return False
    return True


#: POSTs that change nothing on a monitored bus, so a viewer and a read-only console may send them: a
#: background export (it reads the stream into a file), saved views (bookmarks in the console's database)
#: and a job's cancel (one's own job, for a viewer: it stops work, what was done stays done). An annotation
#: is a note in the console's database too: a read-only console takes it (a viewer still may not write one).
READ_POSTS = frozenset({"/api/v1/c/{conn}/streams/{key}/export", "/api/v1/views/", "/api/v1/views/{view_id}/delete",
                        "/api/v1/jobs/{job_id}/cancel", "/api/v1/annotations"})


@schemathesis.check
def callers_get_what_their_role_allows(ctx: CheckContext, response: Response, case: Case) -> bool | None:
    """Anonymous callers are refused (401; the reference page redirects to the login); viewers and a
    read-only console never get a POST through but the READ_POSTS."""
    run = CURRENT.get("run")
    if run is None:
        return None
    status = response.status_code
    if run.role == "anonymous" and routed(response):
        if case.operation.path != "/api/v1/docs/":
            expected = 401
        else:  # the reference page itself sends an anonymous browser to the login page
            expected = 302 if case.method.upper() == "GET" else 405
        assert status == expected, f"an anonymous {case.method} answered {status}"
    if run.role in ("viewer", "read_only") and case.method.upper() == "POST" and case.operation.path not in READ_POSTS:
        assert status >= 400, f"a {run.role} POST went through: {status}"
    return True


CHECKS = [
    not_a_server_error,
    status_code_conformance,
    content_type_conformance,
    response_headers_conformance,
    response_schema_conformance,
    negative_data_rejection,
    unsupported_method,
    allow_header_conformance,
    refusals_are_documented_errors,
    replies_are_fully_documented,
    callers_get_what_their_role_allows,
]


# -------------------------------------------------------------------------------------- fixtures


@pytest.fixture(params=ROLES)
def fuzz_run(request, asgi_server: AsgiServer, r: redis.Redis, settings, viewer, operator, admin_user,
             api_token) -> Iterator[FuzzRun]:
    role = request.param
    # No worker runs the jobs the seed and the fuzzer start: the per-user limit would turn all but the first
    # into 409s (tests/console/jobs/test_limits.py tests the limit).
    settings.BUSCONSOLE_JOBS_PER_USER = 10_000
    bus = seed_bus(r)
    with requests.Session() as admin:
        admin.headers["Authorization"] = f"Bearer {api_token(admin_user, 'seed')}"
        bus.job_ids = [
            _job(admin, asgi_server, "/api/v1/c/default/streams/orders/replay",
                 {"start": "-", "end": "+", "target": "orders:copy"}),
            _job(admin, asgi_server, f"/api/v1/c/default/dlq/{seg('orders:dlq')}/requeue",
                 {"all": True, "up_to": bus.dlq_ids[-1]}),
        ]
    session = requests.Session()
    users = {"viewer": viewer, "operator": operator, "admin": admin_user, "read_only": admin_user}
    if role in users:
        session.headers["Authorization"] = f"Bearer {api_token(users[role], 'fuzz')}"
    if role == "read_only":
        settings.BUSCONSOLE_READ_ONLY = True
    run = FuzzRun(role=role, server=asgi_server, session=session, r=r, bus=bus, seeded=redis_snapshot(r))
    CURRENT["run"] = run
    yield run
    CURRENT.clear()
    session.close()
    celery_app.control.purge()  # no worker runs here: the queued jobs must not reach a later test's worker
    _report(request, run)


def _job(session: requests.Session, server: AsgiServer, path: str, body: dict[str, Any]) -> int:
    reply = session.post(server.url + path, json=body, timeout=30)
    assert reply.status_code == 202, reply.text
    return reply.json()["job"]


def _report(request, run: FuzzRun) -> None:
    """The run's figures on the terminal: requests per operation, statuses, time."""
    reporter = request.config.pluginmanager.get_plugin("terminalreporter")
    capture = request.config.pluginmanager.get_plugin("capturemanager")
    if reporter is None or capture is None:
        return
    counts = sorted(sum(statuses.values()) for statuses in run.statuses.values()) or [0]
    statuses = sum(run.statuses.values(), Counter())
    with capture.global_and_fixture_disabled():
        reporter.write_line(
            f"\nfuzz {run.role}: {len(run.statuses)} operations, {sum(counts)} requests "
            f"({counts[0]}-{counts[-1]} per operation), statuses {dict(sorted(statuses.items()))}, "
            f"{time.monotonic() - run.started:.1f} s ({run.waited:.1f} s waiting for replies)"
        )
        if os.environ.get("BUSCONSOLE_FUZZ_VERBOSE"):
            for label, per_status in sorted(run.statuses.items()):
                reporter.write_line(f"  {sum(per_status.values()):5d}  {label}  {dict(sorted(per_status.items()))}")


@pytest.fixture
def fuzz_schema(fuzz_run: FuzzRun) -> schemathesis.BaseSchema:
    schema = schemathesis.openapi.from_dict(openapi_document())
    schema.config.update(base_url=fuzz_run.server.url, suppress_health_check=[HealthCheck.all])
    schema.config.generation.update(
        modes=[GenerationMode.POSITIVE, GenerationMode.NEGATIVE], max_examples=EXAMPLES, deterministic=True,
        database="none",
        # The document names its bearer and cookie schemes; generated credentials would replace the
        # caller's token, and turn every run into an anonymous one.
        with_security_parameters=False,
    )
    schema.config.phases.coverage.enabled = THOROUGH or fuzz_run.role == "admin"
    turns: dict[str, Iterator[int]] = {}

    @schema.hook("map_case")
    def real_objects_in_turn(context, case: Case) -> Case:
        """The document's examples and the coverage phase's cases (not drawn by Hypothesis): every
        other one names real objects in its path, in turn."""
        if case.meta is None or case.meta.phase.name == TestPhase.FUZZING:
            return case
        variants = real_variants(fuzz_run.bus, case, bodies=False)
        turn = next(turns.setdefault(case.operation.label, itertools.count()))
        return variants[turn // 2 % len(variants)] if variants and turn % 2 else case

    @schema.hook("flatmap_case")
    def real_objects_often(context, case: Case) -> st.SearchStrategy[Case]:
        """Generated cases: most name real objects, with real IDs in valid bodies. The real ones come
        first: Hypothesis favours (and shrinks towards) the first branch."""
        if case.meta is None or case.meta.phase.name != TestPhase.FUZZING:
            return st.just(case)
        variants = real_variants(fuzz_run.bus, case, bodies=True)
        return st.sampled_from([*variants, case])

    return schema


lazy_schema = schemathesis.pytest.from_fixture("fuzz_schema")


@pytest.mark.slow
@pytest.mark.django_db(transaction=True)
@lazy_schema.parametrize()
def test_fuzz_every_operation(case: Case, fuzz_run: FuzzRun) -> None:
    """Every operation, as this caller: the checks above on every reply, the monitored Redis after it."""
    response = fuzz_run.call(case)
    try:
        case.validate_response(response, checks=CHECKS)
    finally:
        fuzz_run.after(case, response)


# ------------------------------------------------------------------------- what the fuzzer found


@pytest.mark.parametrize("body", [
    {"consumer": "sweeper", "min_idle_ms": 0.0, "count": 2.0},
    {"consumer": "sweeper", "min_idle_ms": 1e3},
])
def test_integral_json_numbers_are_integers(operator, api_token, r: redis.Redis, body: dict[str, Any]) -> None:
    """JSON Schema's ``integer`` is any number with a zero fraction, so the document says ``2.0`` is a
    count; the fuzzer sent ``{"min_idle_ms": 0.0}`` and got a 400. A fraction stays a 400."""
    orders_bus(r)
    url = "/api/v1/c/default/streams/orders/groups/billing/autoclaim"
    reply = post_json(url, body, api_token(operator))
    assert reply.status_code == 200, reply.content
    refused = post_json(url, {**body, "min_idle_ms": 0.5}, api_token(operator))
    assert refused.status_code == 400 and refused.json()["error"]["message"].startswith("min_idle_ms:")


def test_audit_since_takes_what_its_schema_describes(viewer, api_token) -> None:
    """``since`` was described as any string; the fuzzer sent ``ø`` and ``0`` and got 400s. The schema
    now gives the date-time pattern the server checks, and a value outside it is refused."""
    schema = next(p["schema"] for p in openapi_document()["paths"]["/api/v1/audit/"]["get"]["parameters"]
                  if p["name"] == "since")
    pattern = re.compile(schema["pattern"])
    web, token = Client(), api_token(viewer)
    for value in ("2026-11-22T10:30:00Z", "2026-11-22T10:30", "2026-11-22T10:30:00.5+02:00"):
        assert pattern.search(value), value
        assert web.get("/api/v1/audit/", {"since": value}, **bearer(token)).status_code == 200, value
    for value in ("0", "ø", "", "2026-11-22", "1700000000000-0"):
        assert not pattern.search(value), value
        reply = web.get("/api/v1/audit/", {"since": value}, **bearer(token))
        assert reply.status_code == 400 and reply.json()["error"]["message"].startswith("since:"), value


def test_date_times_are_described_exactly(admin_user, api_token, r: redis.Redis) -> None:
    """The date-time pattern let through ``1279-97-34T04:49`` and ``0000-00-00T00:00``, which the
    server refuses; it now describes real calendar date-times from 1970 on, and they are taken."""
    replay = openapi_document()["components"]["schemas"]["ReplayBody"]["properties"]["start"]
    pattern = re.compile(next(form["pattern"] for form in replay["anyOf"] if "T" in form["pattern"]))
    for value in ("1279-97-34T04:49", "0000-00-00T00:00", "1969-12-31T23:59Z", "2026-02-29T10:00",
                  "2026-04-31T10:00", "2026-11-22T24:00", "2026-11-22T10:60", "2026-11-22T10:30+24:00"):
        assert not pattern.search(value), value
    orders_bus(r)
    token = api_token(admin_user)
    for value in ("2024-02-29T10:00", "2000-02-29T00:00:00.123456Z", "2026-12-31T23:59:59+23:59", "1970-01-01T00:00"):
        assert pattern.search(value), value
        reply = post_json("/api/v1/c/default/streams/orders/trim", {"minid": value, "dry_run": True}, token)
        assert reply.status_code == 200, (value, reply.content)
