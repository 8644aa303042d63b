"""A dead letter's own page by role and by convention, with Django's test client.

The Chromium tests (``tests/browser/test_dead_letter_page.py``) press the buttons; these check what the
page offers to whom, the conventions that have no browser test, and the refusals.
"""

from __future__ import annotations

import json
import re

import pytest
import redis
from django.test import Client

from tests.console.helpers import dlq_url, stream_url


def _page(client: Client, key: str, entry_id: str) -> str:
    response = client.get(f"{dlq_url(key)}entries/{entry_id}/")
    assert response.status_code == 200, response.content[:300]
    return response.content.decode()


def _fact(body: str, name: str) -> str:
    match = re.search(rf'data-fact="{name}">(.*?)</(?:span|p)>', body, re.S)
    assert match, name
    return re.sub(r"<[^>]+>", "", match.group(1)).strip()


@pytest.fixture
def eventbus_dead(r: redis.Redis) -> str:
    return r.xadd(
        "orders:dlq",
        {
            "type": "t",
            "data": "{}",
            "dlq_original_stream": "orders",
            "dlq_original_id": "5-0",
            "dlq_error": "KeyError: 'sku'",
            "dlq_retries": "2",
        },
    ).decode()


def test_buttons_follow_the_roles(viewer_client, operator_client, admin_client_, eventbus_dead: str) -> None:
    viewer = _page(viewer_client, "orders:dlq", eventbus_dead)
    assert 'data-action="requeue-one"' not in viewer and "requeueing needs the operator role" in viewer
    operator = _page(operator_client, "orders:dlq", eventbus_dead)
    assert 'data-action="requeue-one"' in operator and 'data-action="delete-one"' not in operator
    admin = _page(admin_client_, "orders:dlq", eventbus_dead)
    assert 'data-action="requeue-one"' in admin and 'data-action="delete-one"' in admin
    # both post to the DLQ's own routes, with CSRF, and come back to the DLQ's list
    assert (
        f'action="{dlq_url("orders:dlq")}requeue/"' in admin
        and f'action="{dlq_url("orders:dlq")}delete/"' in admin
    )
    assert admin.count('name="csrfmiddlewaretoken"') >= 3  # the two forms and the logout
    assert admin.count(f'name="next" value="{dlq_url("orders:dlq")}"') == 2


def test_read_only_mode_shows_no_buttons(admin_client_, settings, eventbus_dead: str) -> None:
    settings.BUSCONSOLE_READ_ONLY = True
    body = _page(admin_client_, "orders:dlq", eventbus_dead)
    assert 'data-action="requeue-one"' not in body and "requeue and delete are disabled" in body


def test_admin_deletes_from_the_page(admin_client_, r: redis.Redis, eventbus_dead: str) -> None:
    response = admin_client_.post(
        f"{dlq_url('orders:dlq')}delete/", {"ids": eventbus_dead, "next": dlq_url("orders:dlq")}
    )
    assert response.status_code == 302 and response["Location"] == dlq_url("orders:dlq")
    assert r.xlen("orders:dlq") == 0


def test_the_seed_streams_module_convention(viewer_client, r: redis.Redis) -> None:
    dead = r.xadd("jobs:dlq", {"task": "resize", "_retries": "4"}).decode()
    body = _page(viewer_client, "jobs:dlq", dead)
    assert "dead letter · streams" in body
    assert _fact(body, "retries") == "4"
    assert _fact(body, "origin") == "jobs"
    assert _fact(body, "original-id") == "—"
    assert "The entry names no error." in body
    assert re.findall(r'<dt class="mono">(\w+)', body) == ["task"]  # _retries is bookkeeping, not payload


def test_a_configured_convention(viewer_client, settings, r: redis.Redis) -> None:
    settings.BUSCONSOLE_DLQ_PATTERNS = json.dumps(
        [
            {
                "name": "jobs-dead",
                "match": "jobs:*:dead",
                "target": "strip_suffix::dead",
                "error_field": "reason",
                "retries_field": "attempts",
                "original_id_field": "orig",
                "failed_at_field": "ts",
                "failed_at_unit": "s",
                "group_field": "grp",
                "traceback_field": "tb",
            }
        ]
    )
    original = r.xadd("jobs:mail", {"to": "a@example.org"}).decode()
    dead = r.xadd(
        "jobs:mail:dead",
        {
            "to": "a@example.org",
            "reason": "SMTP 550",
            "attempts": "7",
            "orig": original,
            "ts": "1714557600",
            "grp": "mailers",
            "tb": "line 1\nline 2",
        },
    ).decode()
    body = _page(viewer_client, "jobs:mail:dead", dead)
    assert "dead letter · jobs-dead" in body
    assert (_fact(body, "error"), _fact(body, "retries"), _fact(body, "group")) == (
        "SMTP 550",
        "7",
        "mailers",
    )
    assert _fact(body, "failed-at") == "2024-05-01 10:00:00 UTC"
    assert f'href="{stream_url("jobs:mail", f"entries/{original}/")}"' in body
    assert '<pre class="payload" id="dead-letter-traceback">line 1\nline 2</pre>' in body
    assert re.findall(r'<dt class="mono">(\w+)', body) == ["to"]


def test_a_key_that_is_no_dlq_and_a_missing_entry(viewer_client, r: redis.Redis) -> None:
    entry_id = r.xadd("orders", {"a": "1"}).decode()
    assert viewer_client.get(f"{dlq_url('orders')}entries/{entry_id}/").status_code == 400
    r.xadd("orders:dlq", {"a": "1"})
    assert viewer_client.get(f"{dlq_url('orders:dlq')}entries/1-1/").status_code == 404


def test_the_dlq_list_links_each_row_here(viewer_client, eventbus_dead: str) -> None:
    body = viewer_client.get(dlq_url("orders:dlq")).content.decode()
    assert f'href="{dlq_url("orders:dlq")}entries/{eventbus_dead}/"' in body
