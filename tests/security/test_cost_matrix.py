"""The cost matrix (docs/api.md#bounded-cost): hostile expressions against every surface a search query reaches.

Rows: :data:`HOSTILE`, the expressions (nested comprehensions over literal lists and over the entry's
own lists, huge literals, regex bombs, deep nesting, string doubling), each with what it must do:
be refused with a 400 whose message names the reason, or run. Columns: :data:`SURFACES`, every way a
query is run for a user: the search (its page's htmx step and the API), the export (streamed, and a
background job's start and run) and the bulk actions fed by a search (replay matching, requeue matching,
ack matching: their counting previews and their starts). Every cell is one test; adding a surface is one
function and one entry in :data:`SURFACES`, adding an expression one row. (The live tail's filter has
its own row, with a websocket scenario: ``tests/security/test_cost_matrix_tail.py``.)

A refusal is the surface's own way of answering 400: the API's JSON error, an error page, the search
step's "Search refused" status line (htmx swaps no 4xx in), an action's error flash after its redirect;
whichever it is, the message must name the reason, and no job may start. An expression that runs must
end: a search answers (complete, or a partial result its budget stopped), an export is written whole, a
job ends ``done``; the entries its own data makes too costly (``DEAR`` of them here) are counted, not
matched. How long each takes, and whether ``/healthz`` stays within 100 ms meanwhile, is measured by
``bench/cost.py`` (no timed assertion in the suite, docs/performance.md#ratios-to-a-floor); here :func:`test_healthz_answers_
while_a_hostile_request_runs` checks on a real ASGI server that ``/healthz`` answers at all while the
dearest allowed requests run.
"""

from __future__ import annotations

import json
import re
import threading
from collections.abc import Callable
from dataclasses import dataclass
from html import unescape

import httpx
import pytest
import redis
from django.contrib.messages import get_messages
from django.test import Client

from streams_app.jobs import runner
from streams_app.jobs.models import Job
from tests.conftest import session_cookie
from tests.console.helpers import api, group_url, seg, stream_api, stream_url

KEY = "cost:orders"
DLQ = "{cost:orders}:dlq"
GROUP = "billing"
CHEAP, DEAR = 30, 3  # entries per stream: cheap ones, and ones whose lists and strings are long


def _list(n: int) -> str:
    return "[" + ",".join(str(i % 10) for i in range(n)) + "]"


L60, L300, L900 = _list(60), _list(300), _list(900)
REFUSED, RUNS = "refused", "runs"


@dataclass(frozen=True)
class Hostile:
    name: str
    text: str
    expect: str  # REFUSED or RUNS
    reason: str = ""  # words the refusal must say
    skipped: int = 0  # entries the search must count as too costly (of the DEAR ones)


HOSTILE = [
    Hostile("nested comprehensions over literal lists (the issue's)",
            f"{L60}.exists(v0,{L60}.exists(v1,{L60}.exists(v2,{L60}.exists(v3,false))))", REFUSED, "too costly"),
    Hostile("nested map building lists", f"{L60}.map(a, {L60}.map(b, {L60})).size() > 0", REFUSED, "too costly"),
    Hostile("huge literal lists, multiplied", f"{L300}.exists(a, {L300}.exists(b, a == b + data.n))", REFUSED,
            "too costly"),
    Hostile("huge literal list, alone", f"data.n in {L900}", RUNS),
    Hostile("huge string literal", 'data.s == "' + "x" * 1900 + '"', RUNS),
    Hostile("two literal comprehensions, allowed", f"{L60}.exists(a, {L60}.exists(b, a * b == data.n + 1000))",
            RUNS),
    Hostile("nested comprehensions over the entry's lists",
            "data.items.exists(a, data.items.exists(b, data.items.exists(c, a + b + c < 0)))", RUNS, skipped=DEAR),
    Hostile("string doubling over the entry's data", " + ".join(["data.s"] * 60) + ' == "x"', RUNS, skipped=DEAR),
    Hostile("string doubling in nested comprehensions",
            f'{L60}.exists(a, {L60}.exists(b, {L60}.exists(c, "{"y" * 100}" + "{"y" * 100}" == data.s)))',
            REFUSED, "too costly"),
    Hostile("regex bomb, nested quantifiers", 'data.s.matches("(a+)+$")', RUNS),
    Hostile("regex bomb, alternation", 'data.s.matches("((a|aa)+)+b$")', RUNS),
    Hostile("regex RE2 cannot run (backreference)", 'data.s.matches("(a)\\\\1")', REFUSED, "regular expression"),
    Hostile("regex too big", 'data.s.matches("((a{100}){100}){100}")', REFUSED, "regular expression"),
    Hostile("deep nesting, negations", "!" * 1990 + "true", REFUSED, "nested too deep"),
    Hostile("deep nesting, dotted levels", "data" + ".a" * 990 + " == 1", REFUSED, "nested too deep"),
    Hostile("deep nesting, brackets", "(" * 95 + "data.n == 1" + ")" * 95, REFUSED, "nested too deep"),
]  # fmt: skip


