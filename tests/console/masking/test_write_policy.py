"""The masking policy for people who can write (:mod:`streams_app.masking.copies`).

- A copy keeps the masking of its source: a replay of ``hr`` into ``hr-copy``, which no rule covers, is
  refused to an operator (and leaves no copy in Redis and a denied audit row); into the stream itself, or
  into a target whose rules cover the source's, it runs, and a viewer reads the copies masked.
- Matching on a masked field needs the unmasked role: the dry run's ``match`` was compared on the stored
  bytes, so its count told a right guess (1) from a wrong one (0). Now both guesses get the same 403.
- A role that may reveal may do both; the replay's own audit row says what its copy or match escaped.

Counts come from the test's own data (a plain-Python count), copies are read back with XRANGE.
"""

from __future__ import annotations

import json

import pytest
import redis
from django.test import Client

from busconsole.env import parse_mask_rules
from streams_app.audit.models import AuditEvent
from streams_app.jobs import runner as jobs
from streams_app.jobs.models import Job
from tests.console.helpers import seg

SSN = "123-45-6789"
CARD = "4000123412341234"
MASK = "••••"


def replay_url(key: str) -> str:
    return f"/api/v1/c/default/streams/{seg(key)}/replay"


@pytest.fixture
def hr(settings, db, r: redis.Redis) -> list[str]:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(
        json.dumps(
            [
                {"stream": "hr", "field": "data.ssn", "action": "mask"},
                {"stream": "hr", "field": "card", "action": "hash"},
            ]
        )
    )
    settings.BUSCONSOLE_UNMASKED_ROLES = ["admin"]
    ids = [
        r.xadd("hr", {"type": "hire", "data": json.dumps({"ssn": SSN, "name": "Ann"}), "card": CARD}).decode(),
        r.xadd("hr", {"type": "leave", "data": json.dumps({"ssn": "999-00-1111", "name": "Bo"}), "card": "1"}).decode(),
    ]
    return ids


def post(client: Client, key: str, body: dict):
    return client.post(replay_url(key), json.dumps(body), content_type="application/json")


def last_audit(action: str) -> AuditEvent:
    return AuditEvent.objects.filter(action=action).order_by("-pk").first()


# ------------------------------------------------------------------------------------------ copies


@pytest.mark.parametrize("dry_run", [True, False])
def test_a_copy_into_an_unmasked_stream_is_refused(hr, operator_client: Client, r: redis.Redis, dry_run) -> None:
    response = post(operator_client, "hr", {"start": "-", "end": "+", "target": "hr-copy", "dry_run": dry_run})
    assert response.status_code == 403, response.content
    message = response.json()["error"]["message"]
    assert "keeps the masking of its source" in message and "data.ssn" in message
    assert not r.exists("hr-copy") and not Job.objects.exists()
    row = last_audit("replay.count" if dry_run else "replay")
    assert row.outcome == AuditEvent.Outcome.DENIED and "hr-copy" in row.error


def test_a_copy_into_the_stream_itself_runs_and_stays_masked(hr, operator_client, viewer_client, r) -> None:
    response = post(operator_client, "hr", {"start": "-", "end": "+"})
    assert response.status_code in (200, 202), response.content
    jobs.job_run(response.json()["job"])
    assert r.xlen("hr") == 4  # two copies, by Redis's count
    shown = viewer_client.get(f"/api/v1/c/default/streams/{seg('hr')}/entries/")
    assert SSN.encode() not in shown.content and CARD.encode() not in shown.content


