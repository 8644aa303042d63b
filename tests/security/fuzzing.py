"""The API fuzz run's world and checks (``test_fuzz.py`` runs them; ``make fuzz`` runs it longer).

The monitored Redis's seeded objects (:func:`seed_bus`) and the inputs that name them, copies of a
schemathesis case that name real objects (:func:`real_variants`), a byte-for-byte snapshot of the
monitored database (DUMP and PTTL of every key) and its restore, one caller's run (:class:`FuzzRun`),
and the checks every reply goes through (:data:`CHECKS`).
"""

from __future__ import annotations

import copy
import os
import time
from collections import Counter
from dataclasses import dataclass, field
from typing import Any
from urllib.parse import quote, urlsplit

import redis
import requests
import schemathesis
from django.urls import Resolver404, resolve
from openapi_schema_validator import OAS31Validator
from schemathesis import Case, CheckContext, GenerationMode, Response
from schemathesis.checks import not_a_server_error
from schemathesis.core.parameters import ParameterLocation
from schemathesis.specs.openapi.checks import (
    allow_header_conformance,
    content_type_conformance,
    negative_data_rejection,
    response_headers_conformance,
    response_schema_conformance,
    status_code_conformance,
    unsupported_method,
)

from streams_app.views.api.openapi import openapi_document
from tests.conftest import AsgiServer
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
        return [{"conn": "default", "key": "orders", "group": "billing", "family": "orders"},
                {"conn": "default", "key": "orders", "group": "billing"},  # the one the IDs are real in, twice
                {"conn": "default", "key": seg(ODD_KEY), "group": seg(ODD_GROUP), "family": seg("*:dlq")},
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