def _payload(i: int, *, dear: bool) -> dict[str, str]:
    """Cheap: 12 items, a 41-byte string. Dear: 300 items and 60,000 bytes, which the entry-sized
    bound refuses under nested comprehensions and 60-fold concatenation."""
    items, s = (list(range(300)), "a" * 60_000 + "!") if dear else (list(range(12)), "a" * 40 + "!")
    return {"type": "order.created", "data": json.dumps({"n": i, "s": s, "items": items})}


@dataclass
class Arena:
    """The streams every cell runs on, and the IDs the actions' forms carry."""

    first: str
    last: str
    dlq_last: str
    pending_last: str


@pytest.fixture
def arena(r: redis.Redis, settings, tmp_path) -> Arena:
    settings.BUSCONSOLE_EXPORT_DIR = str(tmp_path / "exports")
    for i in range(CHEAP + DEAR):
        fields = _payload(i, dear=i % 11 == 5)
        r.xadd(KEY, fields)
        r.xadd(DLQ, {**fields, "dlq_original_stream": KEY, "dlq_original_id": f"1-{i}", "dlq_group": GROUP,
                     "dlq_error": "TimeoutError", "dlq_retries": "3"})  # fmt: skip
    assert sum(1 for i in range(CHEAP + DEAR) if i % 11 == 5) == DEAR
    r.xgroup_create(KEY, GROUP, id="0")
    r.xreadgroup(GROUP, "worker", {KEY: ">"}, count=1000)
    ids = [i.decode() for i, _ in r.xrange(KEY)]
    return Arena(
        first=ids[0], last=ids[-1], dlq_last=r.xrevrange(DLQ, count=1)[0][0].decode(), pending_last=ids[-1]
    )


# ------------------------------------------------------------------------------------------ outcomes


@dataclass
class Outcome:
    """What a surface did with an expression: refused (with the message it gave), or ran to an end
    (``detail`` says what it answered; ``skipped`` the entries it counted as too costly, when it says)."""

    refused: bool
    message: str = ""
    detail: str = ""
    skipped: int | None = None


def _api_refusal(response) -> Outcome | None:
    if response.status_code == 400:
        return Outcome(True, response.json()["error"]["message"])
    return None


def _flash(response) -> str:
    return " ".join(str(m) for m in get_messages(response.wsgi_request))


def _job_ends(job_id: int) -> Outcome:
    job = runner.job_run(job_id)
    assert job is not None and job.state == Job.State.DONE, (job and job.state, job and job.error)
    return Outcome(False, detail=f"job {job.kind} done, {job.done} entries")


# ------------------------------------------------------------------------------------------ surfaces


def search_api(c: dict[str, Client], arena: Arena, text: str) -> Outcome:
    response = c["viewer"].get(stream_api(KEY, "search/"), {"q": text, "limit": 1000})
    if refused := _api_refusal(response):
        return refused
    assert response.status_code == 200, response.content[:300]
    body = response.json()
    assert body["complete"] or body["next"], body  # the whole range, or a partial result it says
    return Outcome(False, detail=f"scanned {body['scanned']}", skipped=body["too_costly"])


def search_page(c: dict[str, Client], arena: Arena, text: str) -> Outcome:
    response = c["viewer"].get(stream_url(KEY) + "search/", {"q": text}, HTTP_HX_REQUEST="true")
    assert response.status_code == 200
    body = response.content.decode()
    refused = re.search(r"Search refused: <span class=\"mono\">(.*?)</span>", body, re.S)
    if refused:
        return Outcome(True, unescape(refused.group(1)))
    status = re.search(r'data-complete="(\w+)"', body)
    assert status, body[:500]
    costly = re.search(r"<span data-costly-count>(\d+)</span>", body)
    return Outcome(False, detail=status.group(1), skipped=int(costly.group(1)) if costly else 0)


