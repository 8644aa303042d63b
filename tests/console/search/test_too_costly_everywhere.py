"""Every caller that evaluates a search query says how many entries it left out as too costly
(docs/api.md#bounded-cost): an entry whose own data makes a data-dependent expression dearer than the per-entry bound is not
handed to CEL (:mod:`eventbus.search.cost`), is no match, and is counted. The search page and API
already said so; here the exports (the streamed download's audit row, the background job's progress,
page, finishing audit row and JSON), the count previews of the bulk actions fed by a search (replay,
requeue, ack, and ack's result) and ``python -m eventbus inspect --search``.

The data: lists the query runs a comprehension nested in a comprehension over. A list of 1,000 numbers
is far over the bound (150 already is), a list of 10 or 2 far under. The expected matches are worked
out here in plain Python over the lists the test wrote; the expected count of entries too costly is the
number of 1,000-item entries the test wrote, whatever the code says.
"""

from __future__ import annotations

import json
import re
from html import unescape

import pytest
import redis
from django.test import Client

from eventbus.__main__ import main
from streams_app.audit.models import AuditEvent
from streams_app.exports import files
from streams_app.jobs import runner
from tests.console.helpers import CONN, api, bearer, dlq_url, group_url, seg, stream_url

QUERY = "data.items.exists(x, data.items.exists(y, x == y + 3))"
DEAR = list(range(1000))  # 10^6 iterations: over the bound, so never evaluated (and it would match)
MATCHING = list(range(10))  # 3 == 0 + 3: matches
PLAIN = [0, 1]  # no two items 3 apart
# The stream's lists in order: 4 dear entries among 4 matching and 3 plain ones.
LISTS = [MATCHING, DEAR, PLAIN, MATCHING, DEAR, DEAR, PLAIN, MATCHING, DEAR, PLAIN, MATCHING]
DEAR_COUNT = sum(1 for items in LISTS if items is DEAR)


def _matches(items: list[int]) -> bool:
    """The query's answer in plain Python, for an entry that is evaluated at all."""
    return any(x == y + 3 for x in items for y in items)


def _write(r: redis.Redis, key: str, extra: dict[str, str] | None = None) -> tuple[list[str], list[str]]:
    """The entries of :data:`LISTS` on ``key``; returns (every ID, the IDs evaluated and matching)."""
    ids = []
    for items in LISTS:
        ids.append(r.xadd(key, {"type": "t", "data": json.dumps({"items": items}), **(extra or {})}).decode())
    assert DEAR_COUNT == 4 and len(ids) == 11
    expected = [i for i, items in zip(ids, LISTS, strict=True) if items is not DEAR and _matches(items)]
    return ids, expected


COSTLY_TEXT = re.compile(r"(\d+) entr(?:y|ies) too costly to evaluate")


def _said(text: str) -> list[int]:
    """Every count of entries too costly that ``text`` states, in the console's one wording."""
    return [int(n) for n in COSTLY_TEXT.findall(unescape(re.sub(r"<[^>]+>", "", text)))]


# ------------------------------------------------------------------------------------------ exports


@pytest.fixture
def exports_dir(settings, tmp_path):
    settings.BUSCONSOLE_EXPORT_DIR = str(tmp_path / "exports")
    return tmp_path / "exports"


def _export_url(key: str, rest: str = "") -> str:
    return api(f"/c/{CONN}/streams/{seg(key)}/export{rest}")


def test_a_download_audits_how_many_entries_were_too_costly(r: redis.Redis, viewer_client: Client) -> None:
    _, expected = _write(r, "costly")
    response = viewer_client.get(_export_url("costly"), {"format": "ndjson", "q": QUERY})
    assert response.status_code == 200, response.content[:300]
    lines = b"".join(response.streaming_content).splitlines()  # type: ignore[attr-defined]  # a streaming response: django-stubs type the test client's answer without streaming_content
    assert [json.loads(line)["id"] for line in lines] == expected
    row = AuditEvent.objects.get(action="export")
    assert (row.outcome, row.affected, row.parameters["scanned"]) == ("ok", len(expected), len(LISTS))
    assert row.parameters["too_costly"] == DEAR_COUNT