def test_a_copy_into_a_target_masked_alike_runs_and_stays_masked(hr, settings, operator_client, viewer_client, r) -> None:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(
        json.dumps(
            [
                {"stream": "hr", "field": "data.ssn", "action": "mask"},
                {"stream": "hr", "field": "card", "action": "hash"},
                {"stream": "hr-*", "field": "data", "action": "mask"},  # wider: the whole field
                {"stream": "hr-*", "field": "card", "action": "remove"},  # stronger than the hash
            ]
        )
    )
    response = post(operator_client, "hr", {"start": "-", "end": "+", "target": "hr-copy"})
    assert response.status_code in (200, 202), response.content
    jobs.job_run(response.json()["job"])
    assert r.xlen("hr-copy") == 2
    shown = viewer_client.get(f"/api/v1/c/default/streams/{seg('hr-copy')}/entries/")
    assert shown.status_code == 200
    assert SSN.encode() not in shown.content and CARD.encode() not in shown.content


def test_a_weaker_rule_on_the_target_does_not_cover(hr, settings, operator_client, r) -> None:
    settings.BUSCONSOLE_MASK_RULES = parse_mask_rules(
        json.dumps(
            [
                {"stream": "hr", "field": "data.ssn", "action": "mask"},
                {"stream": "hr-copy", "field": "data.ssn", "action": "hash"},  # a hash tells equal values
            ]
        )
    )
    response = post(operator_client, "hr", {"start": "-", "end": "+", "target": "hr-copy", "dry_run": True})
    assert response.status_code == 403
    assert not r.exists("hr-copy")


def test_a_role_that_may_reveal_may_copy_and_its_row_says_so(hr, admin_client_: Client, r: redis.Redis) -> None:
    response = post(admin_client_, "hr", {"start": "-", "end": "+", "target": "hr-copy"})
    assert response.status_code in (200, 202), response.content
    row = last_audit("replay")
    assert row.outcome == AuditEvent.Outcome.OK
    assert sorted(row.parameters["unmasked_copy"]) == ["card (hash)", "data.ssn (mask)"]


# ------------------------------------------------------------------------------------------ matching


@pytest.mark.parametrize("field, guess", [("data", json.dumps({"ssn": SSN, "name": "Ann"})), ("card", CARD)])
def test_matching_on_a_masked_field_is_no_oracle(hr, operator_client: Client, r: redis.Redis, field, guess) -> None:
    right = post(operator_client, "hr", {"start": "-", "end": "+", "match": {field: guess}, "dry_run": True})
    wrong = post(operator_client, "hr", {"start": "-", "end": "+", "match": {field: "nope"}, "dry_run": True})
    assert right.status_code == wrong.status_code == 403
    assert right.json() == wrong.json()  # the same answer whatever the guess
    assert "Matching on a masked field" in right.json()["error"]["message"]
    assert last_audit("replay.count").outcome == AuditEvent.Outcome.DENIED


def test_matching_on_an_unmasked_field_counts_as_redis_holds_it(hr, operator_client: Client, r: redis.Redis) -> None:
    expected = sum(1 for _, f in r.xrange("hr") if f[b"type"] == b"hire")
    response = post(operator_client, "hr", {"start": "-", "end": "+", "match": {"type": "hire"}, "dry_run": True})
    assert response.status_code == 200, response.content
    assert response.json()["count"] == expected == 1


def test_a_role_that_may_reveal_may_match_and_its_row_says_so(hr, admin_client_: Client, r: redis.Redis) -> None:
    response = post(admin_client_, "hr", {"start": "-", "end": "+", "match": {"card": CARD}, "dry_run": True})
    assert response.status_code == 200 and response.json()["count"] == 1
    row = last_audit("replay.count")
    assert row.parameters["matched_masked"] == ["card (hash)"]
    assert CARD not in json.dumps(row.parameters)  # the audit log's readers do not see the value matched


def test_the_replay_page_says_why_it_refuses(hr, operator_client: Client, r: redis.Redis) -> None:
    page = operator_client.post(
        f"/c/default/streams/{seg('hr')}/replay/count/", {"start": "-", "end": "+", "target": "hr-copy"}
    )
    assert page.status_code == 403
    assert "keeps the masking of its source" in page.content.decode()
    assert not r.exists("hr-copy")