def export_streamed(c: dict[str, Client], arena: Arena, text: str) -> Outcome:
    response = c["viewer"].get(api(f"/c/default/streams/{seg(KEY)}/export"), {"format": "ndjson", "q": text})
    if refused := _api_refusal(response):
        return refused
    assert response.status_code == 200
    lines = b"".join(response.streaming_content).splitlines()  # type: ignore[attr-defined]  # a streaming response: django-stubs type the test client's answer without streaming_content
    return Outcome(False, detail=f"{len(lines)} lines")


def export_job(c: dict[str, Client], arena: Arena, text: str) -> Outcome:
    url = api(f"/c/default/streams/{seg(KEY)}/export")
    response = c["viewer"].post(url, {"format": "ndjson", "q": text}, content_type="application/json")
    if refused := _api_refusal(response):
        return refused
    assert response.status_code == 202, response.content[:300]
    return _job_ends(response.json()["job"])


def replay_preview(c: dict[str, Client], arena: Arena, text: str) -> Outcome:
    response = c["operator"].get(stream_url(KEY) + "search/replay/confirm/", {"q": text})
    if response.status_code == 400:
        return Outcome(True, response.content.decode())
    assert response.status_code == 200 and 'id="replay-count"' in response.content.decode()
    return Outcome(False, detail="counted")


def replay_start(c: dict[str, Client], arena: Arena, text: str) -> Outcome:
    form = {"q": text, "start": arena.first, "end": arena.last, "target": KEY + ":copy"}
    response = c["operator"].post(stream_url(KEY) + "search/replay/", form)
    assert response.status_code == 302
    job = Job.objects.filter(kind="replay").first()
    if job is None:
        return Outcome(True, _flash(response))
    return _job_ends(job.pk)


def requeue_preview(c: dict[str, Client], arena: Arena, text: str) -> Outcome:
    url = api(f"/c/default/dlq/{seg(DLQ)}/search/requeue")
    response = c["operator"].post(url, {"q": text, "dry_run": True}, content_type="application/json")
    if refused := _api_refusal(response):
        return refused
    assert response.status_code == 200
    return Outcome(False, detail=f"count {response.json()['count']}")


def requeue_start(c: dict[str, Client], arena: Arena, text: str) -> Outcome:
    url = api(f"/c/default/dlq/{seg(DLQ)}/search/requeue")
    response = c["operator"].post(url, {"q": text, "up_to": arena.dlq_last}, content_type="application/json")
    if refused := _api_refusal(response):
        return refused
    assert response.status_code == 202, response.content[:300]
    return _job_ends(response.json()["job"])


def ack_preview(c: dict[str, Client], arena: Arena, text: str) -> Outcome:
    response = c["operator"].get(group_url(KEY, GROUP) + "search/ack/confirm/", {"q": text})
    if response.status_code == 400:
        return Outcome(True, response.content.decode())
    assert response.status_code == 200 and 'id="ack-count"' in response.content.decode()
    return Outcome(False, detail="counted")


def ack_start(c: dict[str, Client], arena: Arena, text: str) -> Outcome:
    response = c["operator"].post(
        group_url(KEY, GROUP) + "search/ack/", {"q": text, "up_to": arena.pending_last}
    )
    assert response.status_code == 302
    flash = _flash(response)
    if not flash.startswith("Acknowledged"):
        return Outcome(True, flash)
    return Outcome(False, detail=flash)


def journey_api(c: dict[str, Client], arena: Arena, text: str) -> Outcome:
    response = c["viewer"].get(api("/c/default/journey/"), {"q": text, "stream": KEY, "by": "search"})
    if refused := _api_refusal(response):
        return refused
    assert response.status_code == 200, response.content[:300]
    coverage = response.json()["coverage"]
    assert coverage["complete"] or coverage["next"], coverage  # the whole stream, or where to continue
    return Outcome(False, detail=f"read {coverage['entries_read']}", skipped=response.json()["too_costly"])


