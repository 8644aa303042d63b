"""The families page's bounded pass (``now=1``), a family's members page and their API as each role, against
figures counted in the test (tests/console/families_data.py); and the family settings refused at start-up
with the reason. The stored rows the page shows by default: test_families_stored.py."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from html import unescape

import pytest
import redis
from django.core.exceptions import ImproperlyConfigured
from django.test import Client

from busconsole.env import parse_family_delimiter, parse_stream_families
from eventbus.text import display_text
from tests.console.conftest import logged_in
from tests.console.families_data import CONFIGURED, expected_grouping, populate
from tests.console.helpers import CONN, api, seg, stream_url
from tests.servers import REPO

ROLES = ("viewer", "operator", "admin_user")


@pytest.fixture
def keyspace(r: redis.Redis, settings) -> dict[bytes, set[bytes]]:
    settings.BUSCONSOLE_STREAM_FAMILIES = parse_stream_families(CONFIGURED)
    populate(r)
    return expected_grouping(r)


@pytest.mark.parametrize("role", ROLES)
def test_every_role_reads_the_rows_and_the_api_says_the_same(request, role: str, keyspace, r: redis.Redis) -> None:
    client = logged_in(request.getfixturevalue(role))
    reply = client.get(api(f"/c/{CONN}/families/"), {"count": 1000, "now": 1})
    assert reply.status_code == 200, reply.content
    body = reply.json()
    assert body["complete"] and body["keys_total"] == body["looked_at"] == r.dbsize()
    assert {row["pattern"]: row["keys"] for row in body["families"]} == {
        display_text(glob): len(keys) for glob, keys in keyspace.items()
    }
    progress = next(row for row in body["families"] if row["pattern"] == "progress:*")
    assert progress["url"] == f"/c/{CONN}/families/{seg('progress:*')}/"
    assert progress["busiest"][0]["url"] == stream_url(progress["busiest"][0]["key"])

    page = client.get(f"/c/{CONN}/families/", {"count": 1000, "now": 1})
    assert page.status_code == 200
    text = page.content.decode()
    assert f"Looked at all {r.dbsize()} keys" in text
    cells = dict(re.findall(r'<tr data-family="([^"]+)">\s*<td>.*?</td>\s*<td class="num">(\d+)</td>', text, re.S))
    assert int(cells["progress:*"]) == len(keyspace[b"progress:*"])
    assert int(cells["tenant:*"]) == len(keyspace[b"tenant:*"])
    assert "audit trail" in text


def test_the_families_page_pages_its_rows(viewer_client: Client, keyspace) -> None:
    first = viewer_client.get(f"/c/{CONN}/families/", {"count": 2, "now": 1}).content.decode()
    assert len(re.findall(r"<tr data-family=", first)) == 2
    [more] = re.findall(r'<a rel="next" href="([^"]+)"', first)
    assert more.startswith("?")
    second = viewer_client.get(f"/c/{CONN}/families/" + unescape(more)).content.decode()
    shown = [re.findall(r'data-family="([^"]+)"', page) for page in (first, second)]
    assert len(shown[1]) == 2 and set(shown[0]).isdisjoint(shown[1])


def test_the_members_page_links_each_stream_and_pages_on(
    viewer_client: Client, keyspace, settings, r: redis.Redis
) -> None:
    settings.BUSCONSOLE_SCAN_BUDGET = 3000
    seen: set[str] = set()
    path = f"/c/{CONN}/families/{seg('task:*:events')}/"
    url, pages = path + "?count=250", 0
    while url:
        pages += 1
        response = viewer_client.get(url)
        assert response.status_code == 200
        text = response.content.decode()
        assert re.search(rf"Looked at \d+ of {r.dbsize()} keys for this page", text), text
        seen |= set(re.findall(r'<td><a class="mono" href="(/c/[^"]+)">', text))
        nxt = re.findall(r'<a rel="next" href="([^"]+)"', text)
        url = path + unescape(nxt[0]) if nxt else ""
    assert seen == {stream_url(key) for key in keyspace[b"task:*:events"]} and pages > 1
    settings.BUSCONSOLE_SCAN_BUDGET = 100_000
    members = viewer_client.get(api(f"/c/{CONN}/families/{seg('audit:*')}/"), {"count": 1000}).json()
    assert members["name"] == "audit trail" and members["kind"] == "configured"
    assert {row["key"].encode() for row in members["streams"]} == keyspace[b"audit:*"]
    assert members["next_cursor"] is None and members["complete"] and members["keys_total"] == r.dbsize()


def test_bad_query_values_are_a_400(viewer_client: Client, keyspace) -> None:
    for params in ({"count": 0}, {"offset": -1}, {"count": "x"}):
        assert viewer_client.get(api(f"/c/{CONN}/families/"), params).status_code == 400
        assert viewer_client.get(f"/c/{CONN}/families/", params).status_code == 400


@pytest.mark.parametrize(
    ("raw", "reason"),
    [
        ("progress:*", "not valid JSON"),
        ('{"match": "a:*"}', "must be a JSON list"),
        ("[1]", "BUSCONSOLE_STREAM_FAMILIES[0] must be a glob or an object"),
        ('[""]', "non-empty glob"),
        ('[{"match": "a:*", "where": 1}]', "unknown key(s) 'where'"),
        ('["a:*", "a:*"]', "given twice"),
        ('[{"name": "x", "match": "a:*"}, {"name": "x", "match": "b:*"}]', "the name 'x' is given twice"),
        ('[{"name": "<b>", "match": "a:*"}]', "name '<b>'"),
        ('["' + "a" * 600 + '"]', "at most 512"),
    ],
)
def test_bad_family_settings_are_refused_with_the_reason(raw: str, reason: str) -> None:
    with pytest.raises(ImproperlyConfigured) as refused:
        parse_stream_families(raw)
    assert reason in str(refused.value)


@pytest.mark.parametrize("raw", ["", "::", "*", "{", " ", "é"])
def test_bad_delimiters_are_refused(raw: str) -> None:
    with pytest.raises(ImproperlyConfigured, match="BUSCONSOLE_FAMILY_DELIMITER must be one printable"):
        parse_family_delimiter(raw)


@pytest.mark.slow
def test_a_bad_family_setting_stops_start_up() -> None:
    def start(**env: str) -> subprocess.CompletedProcess[str]:
        return subprocess.run(
            [sys.executable, "-c", "import django; django.setup()"], cwd=REPO, capture_output=True, text=True,
            env={**os.environ, "DJANGO_SETTINGS_MODULE": "busconsole.settings", **env}, timeout=60, check=False,
        )

    bad = start(BUSCONSOLE_STREAM_FAMILIES='["progress:*", 7]')
    assert bad.returncode != 0 and "ImproperlyConfigured" in bad.stderr
    assert "BUSCONSOLE_STREAM_FAMILIES[1] must be a glob or an object" in bad.stderr
    assert start(BUSCONSOLE_FAMILY_SCAN_BUDGET="5").returncode != 0
    ok = start(BUSCONSOLE_STREAM_FAMILIES='["progress:*", {"name": "tasks", "match": "task:*:events"}]')
    assert ok.returncode == 0, ok.stderr
