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

The callers' world (the seeded bus, the snapshots of the monitored Redis) and the checks are in
``tests/security/fuzzing.py``; what the fuzzer found is kept as plain regression tests in
``tests/security/test_api_schema_formats.py``.

Bounded for the suite: :data:`EXAMPLES` generated cases per operation and caller on top of the
document's examples, and schemathesis's coverage phase (boundary values, missing fields, wrong types
and methods, about 50 cases per operation) for the admin, who reaches every code path; derandomized,
so a CI run is reproducible. ``make fuzz`` sets ``BUSCONSOLE_FUZZ_EXAMPLES`` much higher, which also
runs the coverage phase for every caller. ``BUSCONSOLE_FUZZ_VERBOSE=1`` prints requests per operation.
"""

from __future__ import annotations

import itertools
import os
import time
from collections import Counter
from collections.abc import Iterator
from typing import Any

import hypothesis.strategies as st
import pytest
import redis
import requests
import schemathesis
from schemathesis import Case, GenerationMode
from schemathesis.config import HealthCheck
from schemathesis.generation.meta import TestPhase

from busconsole.celery import app as celery_app
from streams_app.views.api.openapi import openapi_document
from tests.conftest import AsgiServer
from tests.security.fuzzing import (
    CHECKS,
    CURRENT,
    EXAMPLES,
    ROLES,
    THOROUGH,
    FuzzRun,
    real_variants,
    redis_snapshot,
    seed_bus,
    seg,
)

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