def journey_page(c: dict[str, Client], arena: Arena, text: str) -> Outcome:
    response = c["viewer"].get("/c/default/journey/", {"q": text, "stream": KEY, "by": "search"})
    body = response.content.decode()
    if response.status_code == 400:
        refused = re.search(r'<p class="warn-text" role="alert" id="journey-error">(.*?)</p>', body, re.S)
        assert refused, body[:500]
        return Outcome(True, unescape(refused.group(1)))
    assert response.status_code == 200 and 'id="journey-summary"' in body
    return Outcome(False, detail="shown")


SURFACES: dict[str, Callable[[dict[str, Client], Arena, str], Outcome]] = {
    "search page": search_page,
    "search API": search_api,
    "export, streamed": export_streamed,
    "export, background job": export_job,
    "replay matching, count": replay_preview,
    "replay matching, job": replay_start,
    "requeue matching, count": requeue_preview,
    "requeue matching, job": requeue_start,
    "ack matching, count": ack_preview,
    "ack matching": ack_start,
    "journey page": journey_page,
    "journey API": journey_api,
}


@pytest.mark.parametrize("hostile", HOSTILE, ids=[h.name for h in HOSTILE])
@pytest.mark.parametrize("surface", list(SURFACES))
def test_each_hostile_expression_is_refused_with_its_reason_or_runs_to_an_end(
    arena: Arena, viewer_client: Client, operator_client: Client, surface: str, hostile: Hostile
) -> None:
    clients = {"viewer": viewer_client, "operator": operator_client}
    outcome = SURFACES[surface](clients, arena, hostile.text)
    print(f"{surface} / {hostile.name}: {outcome}")
    if hostile.expect == REFUSED:
        assert outcome.refused, f"{hostile.name} ran on {surface}: {outcome.detail}"
        assert hostile.reason in outcome.message, outcome.message[:500]
        assert not Job.objects.exists()
    else:
        assert not outcome.refused, outcome.message[:500]
        if outcome.skipped is not None:
            assert outcome.skipped == hostile.skipped


def test_every_surface_of_a_search_query_is_in_the_matrix() -> None:
    """Each view that compiles a search query has its column (a new one must add its own)."""
    assert set(SURFACES) == {
        "search page", "search API", "export, streamed", "export, background job", "replay matching, count",
        "replay matching, job", "requeue matching, count", "requeue matching, job", "ack matching, count",
        "ack matching", "journey page", "journey API",
    }  # fmt: skip


# ------------------------------------------------------------------------- /healthz meanwhile (real ASGI)

DEAREST = [
    "data.items.exists(a, data.items.exists(b, data.items.exists(c, a + b + c < 0)))",
    f"{L60}.exists(a, {L60}.exists(b, a * b == data.n + 1000))",
]


@pytest.mark.parametrize("text", DEAREST, ids=["over the entry's lists", "over literal lists"])
@pytest.mark.slow
def test_healthz_answers_while_a_hostile_request_runs(asgi_server, viewer, r: redis.Redis, text: str) -> None:
    """The dearest allowed searches (a few ms of CEL an entry, under the bound) over 6,000 entries run
    until their 2 s budget stops them; ``/healthz``, asked meanwhile on its own connection, answers, and
    the search answers a partial result that says where to continue."""
    pipe = r.pipeline(transaction=False)
    for i in range(6000):
        pipe.xadd(KEY, {"data": json.dumps({"n": i, "items": list(range(20))})})
    pipe.execute()
    cookies = session_cookie(viewer)
    hostile: dict[str, object] = {}

    def search() -> None:
        with httpx.Client(base_url=asgi_server.url, cookies=cookies, timeout=60) as http:
            hostile["reply"] = http.get(stream_api(KEY, "search/"), params={"q": text})
        hostile["done"] = True

    thread = threading.Thread(target=search)
    answered_meanwhile = 0
    with httpx.Client(base_url=asgi_server.url, timeout=60) as http:
        thread.start()
        while "done" not in hostile:
            reply = http.get("/healthz")
            assert reply.status_code == 200 and reply.text == "ok"
            answered_meanwhile += "done" not in hostile
    thread.join()
    reply = hostile["reply"]
    assert isinstance(reply, httpx.Response) and reply.status_code == 200, reply
    body = reply.json()
    print(f"{text[:40]}: /healthz answered {answered_meanwhile} times during a search that scanned "
          f"{body['scanned']} entries in {body['elapsed_ms']} ms")  # fmt: skip
    assert answered_meanwhile > 0
    assert not body["complete"] and body["next"] == body["to_id"] and body["too_costly"] == 0