def test_a_background_export_keeps_the_count_across_parts_and_a_resume(
    r: redis.Redis, viewer_client: Client, exports_dir, monkeypatch
) -> None:
    """Parts of two pages of two entries each; the run is killed in its second part, after it evaluated
    that part's first page (two dear entries): the resumed run counts each entry too costly once."""
    ids, expected = _write(r, "costly")
    monkeypatch.setattr(files, "PAGE", 2)
    monkeypatch.setattr(files, "PART_PAGES", 2)
    real = files.encoded_pages
    calls = {"n": 0}

    def dies_after_one_page(pages):
        yield next(pages)
        raise RuntimeError("worker killed")

    def killed_in_the_second_part(pages, **kwargs):
        calls["n"] += 1
        return real(dies_after_one_page(pages) if calls["n"] == 2 else pages, **kwargs)

    monkeypatch.setattr(files, "encoded_pages", killed_in_the_second_part)
    started = viewer_client.post(
        _export_url("costly"), {"format": "ndjson", "q": QUERY}, content_type="application/json"
    )
    assert started.status_code == 202, started.content
    job_id = started.json()["job"]
    job = runner.job_run(job_id)
    assert job.state == "failed"
    # What the saved parts covered: the entries up to the saved cursor (the first part: 4 entries).
    cursor = job.progress["cursor"]
    saved = [items for i, items in zip(ids, LISTS, strict=True) if _le(i, cursor)]
    assert LISTS[4] is LISTS[5] is DEAR  # the killed part's first page: counted, then not saved
    assert len(saved) == 4 and job.progress["too_costly"] == sum(1 for items in saved if items is DEAR) == 1
    page = viewer_client.get(f"/jobs/{job_id}/").content.decode()
    assert _said(page) == [1]  # the count so far, on a job that did not finish

    runner.job_resume(job_id=job_id)
    job = runner.job_run(job_id)
    assert job.state == "done" and job.progress["too_costly"] == DEAR_COUNT
    lines = (exports_dir / job.progress["file"]).read_bytes().splitlines()
    assert [json.loads(line)["id"] for line in lines] == expected
    assert _said(job.error) == [DEAR_COUNT]
    page = viewer_client.get(f"/jobs/{job_id}/").content.decode()
    assert _said(page) == [DEAR_COUNT]  # said once, on the finished job's page
    finished = AuditEvent.objects.filter(action="export.finished", parameters__job=job_id).latest("pk")
    assert finished.parameters["too_costly"] == DEAR_COUNT and _said(finished.error) == [DEAR_COUNT]
    body = viewer_client.get(api(f"/jobs/{job_id}")).json()
    assert _said(body["error"]) == [DEAR_COUNT]


def _le(entry_id: str, other: str) -> bool:
    def parts(value: str) -> tuple[int, int]:
        ms, seq = value.split("-")
        return int(ms), int(seq)

    return parts(entry_id) <= parts(other)


# ------------------------------------------------------------------------------- bulk action previews


def test_the_replay_preview_says_how_many_entries_were_too_costly(
    r: redis.Redis, operator_client: Client
) -> None:
    _, expected = _write(r, "costly")
    body = operator_client.get(stream_url("costly") + "search/replay/confirm/", {"q": QUERY}).content.decode()
    assert f'<strong id="replay-count">{len(expected)}</strong>' in body
    assert 'id="replay-too-costly"' in body and _said(body) == [DEAR_COUNT]


DLQ = "{costly}:dlq"
DEAD = {"dlq_original_stream": "costly", "dlq_group": "billing", "dlq_error": "ValueError: bad"}


def test_the_requeue_preview_and_its_api_say_how_many_were_too_costly(
    r: redis.Redis, operator, operator_client: Client, api_token
) -> None:
    _, expected = _write(r, DLQ, DEAD)
    body = operator_client.get(dlq_url(DLQ) + "search/requeue/confirm/", {"q": QUERY}).content.decode()
    assert f'<strong id="requeue-count">{len(expected)}</strong>' in body
    assert 'id="requeue-too-costly"' in body and _said(body) == [DEAR_COUNT]
    counted = Client().post(
        api(f"/c/{CONN}/dlq/{seg(DLQ)}/search/requeue"), json.dumps({"q": QUERY, "dry_run": True}),
        content_type="application/json", **bearer(api_token(operator)),
    )  # fmt: skip
    assert counted.status_code == 200, counted.content
    assert (counted.json()["count"], counted.json()["too_costly"]) == (len(expected), DEAR_COUNT)


def test_the_ack_preview_and_the_ack_say_how_many_were_too_costly(
    r: redis.Redis, operator_client: Client
) -> None:
    ids, expected = _write(r, "costly")
    r.xgroup_create("costly", "billing", id="0")
    r.xreadgroup("billing", "worker", {"costly": ">"}, count=100)
    url = group_url("costly", "billing") + "search/ack/"
    body = operator_client.get(url + "confirm/", {"q": QUERY}).content.decode()
    assert f'<strong id="ack-count">{len(expected)}</strong>' in body
    assert 'id="ack-too-costly"' in body and _said(body) == [DEAR_COUNT]
    [up_to] = re.findall(r'name="up_to" value="([^"]+)"', body)
    done = operator_client.post(url, {"q": QUERY, "up_to": up_to}, follow=True).content.decode()
    assert _said(done) == [DEAR_COUNT]
    left = [p["message_id"].decode() for p in r.xpending_range("costly", "billing", "-", "+", 100)]
    assert left == [i for i in ids if i not in expected]  # the dear entries stay pending
    row = AuditEvent.objects.get(action="ack")
    assert (row.affected, row.parameters["too_costly"]) == (len(expected), DEAR_COUNT)


# ------------------------------------------------------------------------------------- command line


def test_the_cli_search_says_how_many_were_not_evaluated(r: redis.Redis, url: str, capsys) -> None:
    _, expected = _write(r, "costly")
    assert main(["inspect", "--url", url, "--json", "costly", "--search", QUERY, "--limit", "100"]) == 0
    doc = json.loads(capsys.readouterr().out)
    assert [e["id"] for e in doc["entries"]] == expected
    assert (doc["scanned"], doc["too_costly"]) == (len(LISTS), DEAR_COUNT)
    assert main(["inspect", "--url", url, "costly", "--search", QUERY, "--limit", "100"]) == 0
    text = capsys.readouterr().out
    assert f"({DEAR_COUNT} entries too costly for the query were not evaluated)" in text
